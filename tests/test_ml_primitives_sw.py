"""sw_sim: ML primitives (unary ALU, div, fixed-point ALU / reduce / spacc, value repeat,
coordinate mask, stop-token drop) and the composite lowerings, against independent references
(math / numpy / fibertrees)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from vectors import fiber_stream

from fuseflow.kernels import GraphBuilder
from fuseflow.lowering import bias_add, bias_lookup, row_layernorm, row_softmax
from fuseflow.numerics import DEFAULT_FIXED, FLOAT, Numerics
from fuseflow.samml import Graph, GraphError, NodeKind, Role, StreamKind
from fuseflow.tensor import CSR, DENSE2, TensorData, TensorFormat
from fuseflow.tokens import DONE, EMPTY, Stop, format_stream, parse_stream, stop
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
def _csr_graph(name: str, n: int, m: int, fmt: TensorFormat, body) -> Graph:
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
    return _csr_graph("row_softmax", n, m, CSR, lambda b, x: row_softmax(b, x, m))


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
    g = _csr_graph("tight", 2, 12, CSR, lambda b, x: row_softmax(b, x, 1))
    a = np.ones((2, 12))
    with pytest.raises(DeadlockError, match="deadlock"):
        run_graph(g, {"A": TensorData.from_dense(Q.quantize(a), CSR)}, numerics=Q)


def layernorm_graph(n: int, d: int) -> Graph:
    return _csr_graph("row_layernorm", n, d, DENSE2, lambda b, v: row_layernorm(b, v, d))


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
    g = _csr_graph("attn_ops", 4, 8, CSR, lambda b, x: row_softmax(b, x, 8))
    m = g.add(NodeKind.CRD_MASK, "mask", pred="block", block=2, pattern=[[1, 0], [1, 1]])
    s = g.add(NodeKind.ALU, "scale", op="mul_scalar", scalar=0.125)
    g2 = Graph.from_json(g.to_json())
    assert g2.nodes["mask"].params == {"pred": m.params["pred"], "block": 2, "pattern": ((1, 0), (1, 1))}
    assert g2.nodes["scale"].params["scalar"] == s.params["scalar"]
    assert g2.nodes["scale"].inputs() == {"a": g.nodes["scale"].inputs()["a"]}
    assert g2.structure_hash() == g.structure_hash()
    with pytest.raises(Exception, match="input port mask.outer is not driven"):
        g2.verify()
