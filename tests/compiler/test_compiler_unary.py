"""Elementwise functions (relu, neg, scalar factors and shifts, exp, sigmoid, gelu, rsqrt)
lowered to unary ALU nodes: integer mode exactly against numpy, the transcendental ones in
sw_sim's float mode (exact ``math`` functions, docs/numerics.md) within 1e-9, and in Q16.16
within the documented table error."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_programs import check

from fuseflow.compiler import (
    Fusion,
    Program,
    catalog,
    compile_program,
    einsum,
    exp,
    gelu,
    reference,
    relu,
    rsqrt,
    run_program,
    sigmoid,
)
from fuseflow.ir.numerics import Numerics
from fuseflow.ir.samml import AluOp, NodeKind
from sw_sim import run_graph


def alu_ops(compiled) -> list[AluOp]:
    return [n.param("op") for g in compiled.graphs for n in g.nodes.values()
            if n.kind is NodeKind.ALU]


def sparse(rng: np.random.Generator, shape: tuple[int, ...], density: float) -> np.ndarray:
    a = rng.integers(-5, 6, shape)
    a[rng.random(shape) >= density] = 0
    return a


def check_int(program: Program, data: dict[str, np.ndarray], fusion: Fusion = Fusion.FULL,
              factored: bool = True):
    compiled = compile_program(program, fusion, factored=factored)
    check(compiled, data)
    return compiled


def gcn_relu() -> Program:
    return catalog.gcn_relu(9, 5, 4)


@pytest.mark.parametrize(("fusion", "factored", "graphs"), [
    (Fusion.FULL, True, 1), (Fusion.FULL, False, 2), (Fusion.UNFUSED, True, 2)])
def test_relu_after_a_reduction(fusion: Fusion, factored: bool, graphs: int) -> None:
    # relu cannot be pulled through the sums: factored iteration applies it to the reducer's
    # output in one graph; one iteration space has to materialise the reduced terms first
    program = gcn_relu()
    rng = np.random.default_rng(1)
    for _ in range(2):
        data = {"A": sparse(rng, (9, 9), 0.3), "X": rng.integers(-4, 5, (9, 5)),
                "W": rng.integers(-4, 5, (5, 4)), "b": rng.integers(-9, 10, 4)}
        compiled = check_int(program, data, fusion, factored)
        assert len(compiled.graphs) == graphs
        assert alu_ops(compiled).count(AluOp.RELU) == 1


def test_sparse_elementwise_relu_neg_and_scalar_factor() -> None:
    p = Program("sparse_unary")
    A = p.tensor("A", (6, 7), "dcsr")
    B = p.tensor("B", (6, 7), "csr")
    C = p.tensor("C", (6, 7), "dcsr")
    p.output(p.let("Y", relu(A - 3 * B) * -C))
    rng = np.random.default_rng(2)
    data = {k: sparse(rng, (6, 7), 0.5) for k in "ABC"}
    compiled = check_int(p, data)
    ops = alu_ops(compiled)
    assert {AluOp.RELU, AluOp.NEG, AluOp.MUL_SCALAR} <= set(ops)
    mul = next(n for n in compiled.graphs[0].nodes.values()
               if n.kind is NodeKind.ALU and n.param("op") is AluOp.MUL_SCALAR)
    assert mul.param("scalar") == 3


def test_scalar_shift_of_a_dense_operand() -> None:
    p = Program("shift")
    X = p.tensor("X", (5, 4), "dense")
    S = p.tensor("S", (5, 4), "csr")
    p.output(p.let("Y", (2 - X) * S + (X + 7)))
    rng = np.random.default_rng(3)
    compiled = check_int(p, {"X": rng.integers(-9, 10, (5, 4)), "S": sparse(rng, (5, 4), 0.4)})
    assert AluOp.ADD_SCALAR in alu_ops(compiled)


def test_scaled_reduction_is_fused_through_the_factor() -> None:
    # a scalar factor is linear: Σ_k 3·A·X = 3·Σ_k A·X, one graph even in one iteration space
    p = Program("scaled")
    A = p.tensor("A", (6, 6), "csr")
    X = p.tensor("X", (6, 3), "dense")
    T = p.let("T", einsum("ik,kj->ij", A, X))
    p.output(p.let("Y", -(2 * T)))
    rng = np.random.default_rng(4)
    data = {"A": sparse(rng, (6, 6), 0.4), "X": rng.integers(-4, 5, (6, 3))}
    compiled = check_int(p, data, Fusion.FULL, factored=False)
    assert len(compiled.graphs) == 1


@pytest.mark.parametrize("fmt", ["csr", "dcsr", "csc"])
def test_non_zero_preserving_function_of_a_sparse_operand_is_densified(fmt: str) -> None:
    """``A + 1`` and ``3 - A`` of a sparse A: the iteration visits every coordinate (a union with
    dense iteration tensors), so the result is 1 / 3 where A has no entry, as in numpy."""
    rng = np.random.default_rng(2)
    p = Program("shift")
    A = p.tensor("A", (4, 5), fmt)
    p.output(p.let("Y", A + 1), p.let("Z", 3 - A))
    data = {"A": sparse(rng, (4, 5), 0.3)}
    data["A"][1] = 0
    for fusion in (Fusion.FULL, Fusion.UNFUSED):
        compiled = check_int(p, data, fusion)
        assert any(t.startswith("_iter") for g in compiled.graphs for t in g.input_tensors())
    q = Program("shift_vec")
    B = q.tensor("B", (6,), "compressed")
    q.output(q.let("y", B + 1))
    check_int(q, {"B": np.array([0, 2, 0, 0, -1, 0])})


def test_exp_of_a_sparse_operand_and_of_a_sparse_product_in_float() -> None:
    rng = np.random.default_rng(3)
    p = Program("exp_sparse")
    A = p.tensor("A", (5, 6), "csr")
    X = p.tensor("X", (6, 3), "dense")
    p.output(p.let("Y", exp(A)), p.let("Z", sigmoid(einsum("ik,kj->ij", A, X))))
    data = {"A": rng.uniform(-1, 1, (5, 6)) * (rng.random((5, 6)) < 0.4), "X": rng.uniform(-1, 1, (6, 3))}
    data["A"][2] = 0  # an empty row: Z is sigmoid(0) = 0.5 there
    result = run_program(compile_program(p), data, simulate=run_graph, numerics="float")
    want = reference(p, data, dtype=np.float64)
    for name in ("Y", "Z"):
        np.testing.assert_allclose(result.dense(name), want[name], rtol=0, atol=1e-9)
    assert result.dense("Z")[2].tolist() == [0.5] * 3


def test_transcendental_functions_need_fixed_or_float_numerics() -> None:
    p = Program("int_exp")
    X = p.tensor("X", (3,), "dense")
    p.output(p.let("y", exp(X)))
    with pytest.raises(ValueError, match="exp needs fixed-point or float numerics"):
        run_program(compile_program(p), {"X": np.arange(3)}, simulate=run_graph)


def float_program() -> Program:
    p = Program("float_unary")
    A = p.tensor("A", (7, 7), "csr")
    X = p.tensor("X", (7, 4), "dense")
    W = p.tensor("W", (4, 4), "dense")
    S = p.tensor("S", (7, 4), "csr")
    T = p.let("T", einsum("ik,kj->ij", A, X))
    H = p.let("H", gelu(einsum("ij,jl->il", T, W)))          # zero-preserving: fine on sparse rows
    p.output(p.let("Y", H + S * exp(X) + rsqrt(X * X + 1)),  # exp, rsqrt: dense operands
             p.let("Z", sigmoid(X) * -0.5))
    return p


def float_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (7, 7)) * (rng.random((7, 7)) < 0.4)
    s = rng.uniform(-1, 1, (7, 4)) * (rng.random((7, 4)) < 0.4)
    return {"A": a, "X": rng.uniform(-1, 1, (7, 4)), "W": rng.uniform(-1, 1, (4, 4)), "S": s}


@pytest.mark.parametrize("fusion", [Fusion.FULL, Fusion.UNFUSED], ids=lambda f: f.value)
def test_float_mode_matches_numpy(fusion: Fusion) -> None:
    program = float_program()
    compiled = compile_program(program, fusion)
    assert {AluOp.EXP, AluOp.SIGMOID, AluOp.GELU, AluOp.RSQRT} <= set(alu_ops(compiled))
    for seed in (1, 2):
        data = float_data(seed)
        result = run_program(compiled, data, numerics="float", simulate=run_graph)
        for name, want in reference(program, data, dtype=np.float64).items():
            np.testing.assert_allclose(result.dense(name), want, rtol=1e-9, atol=1e-12,
                                       err_msg=name)


def test_fixed_point_mode_within_table_error() -> None:
    # Q16.16: inputs quantised, products rounded, table nonlinearities (docs/numerics.md: a few
    # LSB per operation); compare with numpy on the quantised inputs
    num = Numerics.parse("q16.16")
    p = Program("fixed_unary")
    X = p.tensor("X", (6, 5), "dense")
    S = p.tensor("S", (6, 5), "csr")
    p.output(p.let("Y", S * sigmoid(X) + gelu(X) + relu(X) * 0.25))
    rng = np.random.default_rng(5)
    x = rng.uniform(-3, 3, (6, 5))
    s = rng.uniform(-2, 2, (6, 5)) * (rng.random((6, 5)) < 0.5)
    xq, sq = num.quantize(x), num.quantize(s)
    result = run_program(compile_program(p), {"X": xq, "S": sq}, numerics=num, simulate=run_graph)
    got = num.dequantize(result.dense("Y"))
    want = reference(p, {"X": xq / 2**16, "S": sq / 2**16}, dtype=np.float64)["Y"]
    np.testing.assert_allclose(got, want, atol=8 / 2**16)
