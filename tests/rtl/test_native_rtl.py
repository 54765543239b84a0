"""The native RTL runner (rtl_sim/native.py, a compiled harness driving the Verilated graph top):
the same output arrays and cycle counts as the cocotb runner, sw_sim and numpy; its cycle
limit; its waveform; and ``fuseflow-hw rtl`` (runner, automatic crd/ref width, ``--json``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from kernel_cases import CASES, dataset, same_arrays

from fuseflow.kernels import KERNELS, example
from fuseflow_cli.cli import main
from hw.elaborate import crd_width_needed
from rtl_sim import run_graph, run_graph_batch
from rtl_sim.native import RtlTimeout, run_native
from rtl_sim.toolchain import ToolchainError
from sw_sim import run_graph as sw_run_graph

pytestmark = pytest.mark.rtl

# the documented fields of `fuseflow-hw rtl --json` (docs/cli.md, "Machine-readable output")
RTL_JSON_FIELDS = {"source", "graph", "runner", "rtl_cycles", "sw_cycles", "ratio", "outputs_identical", "check",
                   "cw", "vw", "memory", "onchip", "build_s", "wall_s", "cycles_per_s", "waves", "saturated",
                   "overflows", "rtl_overflow", "numerics", "error", "tolerance", "saved"}


# behind -m slow (about three minutes of cocotb): the default suite runs the cocotb runner from
# the command line (test_rtl_cli_cocotb_runner_and_widths) and the native runner everywhere
@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["spmv", "spmm_csr", "add"])
def test_native_equals_cocotb_and_sw_sim(kernel):
    """Several datasets through one build of each runner (edge cases included): the output
    arrays and cycle counts of the native runner equal the cocotb runner's and sw_sim's, and the
    values equal numpy's."""
    sets = [dataset(kernel, 64, case, seed=5) for case in CASES]
    g = sets[0][0]
    datas = [d for _, d, _ in sets]
    native = run_graph_batch(g, datas, runner="native")
    cocotb = run_graph_batch(g, datas, runner="cocotb")
    for case, data, (_, _, ref), nat, coc in zip(CASES, datas, sets, native, cocotb, strict=True):
        sw = sw_run_graph(g, data)
        same_arrays(nat.outputs, coc.outputs, f"{kernel}/{case} native vs cocotb")
        same_arrays(nat.outputs, sw.outputs, f"{kernel}/{case} native vs sw_sim")
        [name] = sw.outputs
        assert np.array_equal(nat.outputs[name].to_dense(), ref), case
        assert nat.cycles == coc.cycles == sw.cycles, f"{kernel}/{case}: native {nat.cycles}, cocotb {coc.cycles}, " \
                                                      f"sw_sim {sw.cycles}"


@pytest.mark.slow  # about a minute of cocotb; the hbm2 preset's RTL runs natively in test_memory_rtl
def test_native_under_hbm2_equals_cocotb_and_sw_sim():
    """An off-chip memory model (hbm2) in both runners: the same cycles as sw_sim under it."""
    g = KERNELS["spmv"](16)
    sets = [example("spmv", 16, seed, 0.2) for seed in (7, 8)]
    datas = [d for _, d, _, _ in sets]
    native = run_graph_batch(g, datas, runner="native", memory="hbm2")
    cocotb = run_graph_batch(g, datas, runner="cocotb", memory="hbm2")
    for (_, data, _, want), nat, coc in zip(sets, native, cocotb, strict=True):
        sw = sw_run_graph(g, data, memory="hbm2")
        same_arrays(nat.outputs, coc.outputs, "native vs cocotb")
        assert np.array_equal(nat.outputs["y"].to_dense(), want)
        assert nat.cycles == coc.cycles == sw.cycles
        assert sw.cycles > sw_run_graph(g, data).cycles  # the memory model costs cycles


def test_native_cycle_limit_stops_with_a_clear_error():
    """A run not done within max_cycles stops (no hang) and names the limit and the dataset."""
    empty = dataset("spmv", 64, "all_empty", seed=5)
    full = dataset("spmv", 64, "random", seed=5)
    g = empty[0]
    short, long = (sw_run_graph(g, d[1]).cycles for d in (empty, full))
    assert long > 4 * short
    limit = (short + long) // 2
    with pytest.raises(RtlTimeout, match=rf"'spmv' did not finish within {limit} cycles in RTL \(dataset 2 of 2\)"):
        run_graph_batch(g, [empty[1], full[1]], runner="native", max_cycles=limit)
    # the same limit is enough for the short run alone
    assert run_graph(g, empty[1], runner="native", max_cycles=limit).cycles == short


def test_native_rejects_an_unknown_runner():
    g, data, _, _ = example("spmv", 8, 1, 0.3)
    with pytest.raises(ValueError, match="runner 'verilator': use one of cocotb, native, amaranth"):
        run_graph(g, data, runner="verilator")


def _rtl_json(capsys, argv: list[str]) -> dict:
    assert main(["rtl", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_rtl_cli_json_fields(capsys):
    """``rtl --json``: the documented fields; cycles and values checked against sw_sim and
    numpy computed here; the crd/ref width is the one the graph needs."""
    out = _rtl_json(capsys, ["--kernel", "spmv", "--size", "16"])
    assert set(out) == RTL_JSON_FIELDS
    g, data, _, _ = example("spmv", 16, 0, 0.1)  # the CLI's default seed and density
    sw = sw_run_graph(g, data)
    assert out["runner"] == "native" and out["check"] == "pass" and out["outputs_identical"] is True
    assert out["rtl_cycles"] == out["sw_cycles"] == sw.cycles and out["ratio"] == 1.0
    assert out["cw"] == crd_width_needed(g)[0] and out["vw"] == 32
    assert out["memory"]["name"] == "ideal" and out["onchip"] == [] and out["waves"] is None
    assert out["wall_s"] > 0 and out["cycles_per_s"] > 0 and out["build_s"] >= 0


def test_rtl_cli_cocotb_runner_and_widths(capsys):
    """``--runner cocotb`` with explicit widths gives the same cycles as sw_sim."""
    out = _rtl_json(capsys, ["--kernel", "spmv", "--size", "16", "--runner", "cocotb", "--cw", "16", "--vw", "32"])
    g, data, _, _ = example("spmv", 16, 0, 0.1)
    assert out["runner"] == "cocotb" and out["cw"] == 16 and out["check"] == "pass"
    assert out["rtl_cycles"] == sw_run_graph(g, data).cycles


def test_rtl_cli_text_and_waves(tmp_path, capsys):
    """The text report, and a VCD of the native run (the harness built with --trace)."""
    vcd = tmp_path / "w.vcd"
    assert main(["rtl", "--kernel", "spmv", "--size", "8", "--seed", "1", "--density", "0.3",
                 "--waves", str(vcd)]) == 0
    out = capsys.readouterr().out
    g, data, _, _ = example("spmv", 8, 1, 0.3)
    assert f"RTL {sw_run_graph(g, data).cycles} cycles" in out and "outputs identical" in out
    assert "native runner, cw 10, vw 32" in out and "check against numpy: PASS" in out
    text = vcd.read_text()
    assert text.startswith("$version") and " done $end" in text and " host_rdata " in text


@pytest.mark.parametrize(("argv", "says"), [
    (["--cw", "9"], ["--cw 9: too narrow", "'B'", "10 bits"]),
    (["--cw", "wide"], ["--cw 'wide'"]),
    (["--vw", "8"], ["--vw 8"]),
    (["--max-cycles", "0"], ["--max-cycles: 0 is out of range"]),
    (["--max-cycles", "5"], ["within 5 cycles", "--max-cycles"]),
])
def test_rtl_cli_bad_input(capsys, argv, says):
    try:
        code = main(["rtl", "--kernel", "spmv", "--size", "8", *argv])
    except SystemExit as exc:  # argparse's own range checks exit from the parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for s in says:
        assert s in err, (s, err)


@pytest.mark.slow
def test_rtl_cli_auto_width_spmm_csr_256(capsys):
    """``rtl --kernel spmm_csr --size 256`` picks the 17-bit crd/ref width the 65536-entry
    arrays need (16 bits used to fail) and matches sw_sim and numpy."""
    out = _rtl_json(capsys, ["--kernel", "spmm_csr", "--size", "256"])
    g, data, _, _ = example("spmm_csr", 256, 0, 0.1)
    need = crd_width_needed(g)[0]
    assert need > 16 and out["cw"] == need
    assert out["check"] == "pass" and out["outputs_identical"] is True
    assert out["rtl_cycles"] == sw_run_graph(g, data).cycles


def test_docs_document_the_rtl_json_fields():
    readme = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    section = readme[readme.index("### `rtl --json`"):]
    for field in RTL_JSON_FIELDS:
        assert f"`{field}`" in section[:2500], field


def test_native_length_above_depth_is_an_error(tmp_path):
    """A length register above its array's depth (a broken design) ends the harness instead of
    reading on; Python names the array.  (A stand-in executable plays the harness here.)"""
    exe = tmp_path / "obj" / "fuseflow_native"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\necho 'fuseflow_native: run 1: output 1 has length 999, its memory holds 64 "
                   "(status 0x2)' >&2\nexit 4\n")
    exe.chmod(0o755)
    meta = {"memory_map": {"lengths": ["y.0.seg", "y.vals"],
                           "regions": [{"name": "y.0.seg", "base": 64, "depth": 2},
                                       {"name": "y.vals", "base": 128, "depth": 64}]}}
    with pytest.raises(ToolchainError, match=r"\(dataset 2 of 2\): output array 'y.vals' reports 999 entries "
                                             r"but its memory holds 64"):
        run_native(tmp_path, meta, [{"mem": {}}, {"mem": {}}])
