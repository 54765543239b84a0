"""The program suite compiled unfused / partially / fully fused and in several dataflow orders,
simulated in sw_sim and compared exactly with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_programs import SUITE, check, random_inputs

from fuseflow.compiler import Fusion, all_orders, compile_program, reference, run_program
from fuseflow.ir.samml import NodeKind
from sw_sim import run_graph

FUSIONS = [Fusion.UNFUSED, Fusion.PARTIAL, Fusion.FULL]


@pytest.mark.parametrize("fusion", FUSIONS, ids=lambda f: f.value)
@pytest.mark.parametrize("name", sorted(SUITE))
def test_program_matches_numpy(name: str, fusion: Fusion) -> None:
    case = SUITE[name]
    program = case.build()
    compiled = compile_program(program, fusion)
    for g in compiled.graphs:
        g.verify()
    for seed in (1, 2):
        check(compiled, random_inputs(program, case.density, seed))


@pytest.mark.parametrize("name", sorted(SUITE))
def test_empty_inputs_give_empty_result(name: str) -> None:
    case = SUITE[name]
    program = case.build()
    data = random_inputs(program, case.density, 3)
    for k, d in case.density.items():
        if d < 1.0:
            data[k] = np.zeros_like(data[k])
    check(compile_program(program, Fusion.FULL), data)


def test_disjoint_patterns_give_empty_product() -> None:
    program = SUITE["mul"].build()
    a = np.zeros((6, 7), dtype=np.int64)
    b = np.zeros((6, 7), dtype=np.int64)
    a[::2, ::2] = 3
    b[1::2, 1::2] = -2
    data = {"A": a, "B": b}
    check(compile_program(program), data)
    assert not reference(program, data)["C"].any()


@pytest.mark.parametrize("name", ["mul3", "mul3_dense_top"])
def test_empty_middle_fibers_are_dropped(name: str) -> None:
    program = SUITE[name].build()
    a = np.zeros((4, 5, 6), dtype=np.int64)
    b = np.zeros((4, 5, 6), dtype=np.int64)
    a[1, 2, 3], b[1, 2, 3] = 2, -3      # one surviving entry
    a[1, 3, 0], b[1, 3, 1] = 5, 7       # (1, 3): both have the fiber, the k's are disjoint
    a[2, 0, 4], b[2, 0, 5] = 1, 1       # row 2: all its fibers vanish
    data = {"A": a, "B": b}
    compiled = compile_program(program)
    check(compiled, data)
    out = run_program(compiled, data, simulate=run_graph).outputs["C"]
    if name == "mul3":  # only the surviving coordinate path is stored
        assert [list(c) for c in out.crd] == [[1], [2], [3]]
    else:  # a dense top level keeps one (possibly empty) j fiber per i
        assert list(out.seg[1]) == [0, 0, 1, 1, 1]
        assert list(out.crd[2]) == [3]


@pytest.mark.parametrize("name", ["spmm_inner", "nested_matmul_cm", "spmm_outer"])
def test_every_valid_order(name: str) -> None:
    case = SUITE[name]
    program = case.build()
    base = compile_program(program, Fusion.FULL)
    group = base.groups[0].group
    orders = all_orders(group)
    assert len(orders) >= 2
    data = random_inputs(program, case.density, 4)
    seen = set()
    for order in orders[:4]:
        compiled = compile_program(program, Fusion.FULL, fused_orders={0: order})
        assert compiled.groups[0].group.order == order
        seen.add(compiled.graphs[0].structure_hash())
        check(compiled, data)
    assert len(seen) == min(len(orders), 4)


def test_orders_of_two_outputs_are_counted_but_project_to_one_graph() -> None:
    compiled = compile_program(SUITE["two_outputs"].build(), Fusion.FULL)
    group = compiled.groups[0].group
    # Y1 and Y2 each have their own reduction indices; their relative placement is free
    assert group.orders_count == 6
    data = random_inputs(compiled.program, SUITE["two_outputs"].density, 7)
    for order in all_orders(group):
        check(compile_program(compiled.program, Fusion.FULL, fused_orders={0: order}), data)


def test_statement_order_changes_the_graph() -> None:
    case = SUITE["spmm_inner"]
    program = case.build()
    data = random_inputs(program, case.density, 5)
    ij = compile_program(program, orders={"C": "ijk"})
    ji = compile_program(program, orders={"C": "jik"})
    assert ij.groups[0].group.order[:2] == ("i", "j")
    assert ji.groups[0].group.order[:2] == ("j", "i")
    assert ji.formats["C"].mode_order == (1, 0)
    check(ij, data)
    check(ji, data)


def test_region_counts() -> None:
    program = SUITE["gcn_layer"].build()
    assert len(compile_program(program, Fusion.UNFUSED).graphs) == 3
    assert len(compile_program(program, Fusion.PARTIAL).graphs) == 2
    # factored iteration: the bias add unites with the reducer's output in the one graph
    assert len(compile_program(program, Fusion.FULL).graphs) == 1
    # one iteration space cannot add after a reduction: the region is split there (see docs)
    full = compile_program(program, Fusion.FULL, factored=False)
    assert len(full.graphs) == 2
    assert any("split" in n for g in full.groups for n in g.group.notes)


def test_declared_csc_output_forces_the_column_loop_outside() -> None:
    compiled = compile_program(SUITE["spmm_csc_out"].build())
    assert compiled.groups[0].group.order[0] == "j"
    assert compiled.formats["C"].mode_order == (1, 0)


def test_third_order_tensor_in_two_mode_orders() -> None:
    kinds = {}
    for name in ("ttv", "ttv_permuted"):
        (graph,) = compile_program(SUITE[name].build()).graphs
        kinds[name] = {n.kind for n in graph.nodes.values()}
        assert graph.tensors["B"].fmt.order == 3
    # k above j: accumulate the j coordinates of each row
    assert NodeKind.SPACC1 in kinds["ttv_permuted"] and NodeKind.CRD_HOLD not in kinds["ttv_permuted"]
    # k innermost under a compressed j that can have empty fibres: REDUCE would misalign, so the
    # sum over k is keyed by the held j coordinate and folded by SPACC1
    assert {NodeKind.CRD_HOLD, NodeKind.SPACC1} <= kinds["ttv"] and NodeKind.REDUCE not in kinds["ttv"]


def test_permuted_view_uses_a_permuted_copy() -> None:
    program = SUITE["permuted_view"].build()
    compiled = compile_program(program)
    (copy,) = compiled.permuted
    assert copy.source == "A" and copy.fmt.mode_order == (1, 0)
    assert copy.name in compiled.graphs[0].input_tensors()


def test_two_outputs_share_one_graph() -> None:
    compiled = compile_program(SUITE["two_outputs"].build(), Fusion.PARTIAL)
    (graph,) = compiled.graphs
    assert sorted(graph.output_tensors()) == ["Y1", "Y2"]


def test_fused_nested_matmul_has_no_intermediate() -> None:
    full = compile_program(SUITE["nested_matmul"].build(), Fusion.FULL)
    (graph,) = full.graphs
    assert "E" not in graph.tensors
    kinds = [n.kind for n in graph.nodes.values()]
    assert kinds.count(NodeKind.SPACC1) == 2  # reductions over k and j, accumulated in l


def test_reduce_is_used_only_under_full_rows() -> None:
    (graph,) = compile_program(SUITE["spmv"].build()).graphs  # A's rows are dense: never empty
    kinds = [n.kind for n in graph.nodes.values()]
    assert NodeKind.REDUCE in kinds and NodeKind.CRD_HOLD not in kinds
    (graph,) = compile_program(SUITE["spmv_csc"].build()).graphs  # j above i: accumulate
    kinds = [n.kind for n in graph.nodes.values()]
    assert NodeKind.SPACC1 in kinds and NodeKind.REDUCE not in kinds
