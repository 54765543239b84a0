"""The off-chip memory timing model in RTL (hw/dram.py) against sw_sim (docs/memory.md): the
same cycles and values under the presets and under small custom models, and no change to the
generated Verilog when nothing is off-chip."""

import numpy as np
import pytest

from fuseflow.kernels import KERNELS, example
from fuseflow.ir.memory import MemoryError, parse_memory, plan_ports
from fuseflow.compiler.passes.skip import enable_skipping
from fuseflow.suites import spine_entry
from hw.build import build_graph, to_verilog
from hw.elaborate import GraphTop, HwConfig
from rtl_sim import run_graph_batch
from rtl_sim.correlate import MemorySetup, run_suite
from rtl_sim.toolchain import lint
from sw_sim import run_graph

# a few spine kernels per preset in the default run; the whole spine suite is marked slow.
# hbm2's on Verilator (the native harness: the memory controller's Verilog compiled), the
# others under amaranth.sim (the same RTL, nothing to build)
SUBSET = {"hbm2": ("spmv", "mul"), "ddr4": ("spmm_csr", "add"), "sdram": ("spmv", "spmm_dense")}
SUBSET_RUNNER = {"hbm2": "native", "ddr4": "amaranth", "sdram": "amaranth"}


def _check(results):
    for r in results:
        assert r.values_equal and r.reference_ok is not False, r.name
        assert r.rtl_cycles == r.sw_cycles, f"{r.name} ({r.memory}): RTL {r.rtl_cycles}, sw_sim {r.sw_cycles}"


@pytest.mark.rtl
@pytest.mark.parametrize("preset", sorted(SUBSET))
def test_preset_subset_rtl_equals_sw_sim(preset):
    entries = [spine_entry(f"{k}_16", "subset", k, 16, 0.2, 7) for k in SUBSET[preset]]
    results = run_suite(entries, jobs=2, memory=MemorySetup(parse_memory(preset)), runner=SUBSET_RUNNER[preset])
    _check(results)
    g, data, _ = entries[0].make(run_graph)
    assert results[0].sw_cycles > run_graph(g, data).cycles  # the memory model costs cycles


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("preset", ["hbm2", "ddr4", "sdram"])
def test_spine_suite_rtl_equals_sw_sim(preset):
    _check(run_suite("spine", jobs=2, memory=MemorySetup(parse_memory(preset))))


# (kernel, model, on-chip tensors, what the sw_sim counters must show)
VECTORS = [
    # narrow bus, closed pages, one bank, extra latency: every access a row miss
    ("spmv", "hbm2:bytes_per_cycle=1,burst_bytes=8,policy=closed,banks=1,latency=5", (), "row_misses"),
    # one vals word per line (every write sends a line), tiny rows in one bank: row conflicts
    ("add", "sdram:burst_bytes=4,row_bytes=8,banks=1", (), "row_conflicts"),
    # A kept on chip; C's compressed level written through seg/crd ports and flushed at D
    ("spmm_csr", "sdram:row_bytes=16,banks=2", ("A",), "row_conflicts"),
    # one port only: the values writer of y
    ("spmv", "ddr4:latency=3", ("B", "c"), "row_misses"),
    # read <-> write turnarounds and bank switches between back-to-back transfers
    ("add", "sdram:t_turn=3,t_switch=2", (), "turnarounds"),
    ("spmm_csr", "sdram:t_switch=5,row_bytes=16", ("A",), "bank_switches"),
]


@pytest.mark.rtl
@pytest.mark.parametrize(("kernel", "memory", "onchip", "counter"), VECTORS, ids=[f"{v[0]}-{v[1]}" for v in VECTORS])
def test_timing_vectors_rtl_equals_sw_sim(kernel, memory, onchip, counter):
    sets = [example(kernel, 8, seed, density) for seed, density in ((1, 0.3), (2, 0.6))]
    g = sets[0][0]
    results = run_graph_batch(g, [d for _, d, _, _ in sets], cfg=HwConfig(memory=memory, onchip=onchip),
                              runner="amaranth")
    for (_, data, _, expected), rtl in zip(sets, results):
        sw = run_graph(g, data, memory=memory, onchip=onchip)
        [name] = sw.outputs
        assert np.array_equal(rtl.outputs[name].to_dense(), expected)
        assert np.array_equal(rtl.outputs[name].vals, sw.outputs[name].vals)
        assert rtl.cycles == sw.cycles, f"{kernel} under {memory}: RTL {rtl.cycles}, sw_sim {sw.cycles}"
        assert sw.counters[counter] > 0
        written = [a for a in sw.counters["arrays"].values() if a.get("offchip") and a.get("lines")
                   and a["words_written"]]
        assert written, "the vector writes through an off-chip port"


def _verilog(graph, cfg):
    return to_verilog(GraphTop(graph, cfg), "fuseflow_top")


@pytest.mark.parametrize("kernel", ["spmv", "add", "spmm_csr"])
def test_nothing_offchip_leaves_the_verilog_unchanged(kernel):
    g = KERNELS[kernel](8)
    plain = _verilog(g, HwConfig())
    assert _verilog(g, HwConfig(memory="ideal")) == plain
    assert _verilog(g, HwConfig(memory="hbm2", onchip=tuple(g.tensors))) == plain
    offchip = _verilog(g, HwConfig(memory="hbm2"))
    assert offchip != plain and "open_row" in offchip


def test_skipping_scanner_of_an_offchip_tensor_is_rejected():
    g = KERNELS["mul"](8)
    enable_skipping(g, in_place=True)
    with pytest.raises(MemoryError, match="coordinate skipping"):
        GraphTop(g, HwConfig(memory="sdram"))
    GraphTop(g, HwConfig(memory="sdram", onchip=("A", "B")))  # on chip: allowed


def test_hwconfig_memory_errors_name_what_was_written():
    with pytest.raises(MemoryError, match="unknown memory preset 'hbm3'"):
        HwConfig(memory="hbm3")
    with pytest.raises(MemoryError, match="no tensor 'q'"):
        GraphTop(KERNELS["spmv"](8), HwConfig(memory="hbm2", onchip=("q",)))
    with pytest.raises(ValueError, match="onchip = 'B'"):
        HwConfig(onchip="B")


def test_controller_port_order_is_plan_ports():
    g = KERNELS["spmv"](8)
    top = GraphTop(g, HwConfig(memory="hbm2"))
    assert top.mem_ports == plan_ports(g, parse_memory("hbm2"))


@pytest.mark.rtl
@pytest.mark.parametrize(("kernel", "memory", "onchip"), [("spmv", "hbm2", ()), ("spmv", "ddr4", ("B", "c")),
                                                          ("add", "sdram:burst_bytes=4,banks=1,policy=closed", ())])
def test_offchip_verilog_is_lint_clean(kernel, memory, onchip, tmp_path):
    """Lint-clean with the controller, also with a single port (spmv with B and c on chip)."""
    s = build_graph(KERNELS[kernel](8), tmp_path, HwConfig(memory=memory, onchip=onchip))
    res = lint(tmp_path / s["verilog"], s["top"])
    assert res.returncode == 0, res.stderr[-3000:]
