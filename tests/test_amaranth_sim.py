"""The amaranth.sim runner of graph tops (rtl_sim/amaranth_sim.py, ``rtl --sim amaranth``): the
same output arrays and cycle counts as sw_sim (the independent cycle model) and values equal to
numpy's, on several datasets through one simulation; memories loaded directly or through the host
port alike; a vector kernel (host-port fallback); its cycle limit, waveform and CLI option.
No Verilator needed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kernel_cases import CASES, dataset, same_arrays

from fuseflow.kernels import example
from fuseflow_cli.cli import main
from hw.elaborate import DEFAULT_HW
from rtl_sim import RtlTimeout, run_graph, run_graph_batch
from rtl_sim.amaranth_sim import amaranth_top, run_amaranth
from rtl_sim.api import _memory_runs
from sw_sim import run_graph as sw_run_graph


@pytest.mark.parametrize(("kernel", "n"), [("spmv", 16), ("spmm_csr", 12)])
def test_amaranth_equals_sw_sim(kernel, n):
    """Edge cases and a random matrix through one simulation: arrays and cycles equal sw_sim's,
    values equal numpy's."""
    sets = [dataset(kernel, n, case, seed=5) for case in CASES]
    g = sets[0][0]
    results = run_graph_batch(g, [d for _, d, _ in sets], runner="amaranth")
    for case, (_, data, ref), rtl in zip(CASES, sets, results, strict=True):
        sw = sw_run_graph(g, data)
        same_arrays(rtl.outputs, sw.outputs, f"{kernel}/{case}")
        [name] = sw.outputs
        assert np.array_equal(rtl.outputs[name].to_dense(), ref), case
        assert rtl.cycles == sw.cycles, f"{kernel}/{case}: amaranth {rtl.cycles}, sw_sim {sw.cycles}"
        assert rtl.status == 0 and rtl.overflow == []


@pytest.mark.parametrize("kernel", ["spmm_csr", "bspmm"])
def test_direct_memories_equal_host_port(kernel):
    """Loading and reading the memories directly gives the host port's results and cycles; the
    vector kernel's packed values memories go through the host port."""
    g, data, _, _ = example(kernel, 8, seed=2, density=0.3)
    out = []
    for direct in (True, False):
        top, meta = amaranth_top(g, DEFAULT_HW)
        out.append(run_amaranth(top, meta, _memory_runs(g, [data, data], meta), max_cycles=10**6,
                                direct=direct))
    sw = sw_run_graph(g, data)
    for a, b in zip(*out, strict=True):
        assert a["cycles"] == b["cycles"] == sw.cycles and a["status"] == b["status"]
        assert a["arrays"].keys() == b["arrays"].keys()
        for name in a["arrays"]:
            assert np.array_equal(a["arrays"][name], b["arrays"][name]), name


def test_cycle_limit_and_waves(tmp_path):
    g, data, _, _ = example("spmv", 8, seed=1, density=0.3)
    with pytest.raises(RtlTimeout, match=r"did not finish within 10 cycles.*amaranth"):
        run_graph(g, data, runner="amaranth", max_cycles=10)
    vcd = tmp_path / "w.vcd"
    res = run_graph(g, data, runner="amaranth", waves=True, wave_file=vcd)
    assert res.cycles == sw_run_graph(g, data).cycles
    text = vcd.read_text()
    assert text.startswith("$") and "host_rdata" in text and "done" in text


def test_rtl_cli_sim_amaranth(capsys):
    assert main(["rtl", "--kernel", "spmm_csr", "--size", "12", "--sim", "amaranth", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g, data, _, _ = example("spmm_csr", 12, 0, 0.1)  # the CLI's default seed and density
    assert out["runner"] == "amaranth" and out["check"] == "pass" and out["outputs_identical"] is True
    assert out["rtl_cycles"] == out["sw_cycles"] == sw_run_graph(g, data).cycles
    assert main(["rtl", "--kernel", "spmv", "--size", "8", "--sim", "amaranth"]) == 0
    assert "amaranth runner" in capsys.readouterr().out


def test_memory_model_and_overflow_flags():
    """Behind the hbm2 memory controller the cycles are sw_sim's under the same model; with a
    16-bit datapath that wraps, the STATUS bit and the flagged nodes are the ones sw_sim counts."""
    from fuseflow.kernels import KERNELS
    from fuseflow.ir.numerics import Numerics
    from fuseflow.ir.tensor import TensorData
    from hw.elaborate import HwConfig

    g, data, _, ref = example("spmv", 16, seed=3, density=0.3)
    res = run_graph(g, data, runner="amaranth", memory="hbm2")
    assert res.cycles == sw_run_graph(g, data, memory="hbm2").cycles
    assert np.array_equal(res.outputs["y"].to_dense(), ref)
    g = KERNELS["spmv"](8)
    b, c = np.full((8, 8), 200), np.full(8, 200)
    data = {"B": TensorData.from_dense(b, g.tensors["B"].fmt), "c": TensorData.from_dense(c, g.tensors["c"].fmt)}
    sw = sw_run_graph(g, data, numerics=Numerics.integer(16), on_overflow="ignore")
    res = run_graph(g, data, runner="amaranth", cfg=HwConfig(cw=10, vw=16), on_overflow="ignore")
    assert res.cycles == sw.cycles and res.status & 1
    assert res.overflow == [n for n in sw.overflows if sw.overflows[n]]
    assert np.array_equal(res.outputs["y"].vals, sw.outputs["y"].vals)
