"""``fuseflow-hw synth / run / flash`` argument handling, the board table, the report parsers and
the host protocol framing (no FPGA tools needed)."""

import argparse
import asyncio
import gc
import json
import os
import shlex
import struct
import threading
import warnings

import numpy as np
import pytest
from amaranth.hdl import UnusedElaboratable

from fpga import host
from fpga.board_top import BoardTop, config_from_json, config_to_json, host_view
from fpga.boards import BOARDS, get_board
from fpga.families import FAMILIES
from fpga.host import tensor_from_arrays
from fpga.synth import _yosys_cells, prepare
from fuseflow.ir.numerics import Numerics
from fuseflow.ir.tensor import TensorData
from fuseflow.kernels import KERNELS
from fuseflow_cli.board_args import config_from_args
from fuseflow_cli.cli import main
from fuseflow_cli.errors import UserError
from hw.elaborate import GraphTop, HwConfig
from sw_sim import run_graph


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_flash_dry_run_prints_programmer_command(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ICEPROG", raising=False)
    (tmp_path / "top.bin").write_bytes(b"\0")
    (tmp_path / "synth_report.json").write_text(
        json.dumps({"board": "icebreaker", "bitstream": "top.bin"})
    )
    code, out, _ = _run(["flash", "--board", "icebreaker", str(tmp_path), "--dry-run"], capsys)
    assert code == 0
    assert shlex.split(out) == ["iceprog", str(tmp_path / "top.bin")]


def test_flash_dry_run_ulx3s_uses_openfpgaloader_env(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENFPGALOADER", "/opt/ofl/bin/openFPGALoader")
    (tmp_path / "top.bit").write_bytes(b"\0")
    (tmp_path / "synth_report.json").write_text(
        json.dumps({"board": "ulx3s-85f", "bitstream": "top.bit"})
    )
    code, out, _ = _run(["flash", "--board", "ulx3s-85f", str(tmp_path), "--dry-run"], capsys)
    assert code == 0
    assert shlex.split(out) == [
        "/opt/ofl/bin/openFPGALoader",
        "-b",
        "ulx3s",
        "-m",
        str(tmp_path / "top.bit"),
    ]


def test_flash_refuses_build_for_another_board(tmp_path, capsys):
    (tmp_path / "top.bin").write_bytes(b"\0")
    (tmp_path / "synth_report.json").write_text(
        json.dumps({"board": "icebreaker", "bitstream": "top.bin"})
    )
    code, _, err = _run(["flash", "--board", "ulx3s-85f", str(tmp_path), "--dry-run"], capsys)
    assert code == 2
    assert "built for board 'icebreaker', not 'ulx3s-85f'" in err


def test_flash_missing_build_dir(tmp_path, capsys):
    code, _, err = _run(
        ["flash", "--board", "icebreaker", str(tmp_path / "nope"), "--dry-run"], capsys
    )
    assert code == 2 and "nope" in err and "does not exist" in err


def test_synth_unknown_board_and_bad_arguments(tmp_path, capsys):
    code, _, err = _run(
        ["synth", "--kernel", "spmv", "--board", "de0nano", "-o", str(tmp_path)], capsys
    )
    assert code == 2 and "unknown board 'de0nano'" in err and "icebreaker" in err
    code, _, err = _run(["synth", "--board", "icebreaker", "-o", str(tmp_path)], capsys)
    assert code == 2 and "GRAPH.json, --kernel NAME or --model NAME" in err
    code, _, err = _run(["synth", "--kernel", "spmv", "--model", "gcn", "--board", "icebreaker",
                         "-o", str(tmp_path)], capsys)
    assert code == 2 and "give one of GRAPH.json, --kernel NAME or --model NAME" in err
    for bad in ("1", "-3"):
        code, _, err = _run(["synth", "--kernel", "spmv", "--ram-fifo-depth", bad, "--board",
                             "icebreaker", "-o", str(tmp_path)], capsys)
        assert code == 2 and f"--ram-fifo-depth {bad}: use 0" in err
    code, _, err = _run(["synth", "--kernel", "spmv", "--numerics", "float", "--board", "icebreaker",
                         "-o", str(tmp_path)], capsys)
    assert code == 2 and "--numerics float: float is sw_sim only" in err
    for item, want in (("Q=3", "no tensor 'Q'"), ("B:3", "'B:3': expected TENSOR=N"),
                       ("B=0", "'B=0': the capacity must be at least 1")):
        code, _, err = _run(["synth", "--kernel", "spmv", "--max-nnz", item, "--board", "icebreaker",
                             "-o", str(tmp_path)], capsys)
        assert code == 2 and want in err, (item, err)
    code, _, err = _run(
        ["synth", str(tmp_path / "g.json"), "--board", "icebreaker", "-o", str(tmp_path)], capsys
    )
    assert code == 2 and "g.json" in err and "does not exist" in err


def test_run_serial_port_errors_name_the_port(capsys):
    pytest.importorskip("serial")
    code, _, err = _run(
        [
            "run",
            "--board",
            "icebreaker",
            "--port",
            "/dev/fuseflow-no-such-tty",
            "--kernel",
            "spmv",
            "--size",
            "8",
            "--max-nnz",
            "B=16",
        ],
        capsys,
    )
    assert code == 2 and "/dev/fuseflow-no-such-tty" in err


def _rotl_xor(words) -> int:
    """The bridge's write checksum, written out from the protocol text (docstring of fpga.uart)."""
    c = 0
    for w in words:
        c = int(np.uint32((c << 1) & 0xFFFFFFFF) | np.uint32(c >> 31)) ^ w
    return c


class _LoopbackBoard:
    """A byte transport that plays the bridge's side of the protocol over a word dict.
    ``corrupt``: numbers of write transfers (counted from 0) whose first word arrives with bit 0
    flipped; ``drop``: numbers of write transfers that break the link (LinkError) instead."""

    def __init__(self, corrupt=(), drop=()) -> None:
        self.mem: dict[int, int] = {host.REG_CTRL: 2}  # CTRL reads done
        self.reply = b""
        self.corrupt, self.drop, self.writes = set(corrupt), set(drop), 0

    async def write(self, data: bytes) -> None:
        cmd = data[0]
        if cmd == 0x49:
            self.reply += struct.pack("<I", 0xC0FFEE)
            return
        addr, n = struct.unpack_from("<IH", data, 1)
        if cmd == 0x57:
            k, self.writes = self.writes, self.writes + 1
            if k in self.drop:
                self.drop.discard(k)
                raise host.LinkError("the cable was pulled")
            words = list(struct.unpack_from(f"<{n}I", data, 7))
            if k in self.corrupt:
                words[0] ^= 1
            for i, w in enumerate(words):
                self.mem[addr + i] = w
            if addr == host.REG_CTRL:
                self.mem[addr] = 2
            self.reply += b"K" + struct.pack("<I", _rotl_xor(words))
        else:
            self.reply += struct.pack(f"<{n}I", *[self.mem.get(addr + i, 0) for i in range(n)])

    async def read(self, n: int) -> bytes:
        out, self.reply = self.reply[:n], self.reply[n:]
        assert len(out) == n
        return out


def test_link_framing_and_bursts(monkeypatch):
    monkeypatch.setattr(host, "MAX_BURST", 5)  # force splitting into several commands
    board = _LoopbackBoard()
    link = host.BoardLink(board)
    words = [(i * 2654435761) & 0xFFFFFFFF for i in range(13)] + [-1]
    asyncio.run(link.write_words(100, words))
    assert [board.mem[100 + i] for i in range(len(words))] == [w & 0xFFFFFFFF for w in words]
    assert asyncio.run(link.read_words(100, len(words))) == [w & 0xFFFFFFFF for w in words]
    assert asyncio.run(link.ident()) == 0xC0FFEE


def test_a_transfer_received_wrong_is_sent_again(monkeypatch):
    monkeypatch.setattr(host, "MAX_BURST", 4)
    board = _LoopbackBoard(corrupt={1})
    link = host.BoardLink(board)
    words = list(range(100, 110))
    asyncio.run(link.write_words(7, words))
    assert [board.mem[7 + i] for i in range(10)] == words and link.resent == 1 and board.writes == 4
    always = _LoopbackBoard(corrupt=set(range(10)))
    with pytest.raises(host.LinkError, match="checksum"):
        asyncio.run(host.BoardLink(always).write_words(0, [5, 6]))


def test_a_broken_load_resumes_where_it_stopped(monkeypatch):
    """run_on_board with the same ``loaded`` dict after a LinkError sends only what the board has
    not confirmed, and the memory ends up as a clean load leaves it."""
    monkeypatch.setattr(host, "MAX_BURST", 8)
    g = KERNELS["spmv"](16)
    data = {t: TensorData.from_dense(np.eye(16, dtype=np.int64) * 3 if t == "B" else np.arange(16),
                                     g.tensors[t].fmt) for t in g.input_tensors()}
    mmap, _ = host_view(g, HwConfig())
    clean = _LoopbackBoard()
    full = asyncio.run(host.run_on_board(host.BoardLink(clean), g, data, mmap))
    board = _LoopbackBoard(drop={3})
    link = host.BoardLink(board)
    loaded: dict[str, int] = {}
    seen = []
    with pytest.raises(host.LinkError):
        asyncio.run(host.run_on_board(link, g, data, mmap, loaded=loaded))
    assert 0 < sum(loaded.values()) < sum(len(v) for v in host.load_words(g, data, mmap).values())
    again = asyncio.run(host.run_on_board(link, g, data, mmap, loaded=loaded,
                                          progress=lambda d, t: seen.append((d, t))))
    assert again.load_bytes < full.load_bytes and seen[-1][0] == seen[-1][1]
    assert {a: v for a, v in board.mem.items()} == {a: v for a, v in clean.mem.items()}


def test_yosys_stat_json_totals(tmp_path):
    """``stat -json``: the hierarchy totals under ``design``, else the sum over the modules."""
    by_type = {"SB_CARRY": 291, "SB_DFF": 96, "SB_LUT4": 3155}
    f = tmp_path / "top.stat.json"
    f.write_text(json.dumps({"modules": {"\\top": {"num_cells_by_type": by_type}},
                             "design": {"num_cells_by_type": by_type}}))
    assert _yosys_cells(f) == by_type
    modules = {"\\a": {"num_cells_by_type": {"SB_LUT4": 5}},
               "\\b": {"num_cells_by_type": {"SB_LUT4": 7, "SB_DFF": 1}}}
    f.write_text(json.dumps({"modules": modules}))
    assert _yosys_cells(f) == {"SB_LUT4": 12, "SB_DFF": 1}


def test_every_board_has_a_uart_and_a_platform():
    for name, board in BOARDS.items():
        platform = board.make_platform()
        assert platform.request("uart", 0, dir="-") is not None, name
        assert board.family is FAMILIES[board.family.name], name
        assert board.bitstream == board.family.bitstream and board.programmer is not None


class _SwSimBoard:
    """A board stand-in behind a pseudo-terminal: speaks the bridge protocol, keeps the host-port
    words, and on start runs sw_sim on the loaded arrays (a plumbing check of the serial path of
    ``fuseflow-hw run``: framing, pty I/O, memory map, decoding)."""

    def __init__(self, graph, cfg) -> None:
        self.graph, self.cfg = graph, cfg
        self.mmap, self.ident = host_view(graph, cfg)
        self.mem: dict[int, int] = {}
        self.master, slave = os.openpty()
        self.path = os.ttyname(slave)
        self._slave = slave
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            data += os.read(self.master, n - len(data))
        return data

    def _serve(self) -> None:
        while True:
            try:
                cmd = self._recv(1)[0]
            except OSError:
                return
            if cmd == 0x49:
                os.write(self.master, struct.pack("<I", self.ident))
                continue
            addr, n = struct.unpack("<IH", self._recv(6))
            if cmd == 0x57:
                words = struct.unpack(f"<{n}I", self._recv(4 * n))
                for i, w in enumerate(words):
                    self.mem[addr + i] = w
                if addr == 0 and words and words[0] & 1:
                    self._start()
                os.write(self.master, b"K" + struct.pack("<I", _rotl_xor(words)))
            elif cmd == 0x52:
                os.write(
                    self.master,
                    struct.pack(f"<{n}I", *[self.mem.get(addr + i, 0) for i in range(n)]),
                )

    def _start(self) -> None:
        data = {}
        for t in self.graph.input_tensors():
            spec = self.graph.tensors[t]
            arrays = {}
            for r in self.mmap.regions:
                if r.name.startswith(f"{t}."):
                    n = max(
                        [a - r.base + 1 for a in self.mem if r.base <= a < r.base + r.size],
                        default=0,
                    )
                    words = [self.mem[r.base + i] for i in range(n)]
                    if r.name.endswith("vals"):
                        words = [w - (1 << r.width) if w >> (r.width - 1) else w for w in words]
                    arrays[r.name[len(t) + 1 :]] = words
            data[t] = tensor_from_arrays(spec.shape, spec.fmt, arrays)
        sw = run_graph(self.graph, data)
        for k, name in enumerate(self.mmap.lengths):
            t, array = name.split(".", 1)
            words = sw.outputs[t].arrays()[array]
            r = self.mmap.region(name)
            self.mem[2 + k] = len(words)
            for i, w in enumerate(words):
                self.mem[r.base + i] = int(w) & ((1 << r.width) - 1)
        self.mem[1] = sw.cycles
        self.mem[0] = 2  # done


def _spmv8_board():
    # synth and run size the crd width the same way (--cw auto: 10 bits here)
    return _SwSimBoard(KERNELS["spmv"](8), HwConfig(cw=10, max_nnz=(("B", 32),)))


def _run_spmv8(board, capsys, max_nnz: str, *more: str):
    """``fuseflow-hw run`` of SpMV 8 against ``board`` over its pseudo-terminal."""
    argv = ["run", "--board", "icebreaker", "--port", board.path, "--kernel", "spmv", "--size", "8",
            "--max-nnz", max_nnz, *more]
    return _run(argv, capsys)


def test_run_over_a_serial_port(capsys):
    pytest.importorskip("serial")
    code, out, err = _run_spmv8(_spmv8_board(), capsys, "B=32", "--density", "0.3", "--seed", "4")
    assert code == 0, out + err
    assert "y: equal to sw_sim" in out


def test_run_refuses_a_board_with_another_design(capsys):
    pytest.importorskip("serial")
    code, _, err = _run_spmv8(_spmv8_board(), capsys, "B=16")
    assert code == 2 and "flash the matching bitstream" in err


def test_uart_divisor_follows_the_oscillator_not_the_constraint():
    platform = get_board("icebreaker").make_platform(clock_hz=30e6)  # P&R target 30 MHz
    assert platform.default_clk_frequency == 30e6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)  # never elaborated: only the divisor
        ice = BoardTop(top=None, baud=115_200, clock_hz=12e6)  # the iCEBreaker's 12 MHz oscillator
        assert ice.uart_divisor(platform) == 104  # 12e6 / 115200 = 104.2
        ulx = BoardTop(top=None, baud=115_200)
        assert ulx.uart_divisor(get_board("ulx3s-85f").make_platform()) == 217  # 25 MHz
        del ice, ulx
        gc.collect()


def test_hw_config_json_round_trip():
    for cfg in (
        HwConfig(),
        HwConfig(max_nnz=(("A", 7), ("B", 512))),
        HwConfig(numerics=Numerics.fixed(16, 16)),
        HwConfig(ram_fifo_depth=16),
        HwConfig(spacc_block_ram_min_dim=256),
    ):
        assert config_from_json(json.loads(json.dumps(config_to_json(cfg)))) == cfg


def test_run_with_build_dir_takes_graph_config_and_baud(tmp_path, capsys):
    pytest.importorskip("serial")

    graph, cfg = KERNELS["spmv"](8), HwConfig(max_nnz=(("B", 24),))
    graph.save(tmp_path / "graph.json")
    (tmp_path / "design.json").write_text(json.dumps({"hw_config": config_to_json(cfg)}))
    (tmp_path / "synth_report.json").write_text(
        json.dumps({"board": "icebreaker", "baud": 115200, "bitstream": "top.bin"})
    )
    board = _SwSimBoard(graph, cfg)
    argv = [
        "run",
        "--board",
        "icebreaker",
        "--port",
        board.path,
        "--build",
        str(tmp_path),
        "--density",
        "0.2",
    ]
    code, out, err = _run(argv, capsys)
    assert code == 0, out + err
    assert "y: equal to sw_sim" in out
    code, _, err = _run([*argv[:5], "--build", str(tmp_path), "--kernel", "spmv"], capsys)
    assert code == 2 and "drop GRAPH.json / --kernel" in err
    code, _, err = _run(
        ["run", "--board", "ulx3s-85f", "--port", board.path, "--build", str(tmp_path)], capsys
    )
    assert code == 2 and "built for board 'icebreaker'" in err


def test_crd_width_auto_fits_the_graph_and_too_narrow_is_refused(tmp_path, capsys):
    """--cw auto is the narrowest width holding every coordinate / position / reference; a
    narrower explicit width (or a build --cw) is refused naming the tensor and the bits."""
    g = KERNELS["spmv"](64)
    # B is 64x64: with its dense capacity its seg array counts up to 4096 (13 bits); capped at
    # 512 stored values every coordinate, position and reference is below 2**10 (the control floor)
    for caps, want in (([], 13), (["B=512"], 10)):
        ns = argparse.Namespace(max_nnz=caps, vw=32, cw="auto")
        assert config_from_args(ns, g).cw == want
    ns = argparse.Namespace(max_nnz=[], vw=32, cw="12")

    with pytest.raises(UserError, match="--cw 12: too narrow .* tensor 'B' .* up to 4096, which need 13 bits"):
        config_from_args(ns, g)
    code, _, err = _run(["build", "--kernel", "spmv", "--cw", "12", "-o", str(tmp_path)], capsys)
    assert code == 2 and "crd/ref width 12 is too narrow" in err and "'B'" in err and "13 bits" in err


def test_build_board_writes_the_top_synth_would_build_without_the_tools(tmp_path, capsys, monkeypatch):
    """``build --board`` writes the board top's Verilog and build files without running a tool
    (none is found here): the accelerator's memory map is the plain build's, and the build
    script is the one synth runs (yosys on the RTLIL, nextpnr, the packer)."""
    monkeypatch.setenv("PATH", "/nonexistent")
    plain, board = tmp_path / "plain", tmp_path / "board"
    base = ["build", "--kernel", "spmv", "--size", "8"]
    assert main([*base, "-o", str(plain)]) == 0
    code, out, err = _run([*base, "--board", "icebreaker", "-o", str(board)], capsys)
    assert code == 0, err
    assert f"'spmv' for the icebreaker -> {board}/top.debug.v" in out
    verilog = (board / "top.debug.v").read_text()
    assert "module top(" in verilog and "SB_" in verilog  # the board top with iCE40 primitives
    script = (board / "build_top.sh").read_text()
    assert "top.ys" in script and "nextpnr-ice40" in script.replace("NEXTPNR_ICE40", "")
    assert "read_rtlil" in (board / "top.ys").read_text() or "top.il" in (board / "top.ys").read_text()
    regions = [(r["name"], r["depth"]) for r in json.loads((board / "memory_map.json").read_text())["regions"]]
    assert regions == [(r["name"], r["depth"]) for r in json.loads((plain / "memory_map.json").read_text())["regions"]]
    assert not (board / "top.bin").exists() and not (board / "synth_report.json").exists()
    # board-only options without a board are refused, naming them
    code, _, err = _run([*base, "--baud", "9600", "-o", str(plain)], capsys)
    assert code == 2 and "--baud: only with --board" in err
    code, _, err = _run([*base, "--board", "icebreaker", "--lint", "-o", str(plain)], capsys)
    assert code == 2 and "--lint: not with --board" in err
    code, _, err = _run([*base, "--board", "nosuch", "-o", str(plain)], capsys)
    assert code == 2 and "nosuch" in err


@pytest.mark.slow  # about a minute (GPT graphs' Verilog); the SAE build runs in the default suite
def test_build_model_writes_every_graph_and_the_steps_in_order(tmp_path, capsys):
    """``build --model``: every graph's Verilog in its own directory and ``model.json`` with the
    steps in order; each graph reads only model inputs and tensors made by an earlier step, and
    the graphs are those ``compile --model`` writes."""
    out, comp = tmp_path / "b", tmp_path / "c"
    small = ["--model", "gpt", "--seq", "8", "--dmodel", "8", "--blocks", "1", "--fusion", "partial"]
    code, text, err = _run(["build", *small, "-o", str(out)], capsys)
    assert code == 0, err
    assert main(["compile", *small, "-o", str(comp)]) == 0
    m = json.loads((out / "model.json").read_text())
    assert sorted(m["graphs"]) == sorted(p.stem for p in comp.glob("*.json") if p.stem != "program")
    assert m["numerics"] == "q16.16" and "host (data movement)" in text
    every = {t for s in m["steps"] for t in ([s["output"]] if s["kind"] == "host" else
                                             [o for g in s["graphs"] for o in g["outputs"]])}
    made: set[str] = set()
    for step in m["steps"]:
        reads = step["reads"] if step["kind"] == "host" else [i for g in step["graphs"] for i in g["inputs"]]
        early = [t for t in reads if t in every and t not in made]
        assert not early, f"{step['label']} reads {early} before a step makes them"
        if step["kind"] == "host":
            made.add(step["output"])
        else:
            for g in step["graphs"]:
                assert (out / g["verilog"]).read_text().count("module ") >= 1
                made |= set(g["outputs"])
    assert len(made) > len(m["graphs"])  # host steps and graphs both make the results read later
    graphs = [g for s in m["steps"] if s["kind"] == "graphs" for g in s["graphs"]]
    assert all("=" in g["computes"][0] for g in graphs)  # each graph's fused Einsum
    # an option that applies to no graph is an error, not ignored
    code, _, err = _run(["build", *small, "-o", str(out), "--max-nnz", "nosuch=4"], capsys)
    assert code == 2 and "no graph of model gpt has tensor 'nosuch'" in err


def test_placer_and_router_reach_nextpnr(tmp_path):
    """``--placer`` / ``--router`` are nextpnr's options in the build script; without them the
    script names neither (nextpnr's defaults)."""
    top = GraphTop(KERNELS["spmv"](8), HwConfig(cw=10))
    prepare(top, "ulx3s-85f", tmp_path / "a", placer="static", router="router2")
    script = (tmp_path / "a" / "build_top.sh").read_text()
    assert "--placer static" in script and "--router router2" in script
    prepare(GraphTop(KERNELS["spmv"](8), HwConfig(cw=10)), "ulx3s-85f", tmp_path / "b")
    script = (tmp_path / "b" / "build_top.sh").read_text()
    assert "--placer" not in script and "--router" not in script
    with pytest.raises(SystemExit):
        main(["synth", "--kernel", "spmv", "--board", "ulx3s-85f", "-o", str(tmp_path / "c"), "--placer", "fast"])
