"""Compiled graphs in RTL (Verilator via cocotb): every output array (seg, crd, vals) equals
sw_sim's bit for bit and the RTL cycle count equals sw_sim's.  One build per graph and config (5 builds,
~75-110 s each on a loaded 2-core machine, cached afterwards): factored nested matmul, the
one-graph factored GCN layer relu(A·X·W + b), and a 3-D product whose compressed levels need
coordinate droppers and skip_empty writers."""

from __future__ import annotations

import numpy as np
import pytest

from fuseflow.suites.compiler import SEEDS, compiled, graph_case
from fuseflow.ir.samml import AluOp, NodeKind, StreamKind
from fuseflow.ir.tensor import TensorData
from hw import HwConfig
from rtl_sim import run_graph_batch
from sw_sim import run_graph

pytestmark = pytest.mark.rtl


def assert_same(name: str, rtl: TensorData, sw: TensorData) -> None:
    assert rtl.fmt == sw.fmt, name
    for lvl in range(sw.fmt.order):
        for what, a, b in (("seg", rtl.seg[lvl], sw.seg[lvl]), ("crd", rtl.crd[lvl], sw.crd[lvl])):
            if b is None:
                assert a is None, f"{name} level {lvl} {what}"
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"{name} level {lvl} {what}")
    np.testing.assert_array_equal(rtl.vals, sw.vals, err_msg=f"{name} vals")


def run_both(program: str, mode: str = "full", graph: int = 0, cfg: HwConfig | None = None):
    cases = [graph_case(program, mode, graph, s, run_graph) for s in SEEDS]
    g = cases[0][0]
    rtl = run_graph_batch(g, [d for _, d, _ in cases], cfg=cfg or HwConfig(), runner="amaranth")
    for (_, data, expected), r in zip(cases, rtl):
        sw = run_graph(g, data)
        assert set(r.outputs) == set(sw.outputs)
        for t in sw.outputs:
            assert_same(t, r.outputs[t], sw.outputs[t])
        if expected is not None:
            (t,) = sw.outputs
            np.testing.assert_array_equal(sw.outputs[t].to_dense(), expected)
        assert r.cycles == sw.cycles, (program, mode, r.cycles, sw.cycles)
    return g


def test_factored_nested_matmul() -> None:
    g = run_both("nested_matmul")  # C dense: the reducer's coordinates locate into it
    assert any(n.kind is NodeKind.LOCATE for n in g.nodes.values())
    g = run_both("nested_matmul", "full_scan")  # locate off: C intersected with the reducer
    joiners = [n for n in g.nodes.values() if n.kind is NodeKind.INTERSECT and n.param("val_refs")]
    assert joiners, "the reducer's values ride on a joiner's reference port"


def test_factored_gcn_layer_one_graph() -> None:
    assert len(compiled("gcn_relu", "full").graphs) == 1
    g = run_both("gcn_relu")
    assert any(n.kind is NodeKind.REPEAT and n.param("stream") is StreamKind.VAL
               for n in g.nodes.values())
    assert any(n.kind is NodeKind.UNION and n.param("val_refs") for n in g.nodes.values())
    assert any(n.kind is NodeKind.ALU and n.param("op") is AluOp.RELU for n in g.nodes.values())


def test_nested_two_layer_gcn_one_graph() -> None:
    """Full fusion of two GCN layers: layer 1 recomputed under layer 2's rows, in one graph."""
    assert len(compiled("gcn_two_layer", "full").graphs) == 1
    assert compiled("gcn_two_layer", "full").groups[0].recomputed
    run_both("gcn_two_layer")


def test_block_ram_fifos_keep_the_timing() -> None:
    """Every output FIFO of 3 or more slots as a RamFIFO and the sparse accumulators' sums in
    block RAM (synchronous reads, as the iCE40 flow builds them): same outputs and the same
    cycle count as sw_sim."""
    g = compiled("gcn_relu", "full").graphs[0]
    assert max(g.depth(e) for e in g.edges) >= 8  # size_fifos gave it deep FIFOs
    assert any(n.kind is NodeKind.SPACC1 for n in g.nodes.values())
    run_both("gcn_relu", cfg=HwConfig(ram_fifo_depth=3, spacc_block_ram=True))


def test_crd_drop_and_skip_empty_writers() -> None:
    g = run_both("mul3")
    assert sum(n.kind is NodeKind.CRD_DROP for n in g.nodes.values()) == 2
    assert sum(bool(n.param("skip_empty")) for n in g.nodes.values()
               if n.kind is NodeKind.WRITE) == 2


def _numpy_outputs(program: str, graph: int) -> None:
    """Every output of the graph (sw_sim) equals numpy (the suite's expected value covers
    graphs writing one tensor only)."""
    from fuseflow.compiler.runner import reference_all
    from fuseflow.suites.compiler import PROGRAMS
    comp = compiled(program, "full")
    for seed in SEEDS:
        g, data, _ = graph_case(program, "full", graph, seed, run_graph)
        ref = reference_all(comp.program, PROGRAMS[program].data(seed))
        for t, out in run_graph(g, data).outputs.items():
            np.testing.assert_array_equal(out.to_dense(), ref[t], err_msg=f"{program} {t}")


def test_order_two_accumulator() -> None:
    """Outer-product SpMM k->i->j: the compiled SPACC2 in RTL."""
    g = run_both("spmm_outer")
    assert any(n.kind is NodeKind.SPACC2 for n in g.nodes.values())


def test_densified_iteration_and_new_operators() -> None:
    """A sparse matrix written dense, and maximum / minimum / a shift of a sparse operand /
    division by a dense tensor in one graph: union with a dense iteration tensor's scanner."""
    g = run_both("to_dense")
    assert any(t.startswith("_iter") for t in g.input_tensors())
    g = run_both("ops")
    ops = {n.param("op") for n in g.nodes.values() if n.kind is NodeKind.ALU}
    assert {AluOp.MAX, AluOp.MIN, AluOp.DIV, AluOp.ADD_SCALAR} <= ops
    _numpy_outputs("ops", 0)


def test_max_reduction_and_scalar_output() -> None:
    g = run_both("row_max", graph=0)
    assert any(n.kind is NodeKind.REDUCE and n.param("op").value == "max" for n in g.nodes.values())
    g = run_both("row_max", graph=1)  # the dot product: a 0-d output (a values writer only)
    assert g.tensors["s"].fmt.order == 0


def _rowfn_programs():
    from fuseflow.compiler import Program, einsum, layernorm, softmax

    rng = np.random.default_rng(12)
    n, d, e = 8, 4, 4
    att = Program("attention_rtl")
    M = att.tensor("M", (n, n), "csr")
    Q = att.tensor("Q", (n, d), "dense")
    K = att.tensor("K", (n, d), "dense")
    V = att.tensor("V", (n, e), "dense")
    S = att.let("S", einsum("ij,id,jd->ij", M, Q, K) * 0.5)
    P = att.let("P", softmax(S))
    O = att.let("O", einsum("ij,je->ie", P, V))
    att.region(S, P, O)
    att.output(O)
    m = (rng.random((n, n)) < 0.6).astype(float)
    m[2] = 0.0  # an empty row
    att_data = {"M": m, "Q": rng.normal(size=(n, d)), "K": rng.normal(size=(n, d)),
                "V": rng.normal(size=(n, e))}
    ln = Program("layernorm_linear_rtl")
    X = ln.tensor("X", (6, 8), "dense")
    W = ln.tensor("W", (4, 8), "dense", mode_order=(1, 0))
    L = ln.let("L", layernorm(X))
    Y = ln.let("Y", einsum("ik,jk->ij", L, W))
    ln.region(L, Y)
    ln.output(Y)
    ln_data = {"X": rng.normal(size=(6, 8)) * 2, "W": rng.normal(size=(4, 8))}
    return [(att, att_data), (ln, ln_data)]


@pytest.mark.parametrize("case", [0, 1], ids=["attention", "layernorm_linear"])
def test_row_functions_q16_16_rtl_equals_sw_sim(case: int) -> None:
    """A fused masked attention (scores, softmax, P·V in one graph) and a layernorm feeding a
    linear layer, in Q16.16: the RTL's outputs equal sw_sim's bit for bit, in equal cycles."""
    from fuseflow.compiler import Fusion, compile_program
    from fuseflow.compiler.runner import initial_tensors
    from fuseflow.ir.numerics import Numerics

    program, data = _rowfn_programs()[case]
    num = Numerics.parse("q16.16")
    cp = compile_program(program, Fusion.FULL)
    assert len(cp.graphs) == 1
    [g] = cp.graphs
    inputs = initial_tensors(cp, {k: num.quantize(v) for k, v in data.items()})
    sw = run_graph(g, inputs, numerics=num)
    # the attention on Verilator (the native harness: exp, division and maximum in the Verilog
    # the simulator compiles), the layernorm under amaranth.sim (the same RTL, nothing to build)
    [rtl] = run_graph_batch(g, [inputs], cfg=HwConfig.for_numerics(num), runner=("native", "amaranth")[case])
    for t in sw.outputs:
        assert_same(t, rtl.outputs[t], sw.outputs[t])
    assert rtl.cycles == sw.cycles


def test_coo_operand() -> None:
    """SpMM with A in COO, duplicates in the data: the non-unique and singleton scanners (no seg
    memory for the singleton level), x located at the singleton level, the duplicates summed by
    the order-2 accumulator; values and cycles equal sw_sim, values equal numpy."""
    from fuseflow.suites.compiler import PROGRAMS
    from fuseflow.ir.tensor import Format
    from hw.elaborate import GraphTop

    g = run_both("coo_spmm")
    assert g.tensors["A"].fmt.levels == (Format.COMPRESSED_NONUNIQUE, Format.SINGLETON)
    assert any(n.kind is NodeKind.SPACC2 for n in g.nodes.values())
    regions = {r.name for r in GraphTop(g, HwConfig()).mmap.regions if r.name.startswith("A.")}
    assert regions == {"A.0.seg", "A.0.crd", "A.1.crd", "A.vals"}
    a = PROGRAMS["coo_spmm"].data(SEEDS[0])["A"]
    assert len(a.vals) > np.count_nonzero(a.to_dense())  # the data has duplicates


def test_coo_operand_off_chip() -> None:
    """The same COO SpMM with every tensor behind a small sdram model: the non-unique level's
    seg / crd ports and the singleton level's crd port (no seg port) wait for their lines in
    RTL exactly as in sw_sim (cycles and values equal)."""
    memory = "sdram:row_bytes=16,banks=2"
    cases = [graph_case("coo_spmm", "full", 0, s, run_graph) for s in SEEDS]
    g = cases[0][0]
    rtl = run_graph_batch(g, [d for _, d, _ in cases], cfg=HwConfig(memory=memory), runner="amaranth")
    for (_, data, expected), r in zip(cases, rtl):
        sw = run_graph(g, data, memory=memory)
        assert_same("C", r.outputs["C"], sw.outputs["C"])
        np.testing.assert_array_equal(sw.outputs["C"].to_dense(), expected)
        assert r.cycles == sw.cycles, (r.cycles, sw.cycles)
        ports = {k for k, a in sw.counters["arrays"].items() if k.startswith("A.") and a.get("lines")}
        assert ports == {"A.seg0", "A.crd0", "A.crd1", "A.vals"}
        assert sw.cycles > run_graph(g, data).cycles  # the memory model costs cycles


@pytest.mark.parametrize(("block", "lanes"), [(4, None), (8, 4)], ids=["lanes4", "split8x4"])
def test_blocked_attention_rtl_equals_sw_sim(block: int, lanes: int | None) -> None:
    """BigBird attention with its keys blocked (vector loads, lanewise multiplies with a scalar
    operand, lanewise reductions, lane sums, vectors on the joiner's value port): the RTL's
    outputs and cycles equal sw_sim's, and numpy's product."""
    import importlib.util
    from pathlib import Path

    from fuseflow.compiler import Fusion, compile_program
    from fuseflow.compiler.runner import initial_tensors
    from fuseflow.models.datasets import bigbird_mask

    path = Path(__file__).resolve().parents[2] / "examples" / "programs" / "bigbird_attention.py"
    spec = importlib.util.spec_from_file_location("example_bigbird_attention", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    seq, head = 16, 4
    p = example.program(seq, head)
    rng = np.random.default_rng(8)
    data = {"M": bigbird_mask(seq, block, seed=1).astype(np.int64), "Q": rng.integers(-3, 4, (seq, head)),
            "K": rng.integers(-3, 4, (seq, head)), "V": rng.integers(-3, 4, (seq, head))}
    cp = compile_program(p, Fusion.FULL, block={"j": block}, lanes=lanes)
    [g] = cp.graphs
    inputs = initial_tensors(cp, data)
    sw = run_graph(g, inputs)
    np.testing.assert_array_equal(sw.outputs["O"].to_dense(),
                                  (data["M"] * (data["Q"] @ data["K"].T)) @ data["V"])
    [rtl] = run_graph_batch(g, [inputs], cfg=HwConfig(), runner="amaranth")
    for t in sw.outputs:
        assert_same(t, rtl.outputs[t], sw.outputs[t])
    assert rtl.cycles == sw.cycles
