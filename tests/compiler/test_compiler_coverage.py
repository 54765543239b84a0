"""Coverage of ordinary sparse tensor algebra (issue 15, part 4): order-2 sparse accumulators
(outer-product SpMM, sums of matrices), and the messages for what is still rejected.  Values
are checked against numpy in sw_sim."""

from __future__ import annotations

import pytest
from compiler_programs import SUITE, random_inputs
from test_compiler_suite import check

from fuseflow.compiler import FusionError, Program, all_orders, compile_program, einsum
from fuseflow.samml import NodeKind


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
