"""The ``locate`` pass: an intersection of a sparse operand with a dense level iterates the
sparse operand and locates into the dense level; a union with a dense level, or an intersection
of dense levels only, still iterates them; a dense level whose parent reference may be N (a
union member above) is never located.  Values are compared with numpy on random data with and
without the pass, and the work (cycles) with a bound computed from the data's nonzeros."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_programs import random_inputs
from example_programs import load_example

from fuseflow.compiler import Program, compile_program, einsum, reference, run_program
from fuseflow.ir.samml import NodeKind
from sw_sim import run_graph


def _kinds(compiled) -> list[NodeKind]:
    return [n.kind for g in compiled.graphs for n in g.nodes.values()]


def spmv(n: int = 24, m: int = 20) -> Program:
    p = Program("spmv")
    A = p.tensor("A", (n, m), "csr")
    x = p.tensor("x", (m,), "dense")
    p.output(p.let("y", einsum("ij,j->i", A, x)))
    return p


spmm = load_example("spmm").program  # spmm(n, m): T = A·X, A n×n CSR, X n×m dense, order i->k->j


def add_dense(n: int = 12) -> Program:
    p = Program("add_dense")
    A = p.tensor("A", (n, n), "csr")
    D = p.tensor("D", (n, n), "dense")
    p.output(p.let("Z", A + D))
    return p


def union_above(n: int = 10) -> Program:
    """``Z = V·A + B``: V stored (compressed, dense), so at j V's dense level has a parent that
    the union at i may leave N; A's dense top level is located at i under the intersection."""
    p = Program("union_above")
    V = p.tensor("V", (n, n), "cd")
    A = p.tensor("A", (n, n), "csr")
    B = p.tensor("B", (n, n), "csr")
    p.output(p.let("Z", V * A + B))
    return p


CASES = {"spmv": (spmv, {"A": 0.2}), "spmm": (spmm, {"A": 0.25}),
         "add_dense": (add_dense, {"A": 0.3}),
         "union_above": (union_above, {"V": 0.3, "A": 0.5, "B": 0.3})}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("locate", [True, False])
def test_values_equal_numpy_with_and_without_locate(name: str, locate: bool) -> None:
    build, density = CASES[name]
    program = build()
    compiled = compile_program(program, locate=locate)
    for seed in (0, 1, 2):
        data = random_inputs(program, density, seed)
        result = run_program(compiled, data, simulate=run_graph)
        for k, want in reference(program, data).items():
            np.testing.assert_array_equal(result.dense(k), want, err_msg=f"{name} {k} seed {seed}")


def test_intersection_with_a_dense_level_becomes_a_locate() -> None:
    kinds = _kinds(compile_program(spmv()))
    assert NodeKind.LOCATE in kinds and NodeKind.INTERSECT not in kinds
    off = _kinds(compile_program(spmv(), locate=False))
    assert NodeKind.LOCATE not in off and NodeKind.INTERSECT in off


def test_union_with_a_dense_level_stays_a_dense_iteration() -> None:
    kinds = _kinds(compile_program(add_dense()))
    assert NodeKind.LOCATE not in kinds and NodeKind.UNION in kinds


def test_dense_level_under_a_possibly_empty_parent_is_not_located() -> None:
    compiled = compile_program(union_above())
    (group,) = compiled.groups
    text = group.explain()
    assert "located dense levels: A at i" in text  # under Intersect_i(V, A) inside the union
    assert "V at j" not in text  # V's parent reference may be N (union at i): scanned there


def test_explain_names_the_located_levels_and_none_when_nothing_is() -> None:
    assert "located dense levels: X at u0" in compile_program(spmm(16, 6)).explain()
    assert "located dense levels: none" in compile_program(spmm(16, 6), locate=False).explain()


def _csr_rows(n: int, m: int, density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 5, (n, m)) * (rng.random((n, m)) < density)


@pytest.mark.parametrize("density", [0.02, 0.1, 0.5])
def test_spmv_cycles_follow_nonzeros_not_the_dense_size(density: float) -> None:
    # the bound: cycles <= 1.2 (nnz + rows) + 64, computed from the data itself
    n = m = 96
    program = spmv(n, m)
    A = _csr_rows(n, m, density, 7)
    data = {"A": A, "x": np.arange(m) - 40}
    result = run_program(compile_program(program), data, simulate=run_graph)
    np.testing.assert_array_equal(result.dense("y"), A @ data["x"])
    nnz = int(np.count_nonzero(A))
    assert result.cycles[0] <= 1.2 * (nnz + n) + 64
    scanned = run_program(compile_program(program, locate=False), data, simulate=run_graph)
    assert scanned.cycles[0] >= n * m  # the dense scan visits every (i, j)


def test_spmm_with_dense_operand_cycles_follow_nonzeros() -> None:
    # A @ X, X dense with J columns: cycles <= 1.2 nnz(A) J + rows J + 64
    n, J = 64, 8
    A = _csr_rows(n, n, 0.05, 3)
    X = np.arange(n * J).reshape(n, J) % 7 - 3
    result = run_program(compile_program(spmm(n, J)), {"A": A, "X": X}, simulate=run_graph)
    np.testing.assert_array_equal(result.dense("T"), A @ X)
    assert result.cycles[0] <= 1.2 * np.count_nonzero(A) * J + n * J + 64


def inner_product(n: int = 12) -> Program:
    p = Program("inner")
    A = p.tensor("A", (n, n), "csr")
    B = p.tensor("B", (n, n), "csc")
    p.output(p.let("C", einsum("ik,kj->ij", A, B), order="ijk"))
    return p


def test_skip_option_converts_the_intersection_and_keeps_the_values() -> None:
    program = inner_product()
    plain, skipping = compile_program(program), compile_program(program, skip=True)
    (g,) = skipping.graphs
    assert [n.param("skip") for n in g.nodes.values() if n.kind is NodeKind.INTERSECT] == [True]
    assert "skipping: intersect 'intersect_u0': skips" in skipping.explain()
    assert "skipping: intersect 'intersect_u0': can skip" in plain.explain()
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        A = rng.integers(1, 4, (12, 12)) * (rng.random((12, 12)) < 0.15)
        B = rng.integers(1, 4, (12, 12)) * (rng.random((12, 12)) < 0.15)
        A[0] = 1  # a long row against short columns: skipping has something to skip
        a, b = (run_program(c, {"A": A, "B": B}, simulate=run_graph) for c in (plain, skipping))
        np.testing.assert_array_equal(b.dense("C"), A @ B)
        np.testing.assert_array_equal(a.dense("C"), A @ B)
        assert b.cycles[0] <= a.cycles[0]


def test_accumulator_buffering_option_keeps_values_and_overlaps_the_flush() -> None:
    program = spmm(32, 6)
    one, two = (compile_program(program, spacc_buffers=b) for b in (1, 2))
    assert {n.all_params()["buffers"] for g in two.graphs for n in g.nodes.values()
            if n.kind is NodeKind.SPACC1} == {2}
    assert all("buffers" not in n.params for g in one.graphs for n in g.nodes.values())
    for seed in (0, 1):
        data = random_inputs(program, {"A": 0.3}, seed)
        a, b = (run_program(c, data, simulate=run_graph) for c in (one, two))
        for k, want in reference(program, data).items():
            np.testing.assert_array_equal(a.dense(k), want)
            np.testing.assert_array_equal(b.dense(k), want)
        assert b.cycles[0] < a.cycles[0]
    with pytest.raises(ValueError, match="spacc_buffers=3: must be 1 or 2"):
        compile_program(program, spacc_buffers=3)



def shifted_operand(n: int = 96, m: int = 96, k: int = 4) -> Program:
    """``Y = A·(T + 3)``, ``T = 2X``, X CSR: ``T + 3`` is not 0 where T is (f(0) != 0), so its
    iteration is densified over j and k (a union of T with the all-coordinates term).  At j
    that union has dense levels only (T's rows are stored dense), and it sits under the
    intersection with A's compressed rows."""
    p = Program("shifted_operand")
    A = p.tensor("A", (n, m), "csr")
    X = p.tensor("X", (m, k), "csr")
    T = p.let("T", X * 2)  # computed: its format is the compiler's, so j is densified too
    p.output(p.let("Y", einsum("ij,jk->ik", A, T + 3)))
    return p


@pytest.mark.parametrize("density", [0.02, 0.2])
def test_densified_operand_under_an_intersection_is_located(density: float) -> None:
    # a union of dense levels only covers every coordinate: A's nonzeros produce them and the
    # union's members are located, so the work follows nnz(A), not the n*m of a dense merge
    n = m = 96
    k = 4
    program = shifted_operand(n, m, k)
    A = _csr_rows(n, m, density, 5)
    X = _csr_rows(m, k, 0.5, 6)
    data = {"A": A, "X": X}
    compiled = compile_program(program, "unfused")
    assert "located dense levels: T at u0, _iter96 at u0" in compiled.explain()
    result = run_program(compiled, data, simulate=run_graph)
    np.testing.assert_array_equal(result.dense("Y"), A @ (2 * X + 3))
    assert result.cycles[-1] <= 1.2 * (np.count_nonzero(A) + n) * k + 64
    scanned = run_program(compile_program(program, "unfused", locate=False), data, simulate=run_graph)
    np.testing.assert_array_equal(scanned.dense("Y"), A @ (2 * X + 3))
    assert scanned.cycles[-1] >= n * m
