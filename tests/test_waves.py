"""Waveforms: ``--waves F.vcd`` / ``F.fst`` and the GTKWave save file beside it.

The FST file is read back with GTKWave's own FST reader (pylibfst) and compared, value change
for value change, with the VCD the simulator dumped; every trace the save file names must be a
variable of the dump (checked on amaranth.sim's and on Verilator's naming)."""

from __future__ import annotations

import pytest

from fuseflow.kernels import example
from rtl_sim import run_graph
from rtl_sim.waves import wave_format


def vcd_changes(path) -> tuple[dict[str, str], dict[str, list[tuple[int, str]]]]:
    """(full name -> identifier, identifier -> [(time, value)]) of a VCD file."""
    names: dict[str, str] = {}
    changes: dict[str, list[tuple[int, str]]] = {}
    scope: list[str] = []
    t = 0
    body = False
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if not body:
                if w[0] == "$scope":
                    scope.append(w[2])
                elif w[0] == "$upscope":
                    scope.pop()
                elif w[0] == "$var":
                    names[".".join([*scope, w[4]])] = w[3]
                elif w[0] == "$enddefinitions":
                    body = True
                continue
            if w[0][0] == "#":
                t = int(w[0][1:])
            elif w[0][0] in "bB":
                changes.setdefault(w[1], []).append((t, w[0][1:].lstrip("0") or "0"))
            elif w[0][0] in "01xz":
                changes.setdefault(w[0][1:], []).append((t, w[0][0]))
    return names, changes


def fst_changes(path) -> tuple[dict[str, int], dict[int, list[tuple[int, str]]]]:
    """(full name -> handle, handle -> [(time, value)]) of an FST file, read by libfst."""
    import pylibfst
    from pylibfst import lib

    ctx = lib.fstReaderOpen(str(path).encode())
    assert ctx != pylibfst.ffi.NULL
    try:
        _, signals = pylibfst.get_scopes_signals2(ctx)
        lib.fstReaderSetFacProcessMaskAll(ctx)
        out: dict[int, list[tuple[int, str]]] = {}

        def on_change(_data, time, handle, value):
            out.setdefault(handle, []).append((time, pylibfst.string(value).lstrip("0") or "0"))

        pylibfst.fstReaderIterBlocks(ctx, on_change)
        # a vector's FST name carries its range after a space, as in the VCD
        return {name.split(" ")[0]: s.handle for name, s in signals.by_name.items()}, out
    finally:
        lib.fstReaderClose(ctx)


def gtkw_traces(path) -> list[str]:
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and line[0] not in "[*@-"]


def _dedup(ch: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Value changes with repeats of the same value dropped (a dump may re-emit a value)."""
    out: list[tuple[int, str]] = []
    for t, v in ch:
        if not out or out[-1][1] != v:
            out.append((t, v))
    return out


@pytest.fixture(scope="module")
def spmv_waves(tmp_path_factory):
    """One SpMV 8x8 run under amaranth.sim dumped as VCD and as FST."""
    d = tmp_path_factory.mktemp("waves")
    g, data, _, _ = example("spmv", 8, 0, 0.3)
    for name in ("run.vcd", "run.fst"):
        run_graph(g, data, runner="amaranth", waves=True, wave_file=d / name)
    return g, d


def test_fst_equals_the_vcd(spmv_waves):
    _, d = spmv_waves
    vnames, vch = vcd_changes(d / "run.vcd")
    fnames, fch = fst_changes(d / "run.fst")
    assert set(vnames) == set(fnames)
    compared = 0
    for name, ident in vnames.items():
        v, f = _dedup(vch.get(ident, [])), _dedup(fch.get(fnames[name], []))
        assert v == f, name
        compared += len(v)
    assert compared > 1000  # a real run: clock, host port and streams all moving


def test_gtkw_names_the_dumps_signals(spmv_waves):
    g, d = spmv_waves
    names, _ = vcd_changes(d / "run.vcd")
    traces = gtkw_traces(d / "run.gtkw")  # the save file of both runs (run.fst's, the later one)
    assert traces and all(t in names for t in traces), [t for t in traces if t not in names][:5]
    text = (d / "run.gtkw").read_text()
    assert f'[dumpfile] "{(d / "run.fst").resolve()}"' in text
    for node in g.nodes:
        assert f"-{node}\n" in text  # a group per node


@pytest.mark.rtl
def test_gtkw_names_verilators_signals(tmp_path):
    """The native harness wraps the top (``TOP.fuseflow_native.dut``) and names vectors with
    their bit range: the save file follows."""
    from fuseflow_cli.cli import main

    # the arguments of test_native_rtl.py::test_rtl_cli_text_and_waves: one traced build for both
    assert main(["rtl", "--kernel", "spmv", "--size", "8", "--seed", "1", "--density", "0.3",
                 "--waves", str(tmp_path / "n.vcd")]) == 0
    traces = gtkw_traces(tmp_path / "n.gtkw")
    names = set()
    scope: list[str] = []
    with open(tmp_path / "n.vcd") as f:
        for line in f:
            w = line.split()
            if w[:1] == ["$scope"]:
                scope.append(w[2])
            elif w[:1] == ["$upscope"]:
                scope.pop()
            elif w[:1] == ["$var"]:
                names.add(".".join([*scope, w[4]]) + (w[5] if w[5].startswith("[") else ""))
            elif w[:1] == ["$enddefinitions"]:
                break
    assert traces and all(t in names for t in traces), [t for t in traces if t not in names][:5]


@pytest.mark.parametrize("name, message", [("w.txt", "name it .vcd or .fst"),
                                           ("missing/w.vcd", "does not exist")])
def test_bad_wave_files(tmp_path, name, message):
    with pytest.raises(ValueError, match=message):
        wave_format(tmp_path / name)
    g, data, _, _ = example("spmv", 8, 0, 0.3)
    with pytest.raises(ValueError, match=message):
        run_graph(g, data, runner="amaranth", waves=True, wave_file=tmp_path / name)
