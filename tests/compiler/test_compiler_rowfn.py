"""Row functions (softmax, layernorm) fused into the graphs of the Program API: values against
numpy formulas written out here (not the compiler's reference), one graph per fusion region
where factored iteration allows it, masked softmax over a sparse mask, the FIFO sizing that
keeps a consumer of a row function from deadlocking, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from fuseflow.compiler import (
    Fusion,
    Program,
    ProgramError,
    compile_program,
    einsum,
    gelu,
    layernorm,
    reference,
    run_program,
    softmax,
)
from fuseflow.ir.numerics import Numerics
from fuseflow.ir.samml import AluOp, NodeKind, ReduceOp
from sw_sim import run_graph

FUSIONS = [Fusion.UNFUSED, Fusion.PARTIAL, Fusion.FULL]


def np_softmax(x: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Softmax along the last axis over ``keep`` (True: the entry takes part), 0 elsewhere."""
    keep = np.ones(x.shape, bool) if keep is None else keep
    z = np.where(keep, x, -np.inf)
    top = np.max(z, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.where(keep, np.exp(z - top), 0.0)
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def np_layernorm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)


def run_float(p: Program, data: dict, fusion: Fusion):
    cp = compile_program(p, fusion)
    return cp, run_program(cp, data, simulate=run_graph, numerics="float")


def attention(n: int = 12, d: int = 4, e: int = 5, heads: int = 2) -> Program:
    p = Program("attention")
    M = p.tensor("M", (n, n), "csr")
    Q = p.tensor("Q", (heads, n, d), "dense")
    K = p.tensor("K", (heads, n, d), "dense")
    V = p.tensor("V", (heads, n, e), "dense")
    S = p.let("S", einsum("ij,hid,hjd->hij", M, Q, K) * 0.5)
    P = p.let("P", softmax(S))
    O = p.let("O", einsum("hij,hje->hie", P, V))
    p.region(S, P, O)
    p.output(O)
    return p


def attention_data(rng, n=12, d=4, e=5, heads=2, density=0.5, empty_row: int | None = 3):
    m = (rng.random((n, n)) < density).astype(float)
    if empty_row is not None:
        m[empty_row] = 0.0
    return {"M": m, "Q": rng.normal(size=(heads, n, d)), "K": rng.normal(size=(heads, n, d)),
            "V": rng.normal(size=(heads, n, e))}


def attention_expected(data) -> np.ndarray:
    keep = np.broadcast_to(data["M"] != 0, (data["Q"].shape[0], *data["M"].shape))
    s = 0.5 * np.einsum("hid,hjd->hij", data["Q"], data["K"])
    return np.einsum("hij,hje->hie", np_softmax(s, keep), data["V"])


@pytest.mark.parametrize("fusion", FUSIONS, ids=lambda f: f.value)
def test_softmax_of_a_dense_matrix(fusion) -> None:
    p = Program("sm")
    X = p.tensor("X", (5, 7), "dense")
    p.output(p.let("P", softmax(X)))
    x = np.random.default_rng(1).normal(size=(5, 7)) * 3
    _, res = run_float(p, {"X": x}, fusion)
    np.testing.assert_allclose(res.dense("P"), np_softmax(x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("density", [0.3, 0.7, 1.0])
@pytest.mark.parametrize("fusion", FUSIONS, ids=lambda f: f.value)
def test_masked_attention_is_one_graph_when_fused(fusion, density) -> None:
    """S = M ∘ (Q·Kᵀ)/2, P = softmax(S) over the mask's entries, O = P·V: one graph under
    partial and full fusion (three pipelines), numpy's masked softmax, an empty mask row
    gives an empty row of P and a zero row of O.  A full mask exercises the deepest FIFOs."""
    rng = np.random.default_rng(7)
    data = attention_data(rng, density=density)
    cp, res = run_float(attention(), data, fusion)
    assert len(cp.graphs) == (3 if fusion is Fusion.UNFUSED else 1)
    np.testing.assert_allclose(res.dense("O"), attention_expected(data), rtol=1e-12, atol=1e-12)
    ops = {n.param("op") for g in cp.graphs for n in g.nodes.values() if n.kind is NodeKind.REDUCE}
    assert ops == {ReduceOp.MAX, ReduceOp.ADD}  # max-subtract and sum of one softmax


def test_masked_attention_fused_beats_unfused() -> None:
    rng = np.random.default_rng(3)
    data = attention_data(rng, n=16, density=0.6, empty_row=None)
    _, fused = run_float(attention(n=16), data, Fusion.FULL)
    _, unfused = run_float(attention(n=16), data, Fusion.UNFUSED)
    assert fused.total_cycles < unfused.total_cycles


def test_softmax_reads_only_visited_coordinates_of_a_sparse_operand() -> None:
    """softmax of a CSR tensor normalises over its stored entries (a masked softmax); the
    result keeps exactly those entries."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=(6, 9))
    a[rng.random(a.shape) < 0.5] = 0.0
    p = Program("sp")
    A = p.tensor("A", (6, 9), "csr")
    p.output(p.let("P", softmax(A)))
    _, res = run_float(p, {"A": a}, Fusion.FULL)
    np.testing.assert_allclose(res.dense("P"), np_softmax(a, a != 0), rtol=1e-12, atol=1e-15)
    assert res.outputs["P"].nnz == np.count_nonzero(a)


@pytest.mark.parametrize("fusion", FUSIONS, ids=lambda f: f.value)
def test_layernorm_with_affine_then_linear(fusion) -> None:
    """Y = (layernorm(X)·g + b)·Wᵀ, W stored column-major (a linear layer): one graph when
    fused (the layernorm's pipeline leads the product's order)."""
    rng = np.random.default_rng(2)
    n, d, f = 6, 8, 5
    p = Program("ln_linear")
    X = p.tensor("X", (n, d), "dense")
    g = p.tensor("g", (d,), "dense")
    b = p.tensor("b", (d,), "dense")
    W = p.tensor("W", (f, d), "dense", mode_order=(1, 0))
    L = p.let("L", layernorm(X, 1e-3) * g + b)
    Y = p.let("Y", einsum("ik,jk->ij", L, W))
    p.region(L, Y)
    p.output(Y)
    data = {"X": rng.normal(size=(n, d)), "g": rng.normal(size=d), "b": rng.normal(size=d),
            "W": rng.normal(size=(f, d))}
    cp, res = run_float(p, data, fusion)
    want = (np_layernorm(data["X"], 1e-3) * data["g"] + data["b"]) @ data["W"].T
    np.testing.assert_allclose(res.dense("Y"), want, rtol=1e-10, atol=1e-12)
    assert len(cp.graphs) == (2 if fusion is Fusion.UNFUSED else 1)


def test_transformer_ffn_with_residual_is_one_graph() -> None:
    """T = X + C·Woᵀ; O = T + gelu(layernorm(T)·W1ᵀ)·W2ᵀ: T is read twice (the residual and
    the layernorm chain), so it gets two pipelines; one graph, numpy's values."""
    rng = np.random.default_rng(4)
    n, d, f = 8, 8, 16
    p = Program("ffn")
    X = p.tensor("X", (n, d), "dense")
    C = p.tensor("C", (n, d), "dense")
    Wo = p.tensor("Wo", (d, d), "dense", mode_order=(1, 0))
    W1 = p.tensor("W1", (f, d), "dense", mode_order=(1, 0))
    W2 = p.tensor("W2", (d, f), "dense", mode_order=(1, 0))
    T = p.let("T", X + einsum("ak,jk->aj", C, Wo))
    H = p.let("H", gelu(einsum("ak,jk->aj", layernorm(T), W1)))
    O = p.let("O", T + einsum("ak,jk->aj", H, W2))
    p.region(T, H, O)
    p.output(O)
    data = {k: rng.normal(size=p.decls[k].shape) for k in p.inputs()}
    cp, res = run_float(p, data, Fusion.FULL)
    assert len(cp.graphs) == 1
    t = data["X"] + data["C"] @ data["Wo"].T
    h = np_layernorm(t) @ data["W1"].T
    h = 0.5 * h * (1 + np.vectorize(__import__("math").erf)(h / np.sqrt(2)))
    np.testing.assert_allclose(res.dense("O"), t + h @ data["W2"].T, rtol=1e-10, atol=1e-12)
    assert "T~2" in cp.groups[0].lowering()  # the second pipeline of T


def test_row_functions_in_q16_16_within_the_table_error() -> None:
    num = Numerics.parse("q16.16")
    rng = np.random.default_rng(9)
    data = attention_data(rng, density=0.6)
    p = attention()
    cp = compile_program(p, Fusion.FULL)
    q = {k: num.quantize(v) for k, v in data.items()}
    res = run_program(cp, q, simulate=run_graph, numerics=num)
    got = np.asarray(num.dequantize(res.dense("O")), dtype=float)
    assert np.max(np.abs(got - attention_expected(data))) < 2e-3


def test_the_compilers_reference_agrees() -> None:
    rng = np.random.default_rng(11)
    data = attention_data(rng)
    np.testing.assert_allclose(reference(attention(), data, dtype=np.float64)["O"],
                               attention_expected(data), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fmt", ["csr", "dcsr", "coo"])
@pytest.mark.parametrize("fusion", FUSIONS)
def test_layernorm_of_a_sparse_operand_counts_its_implicit_zeros(fmt: str, fusion: Fusion) -> None:
    """A sparse tensor means the dense tensor it stores: layernorm's mean and variance run over
    every coordinate of the fibre, and its output at an implicit zero is ``-mean / std``
    (densified iteration along the row), not 0 — as numpy on the dense array."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=(5, 6))
    a[rng.random(a.shape) < 0.5] = 0.0
    a[2] = 0.0  # an empty row (a missing fibre under DCSR)
    p = Program("ln_sparse")
    A = p.tensor("A", a.shape, fmt)
    p.output(p.let("L", layernorm(A, 1e-5) * 2.0))
    res = run_program(compile_program(p, fusion), {"A": a}, simulate=run_graph, numerics="float")
    mean = a.mean(-1, keepdims=True)
    want = (a - mean) / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * 2.0
    np.testing.assert_allclose(res.dense("L"), want, rtol=1e-12, atol=1e-12)


def test_row_function_errors() -> None:
    p = Program("bad")
    x = p.tensor("x", (4,), "dense")
    s = einsum("i->", x)
    with pytest.raises(ProgramError, match="a scalar has no fibre"):
        softmax(s)
    with pytest.raises(ProgramError, match="eps must be positive"):
        layernorm(x, 0.0)


def test_explain_shows_the_row_function() -> None:
    text = compile_program(attention(), Fusion.FULL).explain()
    assert "softmax_" in text
    assert "own pipelines for" in text


def test_row_function_nodes_use_the_shared_lowering() -> None:
    cp = compile_program(attention(), Fusion.FULL)
    ops = [n.param("op") for n in cp.graphs[0].nodes.values() if n.kind is NodeKind.ALU]
    assert AluOp.EXP in ops and AluOp.DIV in ops and AluOp.SUB in ops


@pytest.mark.parametrize("fn", [softmax, layernorm])
def test_a_row_function_keeps_its_row_length_beside_an_output_with_another(fn) -> None:
    """Found by the numerics checker: in one fused region, ``L = 1.5·layernorm(A·X)`` (rows of
    12) beside ``P = 2·A`` (rows of 8) share the index name ``j``; the row function's own table
    took its row length from the other output (layernorm: mean and variance over 8 entries, off
    by about 1; softmax: bypass FIFOs of one 8-entry row, too short for its rows of 12)."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(6, 8)) * (rng.random((6, 8)) < 0.5)
    x = rng.normal(size=(8, 12))
    p = Program("two_rows")
    A = p.tensor("A", a.shape, "csr")
    X = p.tensor("X", x.shape, "dense")
    S = p.let("S", einsum("ik,kj->ij", A, X))
    p.output(p.let("L", fn(S) * 1.5))
    p.output(p.let("P", A * 2.0))
    res = run_program(compile_program(p, Fusion.FULL), {"A": a, "X": x}, simulate=run_graph, numerics="float")
    s = a @ x
    if fn is softmax:
        want = np_softmax(s) * 1.5
    else:
        want = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5) * 1.5
    np.testing.assert_allclose(res.dense("L"), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.dense("P"), 2 * a, rtol=0, atol=0)
