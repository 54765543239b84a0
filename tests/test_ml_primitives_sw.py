"""sw_sim: ML primitives (unary ALU, div, fixed-point ALU / reduce / spacc, value repeat,
coordinate mask, stop-token drop) and the composite lowerings, against independent references
(math / numpy / fibertrees)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from streamref import fibers
from vectors import fiber_stream

from fuseflow.compiler.lowering import bias_add, bias_lookup, row_layernorm, row_softmax
from fuseflow.ir.builder import GraphBuilder
from fuseflow.ir.numerics import DEFAULT_FIXED, FLOAT, Numerics
from fuseflow.ir.samml import AluOp, Graph, GraphError, NodeKind, Role, StreamKind
from fuseflow.ir.tensor import CSR, DENSE2, TensorData, TensorFormat
from fuseflow.ir.tokens import DONE, EMPTY, Stop, format_stream, parse_stream, stop
from fuseflow.kernels import example
from sw_sim import DeadlockError, ProtocolError, run_graph, simulate_primitive

Q = DEFAULT_FIXED
LSB = 2.0**-Q.frac


def _rows(rng: random.Random, n_rows: int, max_len: int, lo: float, hi: float) -> list[list[float]]:
    return [[rng.uniform(lo, hi) for _ in range(rng.randint(0, max_len))] for _ in range(n_rows)]


def _stream(rows: list[list[float]], num=Q) -> str:
    return format_stream(fiber_stream([[num.to_raw(x) for x in r] for r in rows], 2))


def _values(tokens) -> list:
    return [t for t in tokens if not isinstance(t, Stop) and t is not DONE]


def _structure(tokens) -> str:
    return format_stream(["x" if not isinstance(t, (Stop,)) and t is not DONE else t for t in tokens])


# ----------------------------------------------------------------------------- unary ALU
EXACT = {
    "exp": math.exp,
    "rsqrt": lambda x: 1 / math.sqrt(x),
    "sigmoid": lambda x: 1 / (1 + math.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))),
    "relu": lambda x: max(x, 0.0),
    "neg": lambda x: -x,
}
RANGES = {"exp": (-12, 3), "rsqrt": (0.01, 100), "sigmoid": (-10, 10), "gelu": (-6, 9), "relu": (-5, 5),
          "neg": (-5, 5)}


@pytest.mark.parametrize("op", sorted(EXACT))
def test_unary_fixed_against_math(op):
    rng = random.Random(7)
    rows = _rows(rng, 8, 6, *RANGES[op])
    res = simulate_primitive("alu", {"a": _stream(rows)}, op=op, numerics=Q)
    want = [EXACT[op](Q.from_raw(Q.to_raw(x))) for r in rows for x in r]
    got = [Q.from_raw(v) for v in _values(res["val"])]
    tol = {"exp": 2e-5, "rsqrt": 3e-5}.get(op, 0.0)
    for g, w in zip(got, want, strict=True):
        assert abs(g - w) <= 2.5 * LSB + tol * abs(w), (op, g, w)
    assert _structure(res["val"]) == _structure(parse_stream(_stream(rows)))
    # II = 1: twice the tokens take exactly that many more cycles
    one = simulate_primitive("alu", {"a": _stream(rows)}, op=op, numerics=Q)
    two = simulate_primitive("alu", {"a": _stream(rows + rows)}, op=op, numerics=Q)
    assert two.cycles - one.cycles == len(parse_stream(_stream(rows + rows))) - len(parse_stream(_stream(rows)))


def test_unary_scalar_ops_and_empty():
    s = f"{Q.to_raw(1.5)},N,S0,{Q.to_raw(-2.0)},S1,D"
    add = simulate_primitive("alu", {"a": s}, op="add_scalar", scalar=0.25, numerics=Q)["val"]
    assert [Q.from_raw(v) for v in _values(add)] == [1.75, 0.25, -1.75]
    mul = simulate_primitive("alu", {"a": s}, op="mul_scalar", scalar=-2, numerics=Q)["val"]
    assert [Q.from_raw(v) for v in _values(mul)] == [-3.0, 0.0, 4.0]
    assert format_stream(simulate_primitive("alu", {"a": "3,-4,S0,D"}, op="relu")["val"]) == "3,0,S0,D"
    assert format_stream(simulate_primitive("alu", {"a": "3,-4,S0,D"}, op="neg")["val"]) == "-3,4,S0,D"
    assert simulate_primitive("alu", {"a": f"{Q.lo},S0,D"}, op="neg", numerics=Q)["val"][0] == Q.hi


def test_unary_float_mode():
    res = simulate_primitive("alu", {"a": "0.5,-1.0,S0,D"}, op="gelu", numerics="float")
    assert _values(res["val"]) == [EXACT["gelu"](0.5), EXACT["gelu"](-1.0)]


def test_unary_needs_fixed_names_node():
    b = GraphBuilder("g")
    g = b.g
    g.tensor("A", (4,), TensorFormat(("dense",)))
    g.tensor("B", (4,), TensorFormat(("dense",)), Role.OUTPUT)
    crd, ref = b.scan("A", 0, b.root("A"))
    b.write("B", 0, crd)
    b.write_vals("B", b.node(NodeKind.ALU, "softplus", {"a": b.load("A", ref)}, op="exp")["val"])
    data = {"A": TensorData.from_dense(np.arange(4), g.tensors["A"].fmt)}
    with pytest.raises(ValueError, match="node 'softplus' \\(exp\\): exp needs fixed-point or float"):
        run_graph(g, data)


# ----------------------------------------------------------------------------- binary / reduce / spacc
def _rhu(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def _clamp(v: int) -> int:
    return max(Q.lo, min(Q.hi, v))


def test_fixed_mul_div_exact():
    rng = random.Random(3)
    rows_a = _rows(rng, 6, 5, -50, 50)
    rows_b = [[rng.choice([rng.uniform(-3, 3), 0.0]) for _ in r] for r in rows_a]
    a, b = _stream(rows_a), _stream(rows_b)
    av = [Q.to_raw(x) for r in rows_a for x in r]
    bv = [Q.to_raw(x) for r in rows_b for x in r]
    mul = _values(simulate_primitive("alu", {"a": a, "b": b}, op="mul", numerics=Q)["val"])
    assert mul == [_clamp(_rhu(Fraction(x * y, 2**Q.frac))) for x, y in zip(av, bv)]
    div = _values(simulate_primitive("alu", {"a": a, "b": b}, op="div", numerics=Q)["val"])
    assert div == [_clamp(_rhu(Fraction(x * 2**Q.frac, y))) if y else (Q.hi if x > 0 else Q.lo if x < 0 else 0)
                   for x, y in zip(av, bv)]


def test_int_mode_unchanged():
    assert format_stream(simulate_primitive("alu", {"a": "2147483647,S0,D", "b": "1,S0,D"}, op="add")["val"]) \
        == "-2147483648,S0,D"
    assert format_stream(simulate_primitive("alu", {"a": "7,-7,S0,D", "b": "2,2,S0,D"}, op="div")["val"]) \
        == "3,-4,S0,D"


def test_fixed_reduce_saturates_and_max():
    big = Q.to_raw(30000.0)
    res = simulate_primitive("reduce", {"val": f"{big},{big},S0,{-big},{-big},S1,D"}, op="add", numerics=Q)
    assert res["val"][:2] == [Q.hi, Q.lo]
    rng = random.Random(5)
    rows = _rows(rng, 10, 6, -100, 100)
    mx = simulate_primitive("reduce", {"val": _stream(rows)}, op="max", numerics=Q)["val"]
    assert _values(mx) == [max((Q.to_raw(x) for x in r), default=Q.lo) for r in rows]


def test_fixed_spacc1_saturates():
    big = Q.to_raw(20000.0)
    res = simulate_primitive("spacc1", {"outer": "0,1,S0,D", "inner": "0,2,S0,2,S1,D",
                                        "val": f"{big},{big},S0,{big},S1,D"}, dim=4, numerics=Q)
    assert format_stream(res["crd"]) == "0,2,S0,D"
    assert res["val"] == [big, Q.hi, stop(0), DONE]


# ----------------------------------------------------------------------------- value repeat
def test_value_repeat_design_example():
    res = simulate_primitive("repeat", {"ref": "5,-7,S0,D", "repsig": "R,R,S,R,S,D"}, stream="val")
    assert format_stream(res["ref"]) == "5,5,S0,-7,S1,D"


# ----------------------------------------------------------------------------- coordinate mask
def _rand_matrix_tree(rng: random.Random, n: int = 8, m: int = 10, p: float = 0.5):
    """(outer coordinates, rows of inner coordinates) of a random 2-level fibertree."""
    outer = [i for i in range(n) if rng.random() < 0.7]
    return outer, [[j for j in range(m) if rng.random() < p] for _ in outer]


KEEP = {
    "causal": (lambda i, j: j <= i, {}),
    "band": (lambda i, j: i - 1 <= j <= i + 2, {"before": 1, "after": 2}),
    "block": (lambda i, j: [[1, 0, 1], [0, 1, 0], [1, 1, 0]][i // 4][j // 4] if i < 12 and j < 12 else False,
              {"block": 4, "pattern": [[1, 0, 1], [0, 1, 0], [1, 1, 0]]}),
}


@pytest.mark.parametrize("pred", sorted(KEEP))
def test_crd_mask_against_fibertree(pred):
    keep, params = KEEP[pred]
    rng = random.Random(11)
    for trial in range(30):
        outer, rows = _rand_matrix_tree(rng, 14, 14)
        refs, k = [], 0
        for r in rows:
            refs.append(list(range(k, k + len(r))))
            k += len(r)
        res = simulate_primitive("crd_mask", {"outer": fiber_stream(outer, 1), "inner": fiber_stream(rows, 2),
                                              "ref": fiber_stream(refs, 2)}, pred=pred, **params)
        kept_c = [[j for j in r if keep(i, j)] for i, r in zip(outer, rows)]
        kept_r = [[x for j, x in zip(r, rr) if keep(i, j)] for i, r, rr in zip(outer, rows, refs)]
        assert res["crd"] == fiber_stream(kept_c, 2), (trial, outer, rows)
        assert res["ref"] == fiber_stream(kept_r, 2)


def test_crd_mask_protocol_errors_name_node():
    with pytest.raises(ProtocolError, match="node 'crd_mask'.*ref stream is at S0"):
        simulate_primitive("crd_mask", {"outer": "0,S0,D", "inner": "1,2,S1,D", "ref": "0,S0,D"}, pred="causal")
    with pytest.raises(ProtocolError, match="needs outer S0"):
        simulate_primitive("crd_mask", {"outer": "0,D", "inner": "1,S1,D", "ref": "0,S1,D"}, pred="causal")
    with pytest.raises(ValueError, match="node 'crd_mask' \\(crd_mask\\): block=3 must be a power of two"):
        simulate_primitive("crd_mask", {"outer": "0,S0,D", "inner": "1,S1,D", "ref": "0,S1,D"}, pred="block",
                           block=3, pattern=[[1]])


def test_crd_mask_graph_verifier_rejects_bad_pred():
    g = Graph("m")
    with pytest.raises(GraphError, match="node 'mask' \\(crd_mask\\): pred 'diagonal' is not one of"):
        g.add(NodeKind.CRD_MASK, "mask", pred="diagonal")


# ----------------------------------------------------------------------------- stop-token drop
def _prune(tree, depth):
    if depth == 1:
        return list(tree)
    kids = [_prune(c, depth - 1) for c in tree]
    return [c for c in kids if c]


def _rand_tree(rng: random.Random, depth: int):
    if depth == 1:
        return [rng.randint(0, 9) for _ in range(rng.choice([0, 0, 1, 2, 3]))]
    return [_rand_tree(rng, depth - 1) for _ in range(rng.randint(0, 3))]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_stkn_drop_prunes_empty_fibers(depth):
    rng = random.Random(depth)
    for _ in range(200):
        tree = _rand_tree(rng, depth)
        res = simulate_primitive("stkn_drop", {"in": fiber_stream(tree, depth)})
        assert res["out"] == fiber_stream(_prune(tree, depth), depth), tree


def test_stkn_drop_examples_and_throughput():
    assert format_stream(simulate_primitive("stkn_drop", {"in": "1,S0,S0,2,S1,D"})["out"]) == "1,S0,2,S1,D"
    assert format_stream(simulate_primitive("stkn_drop", {"in": "S0,S1,D"})["out"]) == "S1,D"
    assert format_stream(simulate_primitive("stkn_drop", {"in": "N,S0,D"}, stream="ref")["out"]) == "N,S0,D"
    n = 50
    res = simulate_primitive("stkn_drop", {"in": ",".join(map(str, range(n))) + ",S0,D"})
    assert res.cycles == n + 2 + 3  # II 1; one extra cycle each for the held stop and D
    with pytest.raises(ProtocolError, match="node 'stkn_drop'.*unexpected token R"):
        simulate_primitive("stkn_drop", {"in": [1, parse_stream("R")[0], DONE]})


# ----------------------------------------------------------------------------- lowerings end to end
def csr_graph(name: str, n: int, m: int, fmt: TensorFormat, body) -> Graph:
    """C = body(A) elementwise over an n x m matrix A stored in ``fmt`` (C in the same format):
    ``body(builder, A's value stream)`` returns C's value stream."""
    b = GraphBuilder(name)
    g = b.g
    g.tensor("A", (n, m), fmt)
    g.tensor("C", (n, m), fmt, Role.OUTPUT)
    ci, ri = b.scan("A", 0, b.root("A"))
    b.write("C", 0, ci)
    cj, rj = b.scan("A", 1, ri)
    b.write("C", 1, cj)
    b.write_vals("C", body(b, b.load("A", rj)))
    return g


def softmax_graph(n: int, m: int) -> Graph:
    return csr_graph("row_softmax", n, m, CSR, lambda b, x: row_softmax(b, x, m))


def sparse_softmax_ref(a: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a, dtype=np.float64)
    for i, row in enumerate(a):
        nz = row != 0
        if nz.any():
            e = np.exp(row[nz] - row[nz].max())
            out[i, nz] = e / e.sum()
    return out


def random_csr_values(rng: np.random.Generator, n: int, m: int, density: float = 0.5) -> np.ndarray:
    a = rng.uniform(0.2, 4.0, (n, m)) * rng.choice([-1, 1], (n, m))
    a[rng.random((n, m)) > density] = 0
    a[1] = 0  # an empty row
    return a


@pytest.mark.parametrize("num", [Q, FLOAT], ids=str)
def test_softmax_lowering_matches_numpy(num):
    rng = np.random.default_rng(0)
    a = random_csr_values(rng, 8, 12)
    g = softmax_graph(8, 12)
    res = run_graph(g, {"A": TensorData.from_dense(num.quantize(a), CSR)}, numerics=num)
    got = num.dequantize(res.outputs["C"].to_dense())
    ref = sparse_softmax_ref(num.dequantize(num.quantize(a)))
    np.testing.assert_allclose(got, ref, atol=4 * LSB if num is Q else 1e-12, rtol=0)
    np.testing.assert_array_equal(got != 0, a != 0)


def test_softmax_short_fifo_deadlocks_clearly():
    g = csr_graph("tight", 2, 12, CSR, lambda b, x: row_softmax(b, x, 1))
    a = np.ones((2, 12))
    with pytest.raises(DeadlockError, match="deadlock"):
        run_graph(g, {"A": TensorData.from_dense(Q.quantize(a), CSR)}, numerics=Q)


def layernorm_graph(n: int, d: int) -> Graph:
    return csr_graph("row_layernorm", n, d, DENSE2, lambda b, v: row_layernorm(b, v, d))


def layernorm_ref(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)


@pytest.mark.parametrize("num", [Q, FLOAT], ids=str)
def test_layernorm_lowering_matches_numpy(num):
    rng = np.random.default_rng(1)
    x = rng.normal(0.5, 3.0, (5, 16))
    res = run_graph(layernorm_graph(5, 16), {"A": TensorData.from_dense(num.quantize(x), DENSE2)}, numerics=num)
    got = num.dequantize(res.outputs["C"].to_dense())
    np.testing.assert_allclose(got, layernorm_ref(num.dequantize(num.quantize(x))), atol=2e-4 if num is Q else 1e-9,
                               rtol=0)


@pytest.mark.parametrize("num", [Q, Numerics.integer(32)], ids=str)
def test_bias_add_lowering_matches_numpy(num):
    rng = np.random.default_rng(2)
    n, m = 6, 9
    a = random_csr_values(rng, n, m)
    bias = rng.uniform(-2, 2, m)
    if num.mode.value == "int":
        a, bias = np.round(a * 3), np.round(bias * 3)
    b = GraphBuilder("bias")
    g = b.g
    g.tensor("A", (n, m), CSR)
    g.tensor("bias", (m,), TensorFormat(("dense",)))
    g.tensor("C", (n, m), CSR, Role.OUTPUT)
    ci, ri = b.scan("A", 0, b.root("A"))
    ci_w, ci_r = b.bcast(ci, 2, StreamKind.CRD)
    b.write("C", 0, ci_w)
    cj, rj = b.scan("A", 1, ri)
    c, r, bv = bias_lookup(b, "bias", cj, rj, ci_r)
    b.write("C", 1, c)
    b.write_vals("C", bias_add(b, b.load("A", r), bv))
    data = {"A": TensorData.from_dense(num.quantize(a), CSR),
            "bias": TensorData.from_dense(num.quantize(bias), g.tensors["bias"].fmt)}
    res = run_graph(g, data, numerics=num)
    got = num.dequantize(res.outputs["C"].to_dense())
    ref = np.where(a != 0, num.dequantize(num.quantize(a)) + num.dequantize(num.quantize(bias)), 0)
    np.testing.assert_allclose(got, ref, atol=0)


def test_mask_then_stkn_drop_pipeline():
    """Causal mask over a CSR matrix, then the pruned row structure (stop-token drop)."""
    rows = {0: [1, 2], 2: [0, 2, 5], 3: [4]}
    outer = sorted(rows)
    mrows = [rows[i] for i in outer]
    refs = [list(range(sum(len(r) for r in mrows[:k]), sum(len(r) for r in mrows[: k + 1])))
            for k in range(len(mrows))]
    res = simulate_primitive("crd_mask", {"outer": fiber_stream(outer, 1), "inner": fiber_stream(mrows, 2),
                                          "ref": fiber_stream(refs, 2)}, pred="causal")
    dropped = simulate_primitive("stkn_drop", {"in": res["crd"]})["out"]
    assert dropped == fiber_stream([[0, 2]], 2)  # rows 0 and 3 become empty and vanish
    assert EMPTY not in dropped


# ----------------------------------------------------------------------------- spacc2
def spacc2_vectors(rng: random.Random, n: int) -> list[tuple[dict, dict]]:
    """Random inputs (rows of outer fibers over k, each k holding a sparse (i, j) matrix) and the
    expected outputs, from dictionaries summed directly."""
    out = []
    for _ in range(n):
        rows = []
        for _ in range(rng.randint(1, 3)):
            ks = sorted(rng.sample(range(5), rng.randint(0, 3)))
            rows.append([{i: {j: rng.randint(-9, 9) for j in sorted(rng.sample(range(6), rng.randint(0, 3)))}
                          for i in sorted(rng.sample(range(4), rng.randint(0, 3)))} for _ in ks])
            rows[-1] = list(zip(ks, rows[-1]))
        inputs = {
            "outer": fiber_stream([[k for k, _ in r] for r in rows], 2),
            "inner0": fiber_stream([[sorted(d) for _, d in r] for r in rows], 3),
            "inner1": fiber_stream([[[sorted(d[i]) for i in sorted(d)] for _, d in r] for r in rows], 4),
            "val": fiber_stream([[[[d[i][j] for j in sorted(d[i])] for i in sorted(d)] for _, d in r] for r in rows], 4),
        }
        sums = []
        for r in rows:
            acc: dict[tuple[int, int], int] = {}
            for _, d in r:
                for i, js in d.items():
                    for j, v in js.items():
                        acc[i, j] = acc.get((i, j), 0) + v
            sums.append(acc)
        iss = [sorted({i for i, _ in a}) for a in sums]
        expected = {
            "crd0": fiber_stream(iss, 2),
            "crd1": fiber_stream([[[j for (i2, j) in sorted(a) if i2 == i] for i in is_] for a, is_ in zip(sums, iss)], 3),
            "val": fiber_stream([[[a[i, j] for (i2, j) in sorted(a) if i2 == i] for i in is_]
                                 for a, is_ in zip(sums, iss)], 3),
        }
        out.append((inputs, expected))
    return out


def test_spacc2_against_dict_sums():
    for inputs, expected in spacc2_vectors(random.Random(0), 300):
        res = simulate_primitive("spacc2", inputs, dim0=4, dim1=6)
        assert {p: res[p] for p in expected} == expected, {p: format_stream(v) for p, v in inputs.items()}


def test_spacc2_design_style_example_and_errors():
    # k=0: {0: {1: 1}, 2: {0: 2}}; k=1: {0: {1: 10, 3: 4}}  ->  {0: {1: 11, 3: 4}, 2: {0: 2}}
    res = simulate_primitive("spacc2", {"outer": "0,1,S0,D", "inner0": "0,2,S0,0,S1,D",
                                        "inner1": "1,S0,0,S1,1,3,S2,D", "val": "1,S0,2,S1,10,4,S2,D"},
                             dim0=4, dim1=4)
    assert format_stream(res["crd0"]) == "0,2,S0,D"
    assert format_stream(res["crd1"]) == "1,3,S0,0,S1,D"
    assert format_stream(res["val"]) == "11,4,S0,2,S1,D"
    with pytest.raises(ProtocolError, match="node 'spacc2'.*inner1 coordinate 5 outside dimension 4"):
        simulate_primitive("spacc2", {"outer": "0,S0,D", "inner0": "0,S1,D", "inner1": "5,S2,D", "val": "1,S2,D"},
                           dim0=4, dim1=4)
    with pytest.raises(ProtocolError, match="node 'spacc2'.*needs inner0 S1"):
        simulate_primitive("spacc2", {"outer": "0,S0,D", "inner0": "0,S0,D", "inner1": "1,S2,D", "val": "1,S2,D"},
                           dim0=4, dim1=4)


def test_new_nodes_verify_and_round_trip_json():
    g = csr_graph("attn_ops", 4, 8, CSR, lambda b, x: row_softmax(b, x, 8))
    m = g.add(NodeKind.CRD_MASK, "mask", pred="block", block=2, pattern=[[1, 0], [1, 1]])
    s = g.add(NodeKind.ALU, "scale", op="mul_scalar", scalar=0.125)
    g2 = Graph.from_json(g.to_json())
    assert g2.nodes["mask"].params == {"pred": m.params["pred"], "block": 2, "pattern": ((1, 0), (1, 1))}
    assert g2.nodes["scale"].params["scalar"] == s.params["scalar"]
    assert g2.nodes["scale"].inputs() == {"a": g.nodes["scale"].inputs()["a"]}
    assert g2.structure_hash() == g.structure_hash()
    with pytest.raises(Exception, match="input port mask.outer is not driven"):
        g2.verify()


# ----------------------------------------------------------------------------- double-buffered spacc
# buffers=2: the same tokens as buffers=1 (checked against sums written out here, not against the
# single-bank model), and a flush that overlaps the next fiber's accumulation.
def _wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


REDUCERS = {  # (numerics, op) -> the accumulation, written from the numeric rules (docs/numerics.md)
    ("int", "add"): (None, lambda a, b: _wrap32(a + b)),
    ("int", "max"): (None, max),
    ("fixed", "add"): (Q, lambda a, b: int(np.clip(a + b, Q.lo, Q.hi))),
    ("fixed", "max"): (Q, max),
}


@pytest.mark.parametrize("op", ["max", "min"])
def test_alu_identity_empty_takes_the_other_operand(op):
    """``identity_empty``: an ``N`` operand of a max / min is no value (the other operand is the
    result), not a 0 as in the plain ALU: the merge of partial maxima from a union, where a
    coordinate one side lacks comes as ``N``."""
    a = "-5,N,-7,N,3,S0,D"
    b = "N,-2,-9,N,-1,S0,D"
    fn = max if op == "max" else min
    want = [-5, -2, fn(-7, -9), 0, fn(3, -1)]  # both N: 0, as the plain ALU
    got = simulate_primitive("alu", {"a": a, "b": b}, op=op, identity_empty=True)["val"]
    assert _values(got) == want
    plain = simulate_primitive("alu", {"a": a, "b": b}, op=op)["val"]
    assert _values(plain) == [fn(-5, 0), fn(0, -2), fn(-7, -9), 0, fn(3, -1)]
    with pytest.raises(GraphError, match="identity_empty needs op max or min, not add"):
        Graph("g").add(NodeKind.ALU, "x", op=AluOp.ADD, identity_empty=True)


def spacc1_tree(rng: random.Random, depth: int, n_fibers: int, dim: int, lo: int, hi: int,
                empty: float = 0.2) -> tuple[list, list, list]:
    """Random (outer, inner, values) fibertrees for spacc1: ``depth`` outer levels whose top holds
    ``n_fibers`` entries; each innermost outer fiber (one accumulation) has 0-3 coordinates k,
    some of its fibers empty, each k an inner fiber of sorted coordinates below ``dim``."""
    def outer(d: int, n: int) -> list:
        if d == 1:
            return [] if rng.random() < empty else sorted(rng.sample(range(20), rng.randint(1, 3)))
        return [outer(d - 1, rng.randint(0, 3)) for _ in range(n)]

    def inner(t: list, d: int) -> list:
        if d == 1:
            return [sorted(rng.sample(range(dim), rng.randint(0, min(dim, 6)))) for _ in t]
        return [inner(c, d - 1) for c in t]

    def values(t: list, d: int) -> list:
        if d == 1:
            return [rng.randint(lo, hi) for _ in t]
        return [values(c, d - 1) for c in t]

    o = outer(depth, n_fibers) if depth > 1 else outer(1, 0)
    i = inner(o, depth)
    return o, i, values(i, depth + 1)


def spacc1_inputs(o, i, v, depth: int) -> dict:
    return {"outer": fiber_stream(o, depth), "inner": fiber_stream(i, depth + 1), "val": fiber_stream(v, depth + 1)}


def spacc1_reference(inputs: dict, dim: int, fn) -> dict:
    """Per outer fiber (an inner stop of level >= 1 ends it): a dense numpy accumulator and its
    touched flags, then the touched coordinates in order and the stop one level lower."""
    crd: list = []
    val: list = []
    acc, seen = np.zeros(dim, dtype=np.int64), np.zeros(dim, dtype=bool)
    for (cs, s), (vs, _) in zip(fibers(inputs["inner"]), fibers(inputs["val"]), strict=True):
        for c, x in zip(cs, vs, strict=True):
            acc[c] = fn(int(acc[c]), x) if seen[c] else x
            seen[c] = True
        if s.level >= 1:
            keys = np.flatnonzero(seen).tolist()
            crd += [*keys, stop(s.level - 1)]
            val += [int(acc[k]) for k in keys] + [stop(s.level - 1)]
            acc[:], seen[:] = 0, False
    return {"crd": [*crd, DONE], "val": [*val, DONE]}


@pytest.mark.parametrize("mode,op", sorted(REDUCERS))
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_spacc1_double_against_numpy_sums(mode, op, depth):
    num, fn = REDUCERS[mode, op]
    lo, hi = (-(2**31), 2**31 - 1) if mode == "int" else (Q.to_raw(-20000.0), Q.to_raw(20000.0))
    rng = random.Random(f"{mode}{op}{depth}")
    for _ in range(25):
        inputs = spacc1_inputs(*spacc1_tree(rng, depth, rng.randint(1, 8), 10, lo, hi), depth)
        expected = spacc1_reference(inputs, 10, fn)
        res = simulate_primitive("spacc1", inputs, dim=10, op=op, buffers=2, numerics=num)
        assert {p: res[p] for p in expected} == expected, {p: format_stream(t) for p, t in inputs.items()}


def test_spacc1_double_empty_fibers_and_nested_stops():
    # fibers: {0: 1, 2: 12, 3: 20}; empty; {1: 5} (closing S1); then an empty top-level fiber
    inputs = {"outer": "0,1,S0,S0,3,S1,S2,D", "inner": "0,2,S0,2,3,S1,S1,1,S2,S3,D",
              "val": "1,2,S0,10,20,S1,S1,5,S2,S3,D"}
    res = simulate_primitive("spacc1", inputs, dim=8, buffers=2)
    assert format_stream(res["crd"]) == "0,2,3,S0,S0,1,S1,S2,D"
    assert format_stream(res["val"]) == "1,12,20,S0,S0,5,S1,S2,D"


def spacc1_phases(o: list, i: list, depth: int) -> list[tuple[int, int]]:
    """(accumulate, flush) cycles of each outer fiber, from the model's stated rules: one cycle
    per inner coordinate, one per outer coordinate (its ``S0``, or popping the last one), one
    for the end of the fiber; the flush one per distinct coordinate plus one for the stop."""
    if depth > 1:  # an empty fiber above the innermost level is one stop: an empty accumulation
        return [ph for oc, ic in zip(o, i, strict=True) for ph in spacc1_phases(oc, ic, depth - 1)] or [(1, 1)]
    n = sum(len(f) for f in i)
    e = len({c for f in i for c in f})
    return [(n + len(o) + 1, e + 1)]


def overlap_saving(phases: list[tuple[int, int]]) -> int:
    """Cycles buffers=2 saves over buffers=1 (accumulate, then flush): fiber k's end is handed
    over once its accumulation is done and fiber k-1's flush emits its stop, so the fibers
    start ``max(A_k, F_(k-1))`` apart instead of ``A_(k-1) + F_(k-1)`` (same start, same end)."""
    single = sum(a + f for a, f in phases)
    double = phases[0][0] + sum(max(a, f_prev) for (a, _), (_, f_prev) in zip(phases[1:], phases)) + phases[-1][1]
    return single - double


@pytest.mark.parametrize("depth", [2, 3])
def test_spacc1_double_overlaps_flush_with_accumulation(depth):
    rng = random.Random(depth)
    for _ in range(10):
        o, i, v = spacc1_tree(rng, depth, rng.randint(8, 20), 12, -100, 100)
        inputs = spacc1_inputs(o, i, v, depth)
        phases = spacc1_phases(o, i, depth)
        c1 = simulate_primitive("spacc1", inputs, dim=12).cycles
        c2 = simulate_primitive("spacc1", inputs, dim=12, buffers=2).cycles
        # one bank: the phases add up (plus the D and its transfer)
        assert sum(a + f for a, f in phases) < c1 <= sum(a + f for a, f in phases) + 3
        assert c1 - c2 == overlap_saving(phases) > 0


def test_spacc1_double_64_fibers_is_bounded_by_the_longer_phase():
    """64 equal fibers (2 outer coordinates, 6 inner coordinates each): per fiber the single
    bank takes accumulate + flush, two banks max(accumulate, flush) = accumulate."""
    rng = random.Random(64)
    o = [[0, 1] for _ in range(64)]
    i = [[sorted(rng.sample(range(16), 6)) for _ in f] for f in o]
    v = [[[rng.randint(-9, 9) for _ in c] for c in f] for f in i]
    inputs = spacc1_inputs(o, i, v, 2)
    phases = spacc1_phases(o, i, 2)
    c1 = simulate_primitive("spacc1", inputs, dim=16).cycles
    c2 = simulate_primitive("spacc1", inputs, dim=16, buffers=2).cycles
    a_total = sum(a for a, _ in phases)
    assert a_total < c2 <= a_total + phases[-1][1] + 3  # the last flush and D are not hidden
    assert c1 - c2 == sum(f for _, f in phases[:-1])  # every flush but the last is hidden
    assert c2 < 0.7 * c1


def test_spacc1_double_waits_for_a_long_flush():
    """Empty fibers after a large one: each end waits for the flush before it (the handover
    happens in the cycle that emits the previous stop), so the empty fibers' stops follow at
    one per cycle; nothing is lost or reordered."""
    o = [[0], [], [], [], [0], []]
    i = [[list(range(12))], [], [], [], [[3]], []]
    v = [[list(range(1, 13))], [], [], [], [[7]], []]
    inputs = spacc1_inputs(o, i, v, 2)
    res = simulate_primitive("spacc1", inputs, dim=12, buffers=2)
    assert format_stream(res["crd"]) == ",".join(map(str, range(12))) + ",S0,S0,S0,S0,3,S0,S1,D"
    phases = spacc1_phases(o, i, 2)
    assert phases[0][1] > phases[1][0]  # the second fiber's end is ready before the first flush ends
    c1 = simulate_primitive("spacc1", inputs, dim=12).cycles
    assert c1 - res.cycles == overlap_saving(phases)


def spacc2_phases(rows) -> list[tuple[int, int]]:
    """spacc2's (accumulate, flush) cycles per outer fiber (rows of (k, {i: {j: v}}), no empty
    j fiber): one per value, one per i (its closing stop) or per empty k, one for the end; the
    flush one per entry, one per i group boundary, one for the stops."""
    out = []
    for r in rows:
        a = sum(sum(len(js) for js in d.values()) + max(len(d), 1) for _, d in r) + 1
        entries = {(i, j) for _, d in r for i, js in d.items() for j in js}
        groups = len({i for i, _ in entries})
        out.append((a, len(entries) + max(groups - 1, 0) + 1))
    return out


def spacc2_many_fibers(rng: random.Random, n: int) -> tuple[list, dict]:
    """``n`` outer fibers of rows ``[(k, {i: {j: v}})]`` (no empty j fiber) and their streams."""
    rows = []
    for _ in range(n):
        ks = sorted(rng.sample(range(5), rng.randint(0, 3)))
        rows.append([(k, {i: {j: rng.randint(-9, 9) for j in sorted(rng.sample(range(6), rng.randint(1, 3)))}
                          for i in sorted(rng.sample(range(4), rng.randint(0, 3)))}) for k in ks])
    return rows, {
        "outer": fiber_stream([[k for k, _ in r] for r in rows], 2),
        "inner0": fiber_stream([[sorted(d) for _, d in r] for r in rows], 3),
        "inner1": fiber_stream([[[sorted(d[i]) for i in sorted(d)] for _, d in r] for r in rows], 4),
        "val": fiber_stream([[[[d[i][j] for j in sorted(d[i])] for i in sorted(d)] for _, d in r] for r in rows], 4),
    }


def test_spacc2_double_against_dict_sums_and_overlap():
    for inputs, expected in spacc2_vectors(random.Random(1), 200):
        res = simulate_primitive("spacc2", inputs, dim0=4, dim1=6, buffers=2)
        assert {p: res[p] for p in expected} == expected, {p: format_stream(v) for p, v in inputs.items()}
    rng = random.Random(2)
    for _ in range(10):
        rows, inputs = spacc2_many_fibers(rng, rng.randint(8, 16))
        phases = spacc2_phases(rows)
        one = simulate_primitive("spacc2", inputs, dim0=4, dim1=6)
        two = simulate_primitive("spacc2", inputs, dim0=4, dim1=6, buffers=2)
        assert {p: two[p] for p in ("crd0", "crd1", "val")} == {p: one[p] for p in ("crd0", "crd1", "val")}
        assert sum(a + f for a, f in phases) < one.cycles <= sum(a + f for a, f in phases) + 3
        assert one.cycles - two.cycles == overlap_saving(phases) > 0


def test_spacc_buffers_must_be_1_or_2():
    with pytest.raises(ValueError, match="node 'spacc1': buffers=3 must be 1 or 2"):
        simulate_primitive("spacc1", {"outer": "S0,D", "inner": "S1,D", "val": "S1,D"}, dim=4, buffers=3)
    g = Graph("g")
    with pytest.raises(GraphError, match=r"node 'acc' \(spacc2\): buffers=0 must be 1 or 2"):
        g.add(NodeKind.SPACC2, "acc", dim0=2, dim1=2, buffers=0)
    # the default is not written to the graph JSON (existing graphs keep their hashes)
    assert g.add(NodeKind.SPACC1, "a1", dim=4).params == {"dim": 4}
    assert g.add(NodeKind.SPACC1, "a2", dim=4, buffers=2).params == {"dim": 4, "buffers": 2}


def with_spacc_buffers(g: Graph, buffers: int) -> Graph:
    """``g`` with every sparse accumulator at ``buffers`` banks (through the graph JSON)."""
    d = g.to_json()
    for node in d["nodes"]:
        if node["kind"] in ("spacc1", "spacc2"):
            node["params"]["buffers"] = buffers
    return Graph.from_json(d)


def test_spmm_with_double_buffered_spacc_matches_numpy_in_fewer_cycles():
    g, data, _, expected = example("spmm_csr", 32, seed=3, density=0.2)
    one = run_graph(g, data)
    two = run_graph(with_spacc_buffers(g, 2), data)
    np.testing.assert_array_equal(two.outputs["C"].to_dense(), expected)
    np.testing.assert_array_equal(two.outputs["C"].vals, one.outputs["C"].vals)
    assert two.cycles < one.cycles


def nonempty_reduce_tree(rng: random.Random, depth: int) -> list:
    """A fiber tree of nesting ``depth`` (>= 3) whose innermost fibers are never empty and whose
    outer fibers sometimes are: what a ``nonempty`` reduce sees under sparse outer rows."""
    if depth == 1:
        return [rng.randint(-50, 50) for _ in range(rng.randint(1, 4))]
    return [nonempty_reduce_tree(rng, depth - 1) for _ in range(rng.choice([0, 0, 1, 2, 3]))]


def _sums(tree: list, depth: int) -> list:
    """``tree`` with each innermost fiber replaced by its sum (one level less)."""
    return [sum(f) for f in tree] if depth == 2 else [_sums(t, depth - 1) for t in tree]


@pytest.mark.parametrize("depth", [3, 4])
def test_reduce_nonempty_gives_no_value_for_an_empty_outer_fiber(depth):
    """A bare stop (an empty outer fiber) gives the next stop and no value with ``nonempty``;
    the output is the stream of the per-fiber sums, one level up, computed from the tree.  A
    plain reduce adds a spurious 0 there."""
    rng = random.Random(depth)
    for _ in range(20):
        tree = nonempty_reduce_tree(rng, depth)
        val = fiber_stream(tree, depth)
        out = simulate_primitive("reduce", {"val": val}, op="add", nonempty=True)["val"]
        assert out == fiber_stream(_sums(tree, depth), depth - 1), format_stream(val)
    tree = [[[1, 2]], [], [[3]]]
    plain = simulate_primitive("reduce", {"val": fiber_stream(tree, 3)}, op="add")["val"]
    assert plain != fiber_stream(_sums(tree, 3), 2)
