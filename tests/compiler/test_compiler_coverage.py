"""Coverage of ordinary sparse tensor algebra (issue 15, part 4): order-2 sparse accumulators
(outer-product SpMM, sums of matrices), densified iteration (decompression, functions with
f(0) != 0 of sparse operands), division, maximum / minimum, max / min reductions, 0-d outputs,
and the messages for what is still rejected.  Values are checked against numpy in sw_sim."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_programs import SUITE, check, random_inputs

from fuseflow.compiler import (
    Fusion,
    FusionError,
    LoweringError,
    Program,
    ProgramError,
    all_orders,
    compile_program,
    einsum,
    maximum,
    reference,
    relu,
    run_program,
)
from fuseflow.ir.overflow import NumericOverflowError
from fuseflow.ir.samml import NodeKind
from fuseflow.ir.tensor import Format, TensorFormat
from sw_sim import run_graph


def kinds(compiled) -> list[NodeKind]:
    return [n.kind for g in compiled.graphs for n in g.nodes.values()]


# ----------------------------------------------------------------------------- order-2 accumulators
@pytest.mark.parametrize("fa, fb", [("csc", "csr"), ("dcsc", "dcsr"), ("dense", "dense"),
                                    ("csc", "dense")])
@pytest.mark.parametrize("order", ["kij", "kji"])
def test_outer_product_spmm_in_both_orders(fa: str, fb: str, order: str) -> None:
    p = Program("outer")
    A = p.tensor("A", (6, 7), fa, mode_order=(1, 0))
    B = p.tensor("B", (7, 5), fb)
    p.output(p.let("C", einsum("ik,kj->ij", A, B), order=order))
    compiled = compile_program(p)
    assert compiled.groups[0].group.order[0] == "u0"
    assert NodeKind.SPACC2 in kinds(compiled)
    # kji writes the result column-major: its levels come in the order j, i
    assert compiled.formats["C"].mode_order == ((0, 1) if order == "kij" else (1, 0))
    for seed in (1, 2, 3):
        data = random_inputs(p, {"A": 0.3, "B": 0.3}, seed)
        data["A"][:, 2] = 0  # a k with no i: an empty outer fibre
        check(compiled, data)


def test_every_order_of_a_three_index_reduction_is_lowered() -> None:
    """C_ij = Σ_{k,l} A_kli B_klj with every level dense: each valid order, including the ones
    whose reductions enclose both output indices (two chained SPACC2), equals numpy."""
    p = Program("klij")
    A = p.tensor("A", (3, 4, 5), "ddd")
    B = p.tensor("B", (3, 4, 6), "ccc")
    p.output(p.let("C", einsum("kli,klj->ij", A, B)))
    group = compile_program(p).groups[0].group
    orders = all_orders(group)
    data = random_inputs(p, {"A": 0.5, "B": 0.4}, 5)
    for order in orders:
        compiled = compile_program(p, fused_orders={0: order})
        check(compiled, data)
    assert kinds(compile_program(p, fused_orders={0: ("u0", "u1", "i", "j")})).count(
        NodeKind.SPACC2) == 2


def test_an_order_one_accumulator_inside_an_order_two_one() -> None:
    """k -> i -> l -> j: l is accumulated keyed by j (SPACC1), then k keyed by (i, j)."""
    p = Program("kilj")
    A = p.tensor("A", (3, 4, 5), "ccc")
    B = p.tensor("B", (5, 6), "dcsr")
    p.output(p.let("C", einsum("kil,lj->ij", A, B)))
    compiled = compile_program(p)
    assert compiled.groups[0].group.order == ("u0", "i", "u1", "j")
    assert {NodeKind.SPACC1, NodeKind.SPACC2} <= set(kinds(compiled))
    for seed in (1, 2):
        check(compiled, random_inputs(p, {"A": 0.4, "B": 0.4}, seed))


def test_orders_without_an_order_two_accumulator_are_preferred() -> None:
    """Where both kinds of order are valid the compiler keeps the order-1 one (existing graphs
    do not change); the order-2 one is there on request."""
    p = SUITE["spmm_dense"].build()
    compiled = compile_program(p)
    assert NodeKind.SPACC2 not in kinds(compiled)
    data = random_inputs(p, SUITE["spmm_dense"].density, 1)
    p2 = Program("spmm_dense_kij")
    A = p2.tensor("A", (7, 6), "csc")
    X = p2.tensor("X", (6, 5), "dense")
    p2.output(p2.let("T", einsum("ik,kj->ij", A, X), order="kij"))
    check(compile_program(p2), data)


def test_an_order_three_accumulator_is_rejected_naming_the_index() -> None:
    p = Program("o3")
    A = p.tensor("A", (4, 3, 5, 6), "cccc")
    p.output(p.let("C", einsum("kijl->ijl", A)))
    with pytest.raises(FusionError, match=r"reduction index u0 of C has output indices i, j, l "
                       r"after it: that needs a sparse accumulator of order 3.*u0 is index k"):
        compile_program(p)


# ----------------------------------------------------------------------------- densified iteration
@pytest.mark.parametrize("fmt", ["csr", "dcsr", "csc", "dense", "ccc"])
def test_sparse_to_dense_and_back(fmt: str) -> None:
    """Y (dense) = A and Z (compressed) = Y, in every fusion; dense levels of the output are
    iterated fully (densified) where A's coordinates would not be."""
    shape = (4, 5, 3) if fmt == "ccc" else (4, 5)
    mode = (1, 0) if fmt == "csc" else None
    p = Program("convert")
    A = p.tensor("A", shape, fmt)
    dense = TensorFormat((Format.DENSE,) * len(shape), mode or ())
    Y = p.let("Y", A, fmt=dense)
    Z = p.let("Z", 2 * Y, fmt=TensorFormat((Format.COMPRESSED,) * len(shape), mode or ()))
    p.output(Y, Z)
    for fusion in (Fusion.UNFUSED, Fusion.FULL):
        compiled = compile_program(p, fusion)
        assert compiled.formats["Y"].levels == dense.levels
        for seed in (1, 2):
            check(compiled, random_inputs(p, {"A": 0.3}, seed))


def test_densified_iteration_is_explained() -> None:
    p = Program("shift")
    A = p.tensor("A", (4, 5), "csr")
    p.output(p.let("Y", A + 2))
    text = compile_program(p).explain()
    assert "Y_{i,j} = ((A_{i,j} + _iter5_{j}) + 2)" in text  # the fused einsum
    assert "Union_j(A, _iter5)" in text  # the merge cell
    assert "(<A_val> + 2)" in text  # the compute cell: the iteration term has no value


def test_function_of_a_sparse_product_in_every_order() -> None:
    """A shift of an outer-product SpMM (its reduction hoisted, its indices densified)."""
    p = Program("shifted_product")
    A = p.tensor("A", (5, 6), "dcsc")
    B = p.tensor("B", (6, 4), "csr")
    p.output(p.let("C", einsum("ik,kj->ij", A, B) + 1))
    data = random_inputs(p, {"A": 0.3, "B": 0.3}, 6)
    for fusion in (Fusion.UNFUSED, Fusion.FULL):
        check(compile_program(p, fusion), data)


# ----------------------------------------------------------------------------- operators
def test_division_rules() -> None:
    p = Program("div")
    A = p.tensor("A", (4, 5), "csr")
    D = p.tensor("D", (4, 5), "dense")
    p.output(p.let("Y", A / D))
    compiled = compile_program(p)
    data = {"A": random_inputs(p, {"A": 0.4}, 1)["A"], "D": np.arange(1, 21).reshape(4, 5) - 10}
    data["D"][data["D"] == 0] = 7
    check(compiled, data)
    data["D"][2, 3] = 0
    with pytest.raises(ProgramError, match=r"division by zero: input 'D' is 0 at \(2, 3\) and "
                                           r"'Y = \(A / D\)' divides by it"):
        run_program(compiled, data, simulate=run_graph)
    q = Program("div_sparse")
    A2, S2 = q.tensor("A", (4, 5), "dense"), q.tensor("S", (4, 5), "dcsr")
    q.output(q.let("Y", A2 / S2))
    with pytest.raises(LoweringError, match=r"the denominator S_\{i,j\} of \(A_\{i,j\} / "
                                            r"S_\{i,j\}\) reads S, which is stored \[c,c\]"):
        compile_program(q)
    with pytest.raises(ProgramError, match=r"2 / A: a scalar divided by a tensor is not supported"):
        _ = 2 / A
    with pytest.raises(ProgramError, match=r"max\(A, 0\): max with a scalar is not supported"):
        maximum(A, 0)


def test_a_computed_denominator_of_zero_is_counted() -> None:
    """(A / (D - E)) with D == E somewhere: the ALU's rule, counted as an overflow."""
    p = Program("div_computed")
    A = p.tensor("A", (3, 4), "dense")
    D = p.tensor("D", (3, 4), "dense")
    E = p.tensor("E", (3, 4), "dense")
    p.output(p.let("Y", A / (D - E)))
    ones = np.ones((3, 4), dtype=np.int64)
    with pytest.raises(NumericOverflowError, match="12 result.*division by zero"):
        run_program(compile_program(p), {"A": ones, "D": ones, "E": ones}, simulate=run_graph)
    res = run_program(compile_program(p), {"A": ones, "D": ones, "E": ones}, simulate=run_graph,
                      on_overflow="ignore")
    assert sum(res.overflows.values()) == 12
    with pytest.raises(ProgramError, match="division by zero in"):
        reference(p, {"A": ones, "D": ones, "E": ones})


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("spec, fmts", [
    ("ij->i", ("csr",)), ("ij->j", ("csr",)), ("ij->i", ("dcsc",)), ("ij->", ("dcsr",)),
    ("ik,kj->ij", ("csr", "dcsr")), ("ik,kj->ij", ("csc", "csr")), ("ijk->ik", ("ccc",))])
def test_max_min_reductions_in_every_order(reduce: str, spec: str, fmts: tuple[str, ...]) -> None:
    p = Program("red")
    names = "AB"
    ins = spec.split("->")[0].split(",")
    shapes = {"i": 4, "j": 5, "k": 3}
    ops = [p.tensor(names[n], tuple(shapes[c] for c in letters), f)
           for n, (letters, f) in enumerate(zip(ins, fmts))]
    p.output(p.let("Y", einsum(spec, *ops, reduce=reduce)))
    compiled = compile_program(p)
    orders = all_orders(compiled.groups[-1].group)
    for seed in (1, 2):
        data = random_inputs(p, {n: 0.4 for n in names[: len(ops)]}, seed)
        data["A"][1] = -np.abs(data["A"][1])  # negative entries: the implicit zeros win
        for order in orders:
            check(compile_program(p, fused_orders={len(compiled.groups) - 1: order}), data)
    text = compiled.explain()
    assert f"Y_{{{','.join(p.statements[0].indices)}}} = {reduce}_" in text
    assert "not fused with other statements" not in text  # a statement alone already


def test_a_max_reduction_gets_a_graph_of_its_own() -> None:
    p = Program("chain")
    A = p.tensor("A", (5, 6), "csr")
    X = p.tensor("X", (6, 4), "dense")
    T = p.let("T", einsum("ik,kj->ij", A, X))
    p.output(p.let("y", relu(einsum("ij->i", T, reduce="min")) * 2))
    compiled = compile_program(p, Fusion.FULL)
    assert len(compiled.graphs) == 3
    assert any("max / min reduction is not fused" in n for g in compiled.groups
               for n in g.group.notes)
    for seed in (1, 2):
        check(compiled, random_inputs(p, {"A": 0.4}, seed))


def test_scalar_outputs_through_every_fusion() -> None:
    case = SUITE["scalars"]
    p = case.build()
    for fusion in (Fusion.UNFUSED, Fusion.FULL):
        compiled = compile_program(p, fusion)
        for g in compiled.graphs:
            assert all(t.fmt.order == 0 for name, t in g.tensors.items()
                       if name in ("dot", "total", "top"))
        check(compiled, random_inputs(p, case.density, 3))
