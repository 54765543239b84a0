"""Golden text of the paper's running examples: fused einsum, POG, fusion table and graph.

Regenerate with ``FUSEFLOW_REGEN_GOLDEN=1 pytest tests/compiler/test_compiler_golden.py`` and review the
diff against the paper's figures (docs/compiler.md records the comparison).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from example_programs import load_example

from fuseflow.compiler import Program, compile_program
from fuseflow.samml import Graph

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("FUSEFLOW_REGEN_GOLDEN") == "1"


def spmm() -> Program:
    """Paper Fig. 'fusion table construction': T_ij = A_ik X_kj, order i -> k -> j."""
    return load_example("spmm").program(8, 4)


def graphsage() -> Program:
    """Paper appendix: T^nbor_ij = A_il X_lm Omega_mj, order i -> l -> m -> j."""
    return load_example("graphsage").program(8, 6, 4)


def graph_text(g: Graph) -> str:
    lines = [f"graph {g.name}"]
    for name, t in g.tensors.items():
        lines.append(f"tensor {name} {t.role.value} {list(t.shape)} {t.fmt}")
    for n in g.nodes.values():
        params = " ".join(f"{k}={v.value if hasattr(v, 'value') else v}" for k, v in n.params.items())
        lines.append(f"node {n.name} {n.kind.value} {params}".rstrip())
    for e in g.edges:
        lines.append(f"edge {e}" + (f" depth={e.depth}" if e.depth is not None else ""))
    for d in sorted(map(str, g.discards)):
        lines.append(f"discard {d}")
    return "\n".join(lines) + "\n"


def graphsage_factored() -> Program:
    """The same program lowered with factored iteration (compare with the paper's table)."""
    return graphsage()


def render(program: Program, factored: bool = False) -> dict[str, str]:
    compiled = compile_program(program, factored=factored)
    (cg,) = compiled.groups
    g = cg.group
    return {
        "fused_einsum": g.fused_einsum() + "\n",
        "pog": g.pog_text() + f"\norder: {' -> '.join(g.order)}\n",
        "table": "\n".join(t.render() for t in cg.tables) + "\n",
        "graph": graph_text(cg.graph),
    }


@pytest.mark.parametrize("example", [spmm, graphsage, graphsage_factored], ids=lambda f: f.__name__)
@pytest.mark.parametrize("part", ["fused_einsum", "pog", "table", "graph"])
def test_golden(example, part: str) -> None:
    text = render(example(), factored=example is graphsage_factored)[part]
    path = GOLDEN / f"{example.__name__}.{part}.txt"
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
    from collections import Counter

    from fuseflow.kernels import spmm as hand_spmm
    from fuseflow.tensor import DENSE2

    (graph,) = compile_program(spmm()).graphs
    hand = hand_spmm(8, 8, 4, DENSE2)

    def shape(g: Graph) -> Counter:  # (kind, port) -> (kind, port), broadcast outputs unnumbered
        def src(e):
            kind = g.nodes[e.src.node].kind.value
            return kind, "out" if kind == "broadcast" else e.src.port

        return Counter((*src(e), g.nodes[e.dst.node].kind.value, e.dst.port) for e in g.edges)

    assert Counter(n.kind for n in graph.nodes.values()) == Counter(n.kind for n in hand.nodes.values())
    assert shape(graph) == shape(hand)
