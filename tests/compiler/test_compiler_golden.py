"""Golden text of every pass's output IR for the paper's running examples.

For each example and each pass of :data:`fuseflow.compiler.PIPELINE` the text that
``dump_ir(program, pass)`` prints (``fuseflow-hw compile --dump-after PASS``) is kept in
``golden/<example>.<pass>.txt``: the group plans (``plan``), fused einsum, POG and order
(``fuse``), fusion tables (``table``), the graph before FIFO sizing (``lower``), after it
(``fifo``) and verified (``verify``).

Regenerate with ``FUSEFLOW_REGEN_GOLDEN=1 pytest tests/compiler/test_compiler_golden.py`` and review the
diff against the paper's figures (docs/compiler.md records the comparison).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from compiler_programs import one_statement

from fuseflow.compiler import PIPELINE, Options, Program, catalog, compile_program, dump_ir, einsum
from fuseflow.kernels import spmm as hand_spmm
from fuseflow.ir.samml import Graph
from fuseflow.ir.tensor import DENSE2

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("FUSEFLOW_REGEN_GOLDEN") == "1"


def spmm() -> Program:
    """Paper Fig. 'fusion table construction': T_ij = A_ik X_kj, order i -> k -> j."""
    return one_statement("spmm", [("A", (8, 8), "csr"), ("X", (8, 4), "dense")], "T",
                         lambda A, X: einsum("ik,kj->ij", A, X), order="ikj")


def graphsage() -> Program:
    """Paper appendix: T^nbor_ij = A_il X_lm Omega_mj, order i -> l -> m -> j."""
    return catalog.graphsage(8, 6, 4)


def graphsage_factored() -> Program:
    """The same program lowered with factored iteration (compare with the paper's table)."""
    return graphsage()


def split_sum() -> Program:
    """``Y = A·X + B`` with B's rows compressed: factored iteration cannot take the reduction
    under the addition, so the plan pass splits the region (two graphs)."""
    p = Program("split_sum")
    A = p.tensor("A", (8, 8), "csr")
    X = p.tensor("X", (8, 4), "dense")
    B = p.tensor("B", (8, 4), "dcsr")
    T = p.let("T", einsum("ik,kj->ij", A, X))
    p.output(p.let("Y", T + B))
    return p


EXAMPLES = {spmm: False, graphsage: False, graphsage_factored: True, split_sum: True}


@pytest.mark.parametrize("example", list(EXAMPLES), ids=lambda f: f.__name__)
@pytest.mark.parametrize("pass_name", [p.name for p in PIPELINE])
def test_golden(example, pass_name: str) -> None:
    text = dump_ir(example(), pass_name, Options(factored=EXAMPLES[example]))
    path = GOLDEN / f"{example.__name__}.{pass_name}.txt"
    if REGEN:
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with FUSEFLOW_REGEN_GOLDEN=1"
    assert text == path.read_text()


def test_graphsage_graph_is_valid_and_fused() -> None:
    compiled = compile_program(graphsage())
    (graph,) = compiled.graphs
    graph.verify()
    assert "T0" not in graph.tensors


def test_compiled_spmm_has_the_hand_written_kernels_primitives() -> None:
    (graph,) = compile_program(spmm()).graphs
    hand = hand_spmm(8, 8, 4, DENSE2)

    def shape(g: Graph) -> Counter:  # (kind, port) -> (kind, port), broadcast outputs unnumbered
        def src(e):
            kind = g.nodes[e.src.node].kind.value
            return kind, "out" if kind == "broadcast" else e.src.port

        return Counter((*src(e), g.nodes[e.dst.node].kind.value, e.dst.port) for e in g.edges)

    assert Counter(n.kind for n in graph.nodes.values()) == Counter(n.kind for n in hand.nodes.values())
    assert shape(graph) == shape(hand)
