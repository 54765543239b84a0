"""User mistakes produce errors that name the expression, tensor and index."""

from __future__ import annotations

import numpy as np
import pytest

from fuseflow.compiler import (
    FusionError,
    Program,
    ProgramError,
    compile_program,
    einsum,
    relu,
    run_program,
)
from fuseflow.ir.tensor import Format
from sw_sim import run_graph


def matmul_program(**let_args) -> Program:
    p = Program("mm")
    A = p.tensor("A", (3, 4), "csr")
    X = p.tensor("X", (4, 5), "dense")
    p.let("T", einsum("ik,kj->ij", A, X), **let_args)
    return p


def test_unknown_output_index() -> None:
    p = Program()
    A, X = p.tensor("A", (3, 4), "csr"), p.tensor("X", (4, 5))
    with pytest.raises(ProgramError, match=r"einsum\('ik,kj->iz', A, X\): output index 'z' is unknown"):
        einsum("ik,kj->iz", A, X)


def test_repeated_output_index() -> None:
    p = Program()
    A, X = p.tensor("A", (3, 4), "csr"), p.tensor("X", (4, 5))
    with pytest.raises(ProgramError, match=r"einsum\('ik,kj->ii', A, X\): output index 'i' is repeated"):
        einsum("ik,kj->ii", A, X)


def test_repeated_operand_index() -> None:
    p = Program()
    A = p.tensor("A", (4, 4), "csr")
    with pytest.raises(ProgramError, match=r"index 'i' is repeated in operand A"):
        einsum("ii->i", A)


def test_shape_mismatch_in_einsum() -> None:
    p = Program()
    A, X = p.tensor("A", (3, 4), "csr"), p.tensor("X", (5, 5))
    with pytest.raises(ProgramError, match=r"shape mismatch in einsum\('ik,kj->ij', A, X\): index 'k' "
                                           r"has size 4 in A but 5 in X"):
        einsum("ik,kj->ij", A, X)


def test_shape_mismatch_in_elementwise() -> None:
    p = Program()
    A, B = p.tensor("A", (3, 4), "csr"), p.tensor("B", (4, 3))
    with pytest.raises(ProgramError, match=r"shape mismatch in \(A \+ B\): A has shape \(3, 4\) and B "
                                           r"has shape \(4, 3\)"):
        A + B


@pytest.mark.parametrize("fmt,why", [
    ("bcsr", "unknown level format 'b'"),
    (("dense", "singleton"), "level 1 is singleton, but level 0 above it is dense"),
    ("1n", "level 0 is singleton, but it is the first level"),
    ("nd", "level 1 is dense under the compressed_nonunique level 0"),
])
def test_unsupported_format(fmt, why) -> None:
    p = Program()
    with pytest.raises(ProgramError, match=rf"tensor 'A': unsupported format .*{why}.*dense, compressed, "
                                           "compressed_nonunique and singleton"):
        p.tensor("A", (3, 4), fmt)


def test_format_order_mismatch() -> None:
    p = Program()
    with pytest.raises(ProgramError, match=r"tensor 'v': format \[d,c\] has 2 levels but the tensor "
                                           r"has 1 modes"):
        p.tensor("v", (3,), "csr")


def test_order_against_the_operand_format() -> None:
    p = matmul_program(order="kij")
    with pytest.raises(FusionError, match=r"cycle: i -> u0 \(mode order of A_\{i,u0\}\), u0 -> i "
                                          r"\(dataflow order of 'T = einsum\('ik,kj->ij', A, X\)'\); "
                                          r"u0 is index k of 'T = einsum"):
        compile_program(p)


def test_fused_order_the_pog_forbids() -> None:
    with pytest.raises(FusionError, match=r"order u0,i,j puts u0 before i, but the POG requires "
                                          r"i -> u0 \(mode order of A_\{i,u0\}\); u0 is index k"):
        compile_program(matmul_program(), fused_orders={0: ("u0", "i", "j")})


def test_order_with_unknown_index() -> None:
    with pytest.raises(ProgramError, match=r"order 'ikz' names unknown index 'z'"):
        matmul_program(order="ikz")


def test_order_needing_an_order_three_accumulator() -> None:
    p = Program()
    A, X = p.tensor("A", (3, 4, 2), "ccc", mode_order=(1, 0, 2)), p.tensor("X", (4, 5))
    p.let("T", einsum("ikl,kj->ilj", A, X))
    with pytest.raises(FusionError, match=r"reduction index u0 of T has output indices i, l, j "
                                          r"after it: that needs a sparse accumulator of order 3"):
        compile_program(p)


def test_read_before_produced() -> None:
    p = Program()
    A = p.tensor("A", (3, 4), "csr")
    T = p.computed("T", (3, 4))
    with pytest.raises(ProgramError, match=r"statement 0 'Y = \(A \* T\)' reads 'T' before it is "
                                           "produced"):
        p.let("Y", A * T)


def test_dense_output_level_that_is_not_full() -> None:
    """A declared dense level whose coordinates would come from an accumulator is densified
    (docs/compiler.md, "Densified iteration"); the iteration term shows in the fused einsum."""
    compiled = compile_program(matmul_program(fmt="dense"))
    assert compiled.formats["T"].levels == (Format.DENSE, Format.DENSE)
    assert "_iter5_{j}" in compiled.explain()


def test_broadcast_add_over_compressed_rows() -> None:
    """``A + b`` with A's rows compressed: densified iteration over A's rows (it was refused),
    so ``b`` reaches the empty rows of A, as in numpy."""
    p = Program()
    A, b = p.tensor("A", (3, 4), "dcsr"), p.tensor("b", (4,))
    p.output(p.let("T", A + b))
    compiled = compile_program(p)
    assert "_iter3_{i}" in compiled.explain()
    a = np.array([[0, 0, 0, 0], [1, 0, -2, 0], [0, 0, 0, 3]])
    b = np.array([5, -1, 2, 7])
    res = run_program(compiled, {"A": a, "b": b}, simulate=run_graph)
    np.testing.assert_array_equal(res.dense("T"), a + b)


def test_unknown_tensor_in_order_option() -> None:
    with pytest.raises(ProgramError, match=r"no statement computes tensor 'Q'"):
        compile_program(matmul_program(), orders={"Q": "ij"})


def _fused_broadcast_add(c_fmt: str) -> Program:
    """``Y = A · relu(C + b)`` fused: ``b`` lacks ``k`` but is added to ``C``, which has it."""
    p = Program()
    A, C, b = p.tensor("A", (5, 6), "csr"), p.tensor("C", (6, 4), c_fmt), p.tensor("b", (4,))
    H = p.let("H", relu(C + b))
    p.let("Y", einsum("ik,kj->ij", A, H))
    return p


def test_broadcast_add_fused_under_a_product_needs_full_rows_locally() -> None:
    """Under ``A[i,k] ·`` only A's k coordinates matter, but at each of them the bias must meet
    C's (possibly empty) row: C's k level must enumerate every row (dense) — a compressed k
    level would drop the rows where C is empty and lose ``relu(b)`` there."""
    rng = np.random.default_rng(0)
    a = rng.random((5, 6)) * (rng.random((5, 6)) < 0.5)
    c = rng.random((6, 4)) - 0.5
    c[[1, 4]] = 0.0  # empty rows of C: H = relu(b) there
    b = rng.random(4) - 0.3
    ref = a @ np.maximum(c + b, 0.0)
    res = run_program(compile_program(_fused_broadcast_add("csr"), "full"),
                      {"A": a, "C": c, "b": b}, numerics="float", simulate=run_graph)
    assert np.allclose(res.outputs["Y"].to_dense(), ref, rtol=1e-12, atol=1e-12)
    # C's rows compressed (refused before): densified iteration over them
    res = run_program(compile_program(_fused_broadcast_add("dcsr"), "full"),
                      {"A": a, "C": c, "b": b}, numerics="float", simulate=run_graph)
    assert np.allclose(res.outputs["Y"].to_dense(), ref, rtol=1e-12, atol=1e-12)
