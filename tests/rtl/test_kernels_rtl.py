"""The spine kernels in RTL: bit-exact with sw_sim (and numpy) and the same cycle count.
The spine kernels: one Verilator build each (the native harness); all datasets run through it
in one simulator process.  The variants (double-buffered accumulators, parallel lanes, vector
streams) under amaranth.sim: the same RTL, nothing to build."""

import numpy as np
import pytest
from kernel_cases import CASES, REFERENCE, dataset
from test_ml_primitives_sw import with_spacc_buffers

from fuseflow.kernels import example
from fuseflow.compiler.passes.par import parallelize
from rtl_sim import run_graph_batch
from sw_sim import run_graph

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("kernel", sorted(REFERENCE))
def test_kernel_rtl_equals_sw_sim(kernel):
    n = 64
    sets = [dataset(kernel, n, case, seed=5) for case in CASES]
    g = sets[0][0]
    results = run_graph_batch(g, [d for _, d, _ in sets], runner="native")
    for case, (_, data, ref), rtl in zip(CASES, sets, results):
        sw = run_graph(g, data)
        [name] = sw.outputs
        for arr in ("vals",):
            assert np.array_equal(rtl.outputs[name].vals, sw.outputs[name].vals), case
        for lvl in range(len(g.tensors[name].shape)):
            if sw.outputs[name].seg[lvl] is not None:
                assert np.array_equal(rtl.outputs[name].seg[lvl], sw.outputs[name].seg[lvl]), case
                assert np.array_equal(rtl.outputs[name].crd[lvl], sw.outputs[name].crd[lvl]), case
        assert np.array_equal(rtl.outputs[name].to_dense(), ref), case
        assert rtl.cycles == sw.cycles, f"{kernel}/{case}: RTL {rtl.cycles} cycles, sw_sim {sw.cycles}"


def test_spmm_with_double_buffered_spacc_rtl_equals_sw_sim():
    """The spmm graph with its sparse accumulator at buffers=2: RTL = sw_sim (values and
    cycles) = numpy, in fewer cycles than buffers=1."""
    g, data, _, expected = example("spmm_csr", 32, seed=3, density=0.2)
    g2 = with_spacc_buffers(g, 2)
    [rtl] = run_graph_batch(g2, [data], runner="amaranth")
    sw = run_graph(g2, data)
    assert np.array_equal(rtl.outputs["C"].to_dense(), expected)
    assert np.array_equal(rtl.outputs["C"].vals, sw.outputs["C"].vals)
    assert rtl.cycles == sw.cycles < run_graph(g, data).cycles


@pytest.mark.parametrize(("kernel", "par"), [("spmv", {"i": 4}), ("spmm_dense", {"k": 2}),
                                             ("spmspm_inner", {"i": 2, "j": 2}), ("spmm_dense", {"i": 4}),
                                             ("spmm_dense", {"j": 4}), ("spmm_dense", {"i": 2, "j": 3})],
                         ids=str)
def test_parallel_lanes_rtl_equals_sw_sim(kernel, par):
    """Parallel lanes in RTL: rows split 4 ways (SpMV's dense output and SpMM's compressed one
    written in a bank per lane), a reduced index (lane-local accumulators merged by a union), a
    nested split, the innermost index split at its dense scanner (each lane scans coordinates
    lane, lane + n, ...; 3 lanes of 16: unequal shares); RTL = sw_sim (values and cycles) =
    numpy, several datasets."""
    sets = [example(kernel, 16, seed, density) for seed, density in ((1, 0.1), (2, 0.3))]
    g = sets[0][0]
    parallelize(g, par)
    results = run_graph_batch(g, [data for _, data, _, _ in sets], runner="amaranth")
    for (_, data, _, expected), rtl in zip(sets, results):
        sw = run_graph(g, data)
        [name] = sw.outputs
        assert np.array_equal(rtl.outputs[name].to_dense(), expected)
        assert np.array_equal(rtl.outputs[name].vals, sw.outputs[name].vals)
        assert rtl.cycles == sw.cycles, f"RTL {rtl.cycles} cycles, sw_sim {sw.cycles}"


@pytest.mark.parametrize("block, lanes", [(4, 4), (8, 2)])
def test_bspmm_rtl_equals_sw_sim(block, lanes):
    """Block-sparse SpMM with vector streams (W-lane value memories, lanewise multiply, lane
    reduction): RTL = sw_sim in values and cycles = numpy, on three block-sparse operands."""
    sets = [example("bspmm", 32, seed=s, density=d, block=block, lanes=lanes) for s, d in ((1, 0.1), (2, 0.3), (3, 0.6))]
    g = sets[0][0]
    results = run_graph_batch(g, [data for _, data, _, _ in sets], runner="amaranth")
    for (_, data, _, expected), rtl in zip(sets, results):
        sw = run_graph(g, data)
        assert np.array_equal(rtl.outputs["Y"].to_dense(), expected)
        assert np.array_equal(sw.outputs["Y"].to_dense(), expected)
        assert rtl.cycles == sw.cycles, f"bspmm B={block} lanes={lanes}: RTL {rtl.cycles}, sw_sim {sw.cycles}"


def test_parallel_max_accumulators_rtl_equals_sw_sim():
    """A max-times product split over its reduction index: lane-local max accumulators merged
    by a union and a max ALU that takes a side's missing coordinate as no value; RTL = sw_sim
    (values and cycles) = numpy, with negative results."""
    from fuseflow.compiler import compile_program
    from fuseflow.compiler.program import Program, einsum
    from fuseflow.compiler.runner import run_program
    from rtl_sim import run_graph as rtl_run_graph

    p = Program("maxtimes")
    a, b = p.tensor("A", (6, 8), "csr"), p.tensor("B", (8, 5), "dcsr")
    p.output(p.let("Y", einsum("ik,kj->ij", a, b, reduce="max")))
    cp = compile_program(p, par={"k": 2})
    rng = np.random.default_rng(7)
    A = rng.integers(-4, 5, (6, 8)) * (rng.random((6, 8)) < 0.5)
    B = rng.integers(-4, 5, (8, 5)) * (rng.random((8, 5)) < 0.5)
    A[2], B[:, 1:3] = -rng.integers(1, 5, 8), rng.integers(1, 5, (8, 2))
    sw = run_program(cp, {"A": A, "B": B}, simulate=run_graph)
    rtl = run_program(cp, {"A": A, "B": B}, simulate=lambda g, d, **kw: rtl_run_graph(g, d, runner="amaranth", **kw))
    want = np.max(A[:, :, None] * B[None, :, :], axis=1)
    assert (want < 0).any()
    assert np.array_equal(rtl.outputs["Y"].to_dense(), want)
    assert np.array_equal(sw.outputs["Y"].to_dense(), want)
    assert rtl.cycles == sw.cycles


@pytest.mark.parametrize("par", [None, {"j": 2}])
def test_masked_products_reduce_per_nonzero_rtl_equals_sw_sim(par):
    """S = M ∘ (Q·Kᵀ), O = S·V with empty rows in M: S reduces each nonzero's dense inner
    index with a ``nonempty`` reduce (no row accumulator), whose bare stops are M's empty rows;
    RTL = sw_sim (values and cycles) = numpy, also with the keys split over two lanes."""
    from fuseflow.compiler import compile_program
    from fuseflow.compiler.program import Program, einsum
    from fuseflow.compiler.runner import run_program
    from fuseflow.ir.samml import NodeKind
    from rtl_sim import run_graph as rtl_run_graph

    p = Program("masked")
    m, q = p.tensor("M", (6, 6), "csr"), p.tensor("Q", (6, 4), "dense")
    k, v = p.tensor("K", (6, 4), "dense"), p.tensor("V", (6, 3), "dense")
    s = p.let("S", m * einsum("id,jd->ij", q, k))
    p.output(p.let("O", einsum("ij,je->ie", s, v)))
    cp = compile_program(p, par=par)
    reds = [n for g in cp.graphs for n in g.nodes.values() if n.kind is NodeKind.REDUCE]
    assert reds and all(n.param("nonempty") for n in reds)
    rng = np.random.default_rng(11)
    data = {"M": (rng.random((6, 6)) < 0.5).astype(np.int64), "Q": rng.integers(-3, 4, (6, 4)),
            "K": rng.integers(-3, 4, (6, 4)), "V": rng.integers(-3, 4, (6, 3))}
    data["M"][[0, 3]] = 0
    want = (data["M"] * (data["Q"] @ data["K"].T)) @ data["V"]
    sw = run_program(cp, data, simulate=run_graph)
    rtl = run_program(cp, data, simulate=lambda g, d, **kw: rtl_run_graph(g, d, runner="amaranth", **kw))
    assert np.array_equal(sw.outputs["O"].to_dense(), want)
    assert np.array_equal(rtl.outputs["O"].to_dense(), want)
    assert rtl.cycles == sw.cycles
