"""Program-level refusals of the second fuzz pass that were missing capabilities, each compared
with numpy on the dense arrays."""

from __future__ import annotations

import numpy as np
import pytest

from fuseflow.compiler import Program, compile_program, einsum, relu, run_program
from fuseflow.ir.tensor import COO, TensorData
from sw_sim import run_graph

FUSIONS = ("unfused", "partial", "full")


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("block", [{"i": 2}, {"k": 2}, {"i": 4}])
def test_a_coo_operand_can_be_blocked(block: dict, fusion: str) -> None:
    """Program fuzzer: 'tensor A: a COO tensor cannot be blocked' (about 2 % of the programs,
    in the random schedule).  A blocked tensor is stored anew in blocks, so a COO one gets a
    block grid with compressed levels (its duplicates summed, as a COO tensor means)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 4))
    a[rng.random((4, 4)) < 0.5] = 0.0
    a[1, 2] = 1.3
    b, c = rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    p = Program("coo_blocked")
    t = p.let("T", einsum("ik,kj->ij", p.tensor("A", (4, 4), "coo"), p.tensor("B", (4, 2), "dense")))
    p.output(p.let("U", relu(t) + p.tensor("C", (4, 2), "dense")))
    compiled = compile_program(p, fusion=fusion, block=block)
    # the entry (1, 2) given twice, as 0.25 + the rest: a COO tensor's duplicates are summed
    coords = np.argwhere(a != 0)
    vals = a[a != 0].copy()
    k = int(np.flatnonzero((coords == [1, 2]).all(1))[0])
    coords = np.vstack([coords, [1, 2]])
    vals = np.append(vals, 0.25)
    vals[k] -= 0.25
    order = np.lexsort((coords[:, 1], coords[:, 0]))
    coo = TensorData((4, 4), COO, [np.array([0, len(order)]), None],
                     [coords[order, 0], coords[order, 1]], vals[order])
    res = run_program(compiled, {"A": coo, "B": b, "C": c}, simulate=run_graph, numerics="float")
    np.testing.assert_allclose(res.dense("U"), np.maximum(a @ b, 0.0) + c, atol=1e-12)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_coo_operand_of_an_spmm_with_a_csr_matrix(fusion: str) -> None:
    """Program fuzzer seed 83 (refused in every fusion: 'level 0 of COO tensor B ... an
    intersection at u0 merges it with A_{i,u0} (its compressed level 1)'): B is read from a DCSR
    copy, its duplicates summed."""
    from fuseflow.compiler import rsqrt

    rng = np.random.default_rng(83)
    a = rng.standard_normal((4, 3))
    a[rng.random((4, 3)) < 0.5] = 0.0
    b = rng.standard_normal((3, 4))
    b[rng.random((3, 4)) < 0.6] = 0.0
    b[2, 1] = 0.8
    p = Program("coo_spmm_csr")
    t0 = p.let("T0", einsum("ik,kj->ij", p.tensor("A", (4, 3), "csr"), p.tensor("B", (3, 4), "coo")))
    p.output(p.let("T1", rsqrt(t0 * t0 + 1.0)))
    compiled = compile_program(p, fusion=fusion)
    assert [c.name for c in compiled.permuted] == ["B_dcsr"]
    coords = np.vstack([np.argwhere(b != 0), [[2, 1]]])  # (2, 1) twice: 0.8 = 0.5 + 0.3
    vals = np.append(b[b != 0], 0.3)
    vals[int(np.flatnonzero((coords[:-1] == [2, 1]).all(1))[0])] -= 0.3
    order = np.lexsort((coords[:, 1], coords[:, 0]))
    coo = TensorData((3, 4), COO, [np.array([0, len(order)]), None], [coords[order, 0], coords[order, 1]],
                     vals[order])
    res = run_program(compiled, {"A": a, "B": coo}, simulate=run_graph, numerics="float")
    np.testing.assert_allclose(res.dense("T1"), 1.0 / np.sqrt((a @ b) ** 2 + 1.0), atol=1e-12)


# -------------------------------------------------- a CSC operand under a softmax, in a densified group
def _masked_softmax(x: np.ndarray, vis: np.ndarray) -> np.ndarray:
    """numpy: softmax along the last axis over the visited coordinates ``vis`` (0 elsewhere)."""
    z = np.where(vis, x, -np.inf)
    mx = np.max(z, axis=-1, keepdims=True)
    e = np.where(vis, np.exp(z - np.where(np.isfinite(mx), mx, 0.0)), 0.0)
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_softmax_of_an_empty_csc_masked_product_then_sigmoid(fusion: str) -> None:
    """Program fuzzer seed 11431 (fusion=full: T2 got 0.731, want 0.5): ``sigmoid`` after the
    softmax put an iteration tensor in the group, so the CSC mask A, read row-major for the
    softmax, came from a permuted copy kept dense (the fix of module seed 2368): the softmax of a
    row with nothing stored visited every j (1 over one column, not 0).  A view whose visited
    coordinates a softmax reads is now copied with its own (compressed) levels."""
    from fuseflow.compiler import sigmoid, softmax

    rng = np.random.default_rng(11431)
    a = np.zeros((3, 1))
    a[2, 0] = 1.0  # one stored mask entry; rows 0 and 1 have none
    b, c = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    p = Program("csc_mask_softmax_sigmoid")
    t0 = p.let("T0", einsum("ij,ik,jk->ij", p.tensor("A", (3, 1), "csc"), p.tensor("B", (3, 4), "dense"),
                            p.tensor("C", (1, 4), "dense")))
    t1 = p.let("T1", softmax(t0))
    p.output(p.let("T2", sigmoid(t1)))
    compiled = compile_program(p, fusion=fusion)
    res = run_program(compiled, {"A": a, "B": b, "C": c}, simulate=run_graph, numerics="float")
    want = 1.0 / (1.0 + np.exp(-_masked_softmax(a * (b @ c.T), a != 0)))
    np.testing.assert_allclose(res.dense("T2"), want, atol=1e-12)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_softmax_of_a_csc_plus_dcsr_sum_then_shift(fusion: str) -> None:
    """Program fuzzer seed 11635 (fusion=partial and full: T3 got 4.187, want 5.0): the shift
    after ``softmax(A + B)`` made A's row-major permuted copy dense, so the softmax of a row
    where only B stores an entry ran over all three columns (0.187, not 1)."""
    from fuseflow.compiler import softmax

    rng = np.random.default_rng(11635)
    a = np.zeros((4, 3))
    a[0] = rng.standard_normal(3)  # A (CSC) stores row 0 only
    b = rng.standard_normal((4, 3))
    b[rng.random((4, 3)) < 0.4] = 0.0
    b[1] = [0.0, -0.7758, 0.0]  # row 1: one entry, from B
    p = Program("csc_plus_dcsr_softmax_shift")
    t0 = p.let("T0", p.tensor("A", (4, 3), "csc") + p.tensor("B", (4, 3), "dcsr"))
    t1 = p.let("T1", softmax(t0))
    t2 = p.let("T2", t1 + 2.0)
    t3 = p.let("T3", t2 + 2.0)
    p.region(t0, t1, t2, t3)  # one fusion region, as the fuzzer declares it
    p.output(t3)
    compiled = compile_program(p, fusion=fusion)
    res = run_program(compiled, {"A": a, "B": b}, simulate=run_graph, numerics="float")
    want = _masked_softmax(a + b, (a != 0) | (b != 0)) + 4.0
    np.testing.assert_allclose(res.dense("T3"), want, atol=1e-12)
    assert res.dense("T3")[1, 1] == pytest.approx(5.0)


@pytest.mark.parametrize("sched", [{"fusion": "unfused"}, {"fusion": "partial"}, {"fusion": "full"},
                                   {"fusion": "partial", "par": {"i": 2}}])
def test_softmax_of_a_dense_times_csc_product_then_layernorm(sched: dict) -> None:
    """Program fuzzer seed 12171 (fusion=partial / full, and par i=2: T1 got 0.249, want 1.0):
    the layernorm after ``softmax(A ⊙ B)`` (B CSC) made B's row-major permuted copy dense, so the
    softmax visited the whole row where B stores one entry; both T1 and T2 are outputs."""
    from fuseflow.compiler import layernorm, softmax

    rng = np.random.default_rng(12171)
    a = rng.standard_normal((3, 4))
    a[rng.random((3, 4)) < 0.5] = 0.0
    a[1, 1] = -0.0206
    b = rng.standard_normal((3, 4))
    b[rng.random((3, 4)) < 0.6] = 0.0
    b[1] = [0.0, 0.1628, 0.0, 0.0]  # row 1: one stored entry
    p = Program("dense_times_csc_softmax_layernorm")
    t0 = p.let("T0", einsum("ij,ij->ij", p.tensor("A", (3, 4), "dense"), p.tensor("B", (3, 4), "csc")))
    t1 = p.let("T1", softmax(t0))
    t2 = p.let("T2", layernorm(t1, 1e-5))
    p.region(t0, t1, t2)  # one fusion region, as the fuzzer declares it
    p.output(t1, t2)
    compiled = compile_program(p, **sched)
    res = run_program(compiled, {"A": a, "B": b}, simulate=run_graph, numerics="float")
    s = _masked_softmax(a * b, b != 0)
    mu = s.mean(axis=-1, keepdims=True)
    ln = (s - mu) / np.sqrt(((s - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(res.dense("T1"), s, atol=1e-12)
    np.testing.assert_allclose(res.dense("T2"), ln, atol=1e-9)
    assert res.dense("T1")[1, 1] == pytest.approx(1.0)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_softmax_of_a_shifted_csc_input_keeps_the_dense_copy(fusion: str) -> None:
    """The other side of the fixes above (seeds 11431, 11635, 12171): ``softmax(A + 2)`` with A
    CSC reads the visited coordinates of the shift, which visits every coordinate (densified
    along i only, A's column level counted on): A's row-major copy stays dense there."""
    from fuseflow.compiler import softmax

    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4))
    a[rng.random((3, 4)) < 0.7] = 0.0
    a[0] = 0.0
    p = Program("shifted_csc_softmax")
    t0 = p.let("T0", p.tensor("A", (3, 4), "csc") + 2.0)
    p.output(p.let("T1", softmax(t0)))
    compiled = compile_program(p, fusion=fusion)
    res = run_program(compiled, {"A": a}, simulate=run_graph, numerics="float")
    np.testing.assert_allclose(res.dense("T1"), _masked_softmax(a + 2.0, np.ones(a.shape, bool)), atol=1e-12)


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("fn", ["exp", "sigmoid"])
def test_a_function_of_a_softmax_of_a_csc_input_in_one_statement(fn: str, fusion: str) -> None:
    """Found while shrinking seed 11431: ``exp(softmax(A))`` in one statement, A CSC.  The
    densifier counted on A's dense column level to visit every column under the softmax, but a
    softmax along the columns reads A row-major from a copy whose column level is compressed
    (a dense one would change the softmax: seeds 11431, 11635, 12171), so a row with nothing
    stored had no coordinates (0 for exp(0) = 1; before those fixes, the dense copy made the
    softmax run over every column).  Under a softmax an operand's dense levels down to the
    softmax's index are not counted on: the index is densified by an iteration tensor."""
    from fuseflow.compiler import exp, sigmoid, softmax

    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 4))
    a[rng.random((3, 4)) < 0.6] = 0.0
    a[0] = 0.0  # a row with nothing stored
    a[1, 2] = 0.7
    f = {"exp": exp, "sigmoid": sigmoid}[fn]
    p = Program("fn_softmax_csc")
    p.output(p.let("T", f(softmax(p.tensor("A", (3, 4), "csc")))))
    compiled = compile_program(p, fusion=fusion)
    res = run_program(compiled, {"A": a}, simulate=run_graph, numerics="float")
    s = _masked_softmax(a, a != 0)
    want = np.exp(s) if fn == "exp" else 1.0 / (1.0 + np.exp(-s))
    np.testing.assert_allclose(res.dense("T"), want, atol=1e-12)
