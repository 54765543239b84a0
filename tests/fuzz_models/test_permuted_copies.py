"""Ordering cycles broken by permuted copies (program-fuzzer refusals 'the ordering constraints
form a cycle', ~60 % of the program refusals of the first large pass): a stored operand whose
mode order conflicts with the others (an elementwise op of a CSR and a CSC matrix, a CSC mask
under a row softmax, ...) is read from a permuted copy made on the host, as a tensor used
through several views already was.  Each is compared with numpy on the dense arrays (the
documented semantics: softmax over the visited coordinates)."""

from __future__ import annotations

import numpy as np
import pytest

from fuseflow.compiler import FusionError, Program, compile_program, einsum, run_program
from fuseflow.compiler import softmax as fc_softmax
from sw_sim import run_graph

FUSIONS = ("unfused", "partial", "full")


def _run(p: Program, data: dict, **options):
    compiled = compile_program(p, **options)
    return compiled, run_program(compiled, data, simulate=run_graph, numerics="float")


def _sparse(rng, shape, density):
    a = rng.standard_normal(shape)
    a[rng.random(shape) >= density] = 0.0
    return a


def _softmax_visited(x: np.ndarray, vis: np.ndarray) -> np.ndarray:
    z = np.where(vis, x, -np.inf)
    m = np.max(z, -1, keepdims=True)
    e = np.where(vis, np.exp(z - np.where(np.isfinite(m), m, 0.0)), 0.0)
    s = e.sum(-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("op", ["mul", "add", "sub"])
def test_elementwise_op_of_a_csr_and_a_csc_matrix(op: str, fusion: str) -> None:
    rng = np.random.default_rng(3)
    a, b = _sparse(rng, (3, 4), 0.6), _sparse(rng, (3, 4), 0.6)
    p = Program("csr_csc")
    A, B = p.tensor("A", (3, 4), "csr"), p.tensor("B", (3, 4), "csc")
    expr = {"mul": lambda: einsum("ij,ij->ij", A, B), "add": lambda: A + B, "sub": lambda: A - B}[op]()
    p.output(p.let("T", expr))
    compiled, res = _run(p, {"A": a, "B": b}, fusion=fusion)
    want = {"mul": a * b, "add": a + b, "sub": a - b}[op]
    np.testing.assert_allclose(res.dense("T"), want, atol=1e-12)
    assert [c.source for c in compiled.permuted] == ["B"]
    assert "permuted copy: B_p01 = B" in compiled.explain()


@pytest.mark.parametrize("fusion", FUSIONS)
def test_softmax_of_a_csc_times_csr_product_reduced_over_rows(fusion: str) -> None:
    """Program fuzzer seed 211 (full fusion refused): T2_j = Σ_i softmax_j(A ⊙ B)_ij C_i with A
    CSC and B CSR; the copy must be of A (row-major), the one whose permutation leaves no cycle."""
    rng = np.random.default_rng(211)
    a, b, c = _sparse(rng, (3, 2), 0.8), _sparse(rng, (3, 2), 0.8), _sparse(rng, (3,), 0.7)
    p = Program("sm_csc_csr")
    t0 = p.let("T0", einsum("ij,ij->ij", p.tensor("A", (3, 2), "csc"), p.tensor("B", (3, 2), "csr")))
    t1 = p.let("T1", fc_softmax(t0))
    p.output(p.let("T2", einsum("ij,i->j", t1, p.tensor("C", (3,), "compressed"))))
    _, res = _run(p, {"A": a, "B": b, "C": c}, fusion=fusion)
    want = _softmax_visited(a * b, (a != 0) & (b != 0)).T @ c
    np.testing.assert_allclose(res.dense("T2"), want, atol=1e-12)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_permuted_copy_keeps_explicit_zeros_a_softmax_visits(fusion: str) -> None:
    """Program fuzzer seed 195: S = M ⊙ (Q·Kᵀ) with M a CSC mask and K zero, then softmax(S).
    Unfused, S is written column-major with explicit zeros at M's entries and read row-major
    from a permuted copy; the copy kept only the nonzeros (scipy drops explicit zeros), so the
    softmax saw no visited coordinate (0 where 1 / |row of M| is right)."""
    rng = np.random.default_rng(195)
    m = (rng.random((4, 3)) < 0.5).astype(float)
    m[0, :2] = 1.0
    q, k = rng.standard_normal((4, 2)), np.zeros((3, 2))
    p = Program("masked_zero_scores")
    s = p.let("S", einsum("ij,ik,jk->ij", p.tensor("M", (4, 3), "csc"), p.tensor("Q", (4, 2), "dense"),
                          p.tensor("K", (3, 2), "dense")))
    p.output(p.let("P", fc_softmax(s)))
    _, res = _run(p, {"M": m, "Q": q, "K": k}, fusion=fusion)
    want = _softmax_visited(m * (q @ k.T), m != 0)
    assert want[0, 0] == pytest.approx(1.0 / m[0].sum())
    np.testing.assert_allclose(res.dense("P"), want, atol=1e-12)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_a_coo_operand_is_not_permuted(fusion: str) -> None:
    """Program fuzzer seed 501: a COO view's duplicate-summing index is ordered by its stored
    mode order, so a permuted COO copy built a graph with unsorted coordinates (GraphError) or
    summed the wrong duplicates (seed 841, off by 0.26); COO views are never permuted (the other
    operand is, or the cycle is a clear error)."""
    rng = np.random.default_rng(501)
    a, d = _sparse(rng, (3, 3), 0.6), _sparse(rng, (3, 3), 0.6)
    p = Program("coo_sub")
    t0 = p.let("T0", einsum("ij->ij", p.tensor("A", (3, 3), "csc")))
    p.output(p.let("T1", t0 - p.tensor("D", (3, 3), "coo")))
    compiled, res = _run(p, {"A": a, "D": d}, fusion=fusion)
    np.testing.assert_allclose(res.dense("T1"), a - d, atol=1e-12)
    # D meets the computed T0 at its non-unique index: read from a DCSR copy in its own mode order
    assert all(c.source != "D" or c.fmt.mode_order == (0, 1) for c in compiled.permuted)


def test_a_cycle_through_a_user_dataflow_order_stays_an_error() -> None:
    """A dataflow order the user wrote is not overridden by a permuted copy of a tensor read once."""
    p = Program("bad")
    t = p.let("T", einsum("ik,kj->ij", p.tensor("A", (3, 4), "csr"), p.tensor("X", (4, 5), "dense")),
              order="kij")
    p.output(t)
    with pytest.raises(FusionError, match="the ordering constraints form a cycle"):
        compile_program(p)
