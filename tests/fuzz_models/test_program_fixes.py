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
