"""Factored iteration (the default lowering): reduced intermediates keep their own pipeline;
their reducer's coordinate output feeds a later joiner and their values travel through the
joiner's value-typed reference ports (``val_refs``) and value repeats (``stream=val``)."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_programs import SUITE, random_inputs

from fuseflow.compiler import Fusion, Program, compile_program, einsum, reference, run_program
from fuseflow.ir.samml import Graph, GraphError, NodeKind, StreamKind
from sw_sim import run_graph

JOINERS = (NodeKind.INTERSECT, NodeKind.UNION)


def feeds(graph: Graph, src: str, port: str) -> list[tuple[str, str]]:
    """Final consumers (node, port) of ``src.port``, looking through broadcasts."""
    out = []
    for e in graph.edges:
        if e.src.node == src and e.src.port == port:
            if graph.nodes[e.dst.node].kind is NodeKind.BROADCAST:
                for p in graph.nodes[e.dst.node].outputs():
                    out += feeds(graph, e.dst.node, p)
            else:
                out.append((e.dst.node, e.dst.port))
    return out


@pytest.mark.parametrize("name", sorted(SUITE))
def test_global_iteration_matches_numpy(name: str) -> None:
    # the suite tests the default (factored) lowering; this covers the other one
    case = SUITE[name]
    program = case.build()
    compiled = compile_program(program, Fusion.FULL, factored=False)
    for seed in (1, 2):
        data = random_inputs(program, case.density, seed)
        result = run_program(compiled, data, simulate=run_graph)
        for k, want in reference(program, data).items():
            np.testing.assert_array_equal(result.dense(k), want, err_msg=k)


def test_nested_matmul_reducer_coordinates_feed_a_later_joiner() -> None:
    # C is dense, so by default the accumulator's coordinates locate into C (no joiner): the
    # joiner path is what a compressed C would take, compiled here with locate off
    compiled = compile_program(SUITE["nested_matmul"].build(), locate=False)
    (graph,) = compiled.graphs
    spaccs = [n for n in graph.nodes.values() if n.kind is NodeKind.SPACC1]
    assert len(spaccs) == 2
    fed = [(n.name, dst) for n in spaccs for dst in feeds(graph, n.name, "crd")
           if graph.nodes[dst[0]].kind in JOINERS]
    assert len(fed) == 1  # E's accumulator (over k) drives the intersection over j with C
    acc, (joiner, port) = fed[0]
    assert port.startswith("crd")
    # and its values enter the same joiner on the paired reference port, typed as values
    assert (joiner, "ref" + port[3:]) in feeds(graph, acc, "val")
    assert int(port[3:]) in graph.nodes[joiner].param("val_refs")
    (located,) = compile_program(SUITE["nested_matmul"].build()).graphs
    fed = [(n.name, dst) for n in located.nodes.values() if n.kind is NodeKind.SPACC1
           for dst in feeds(located, n.name, "crd") if located.nodes[dst[0]].kind is NodeKind.LOCATE]
    assert [port for _, (_, port) in fed] == ["inner"]


def test_value_routing_uses_value_typed_ports_and_verifies() -> None:
    # with locate off: the dense operand is intersected, so T0's values enter a joiner
    compiled = compile_program(SUITE["graphsage_nbor"].build(), locate=False)
    (cg,) = compiled.groups
    assert cg.factored == ["T0"]
    graph = cg.graph
    graph.verify()
    joiners = [n for n in graph.nodes.values() if n.kind in JOINERS and n.param("val_refs")]
    repeats = [n for n in graph.nodes.values()
               if n.kind is NodeKind.REPEAT and n.param("stream") is StreamKind.VAL]
    assert joiners and repeats
    # the value stream really enters the joiner there: without the port typing verify rejects it
    del joiners[0].params["val_refs"]
    with pytest.raises(GraphError, match="a val stream drives a ref port"):
        graph.verify()
    # the single-iteration-space lowering of the same program has no value routing
    (plain,) = compile_program(SUITE["graphsage_nbor"].build(), factored=False).groups
    assert plain.factored == []
    assert not any(n.param("val_refs") for n in plain.graph.nodes.values() if n.kind in JOINERS)
    assert "single iteration space (T0 inlined; factored iteration disabled)" in plain.explain()
    assert "lowering: factored iteration (own pipelines for T0)" in cg.explain()


def test_factored_gcn_layer_is_one_graph_and_beats_unfused() -> None:
    case = SUITE["gcn_layer"]
    program = case.build()
    factored = compile_program(program, Fusion.FULL)
    assert len(factored.graphs) == 1  # the bias add unites with the reducer's output
    unions = [n for n in factored.graphs[0].nodes.values() if n.kind is NodeKind.UNION]
    assert unions
    data = random_inputs(program, case.density, 3)
    unfused = run_program(compile_program(program, Fusion.UNFUSED), data, simulate=run_graph).total_cycles
    fused = run_program(factored, data, simulate=run_graph).total_cycles
    assert fused < unfused


def test_residual_shares_a_full_row_with_the_intermediate() -> None:
    # Y = A·X + X: X's dense rows enumerate i like A·X's do, so no merge is needed at i and the
    # skip connection is added by a union at j inside one graph
    compiled = compile_program(SUITE["residual"].build(), Fusion.FULL)
    (cg,) = compiled.groups
    assert cg.factored
    assert "Union_j(Y_t0, X')" in cg.tables[0].render()


def test_unfactorable_reduction_under_addition_falls_back_to_a_split() -> None:
    # B's compressed rows would have to filter the reduced term's nested fibres at i, which a
    # value stream cannot do: the compiler materialises A·X instead.
    p = Program("residual_sparse")
    A = p.tensor("A", (6, 6), "csr")
    X = p.tensor("X", (6, 4), "dense")
    B = p.tensor("B", (6, 4), "dcsr")
    p.output(p.let("Y", einsum("ik,kj->ij", A, X) + B))
    compiled = compile_program(p, Fusion.FULL)
    assert len(compiled.graphs) == 2
    assert all(not cg.factored for cg in compiled.groups)
    data = random_inputs(p, {"A": 0.3, "B": 0.3}, 1)
    result = run_program(compiled, data, simulate=run_graph)
    np.testing.assert_array_equal(result.dense("Y"), reference(p, data)["Y"])
