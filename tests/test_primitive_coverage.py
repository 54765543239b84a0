"""Every declared primitive kind has exactly what the architecture promises: one sw_sim model, one
RTL model and one cost rule, each registered from the file of its declaration's family name, a
place in the graph schema's kind list, and vectors in the primitive test corpus (which the sw_sim
tests and the RTL-vs-sw_sim tests run).  Nothing
outside the registries and the compiler dispatches on kind names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from vectors import all_vectors

import hw.registry
import sw_sim.registry
from fuseflow.cost.rules import RULES
from fuseflow.ir.graph_file import graph_schema
from fuseflow.ir.primitives import FAMILIES, PRIMITIVES, NodeKind, primitives_table
from sw_sim import simulate_primitive

ROOT = Path(__file__).resolve().parent.parent
KINDS = sorted(PRIMITIVES, key=lambda k: k.value)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.value)
def test_kind_has_one_sw_model_in_its_family_file(kind):
    fn = sw_sim.registry.models().get(kind)
    assert fn is not None, f"no sw_sim model registered for {kind.value!r}"
    assert fn.__module__ == f"sw_sim.{PRIMITIVES[kind].family}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.value)
def test_kind_has_one_rtl_model_in_its_family_file(kind):
    fn = hw.registry.models().get(kind)
    assert fn is not None, f"no RTL model registered for {kind.value!r}"
    assert fn.__module__ == f"hw.{PRIMITIVES[kind].family}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.value)
def test_kind_has_one_cost_rule_in_its_family_file(kind):
    fn = RULES.models().get(kind)
    assert fn is not None, f"no cost rule registered for {kind.value!r} (fuseflow/cost/rules/)"
    assert fn.__module__ == f"fuseflow.cost.rules.{PRIMITIVES[kind].family}"


def test_graph_schema_lists_every_kind():
    """The graph schema's node kinds are the declared kinds, in declaration order, and the file
    names none by hand (a new kind needs no edit of it); a graph file with an undeclared kind is
    refused, naming the field and the kind."""
    import json

    from fuseflow.ir.graph_file import schema_problems

    assert graph_schema()["$defs"]["node"]["properties"]["kind"]["enum"] == [k.value for k in NodeKind]
    raw = json.loads((ROOT / "fuseflow/ir/graph.schema.json").read_text())
    assert "enum" not in raw["$defs"]["node"]["properties"]["kind"]
    problems = schema_problems({"format": 1, "name": "g", "nodes": [{"name": "a", "kind": "nosuch"}], "edges": []})
    assert any("nodes[0].kind" in p and "nosuch" in p for p in problems), problems


def test_every_kind_has_corpus_vectors():
    covered = {v.kind for v in all_vectors()}
    missing = sorted(k.value for k in PRIMITIVES if k.value not in covered)
    assert not missing, f"no vectors in tests/vectors.py for {missing}"


def test_corpus_vectors_run_with_declared_ports():
    """Each corpus vector drives exactly its kind's declared input ports and yields its outputs."""
    for v in all_vectors():
        spec = PRIMITIVES[NodeKind(v.kind)]
        ins, outs = spec.ports(v.params)
        assert set(v.inputs) == set(ins), v
        res = simulate_primitive(v.kind, v.inputs, **v.params, **v.memory)
        assert set(outs) <= set(res), v
        if v.expected:
            assert {p: res[p] for p in v.expected} == v.expected, v


def test_registering_a_kind_twice_is_refused():
    sw_sim.registry.models(), hw.registry.models(), RULES.models()  # every kind registered once
    with pytest.raises(RuntimeError, match="two cycle models for 'scan'"):
        sw_sim.registry.model("scan")(lambda b: None)
    with pytest.raises(RuntimeError, match="two RTL models for 'scan'"):
        hw.registry.rtl("scan")(lambda b: None)
    with pytest.raises(RuntimeError, match="two cost rules for 'scan'"):
        RULES.register("scan")(lambda c, node, ins: {})


def test_families_are_mirrored_file_for_file():
    for family in FAMILIES:
        for pkg in ("sw_sim", "hw"):
            assert (ROOT / pkg / f"{family}.py").exists(), f"{pkg}/{family}.py missing"
        assert (ROOT / "fuseflow" / "ir" / "primitives" / f"{family}.py").exists()
        assert (ROOT / "fuseflow" / "cost" / "rules" / f"{family}.py").exists()


def _kind_attributes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path.relative_to(ROOT)}:{n.lineno} NodeKind.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "NodeKind"]


def test_simulators_do_not_dispatch_on_kind_names():
    """sw_sim, hw, rtl_sim and fpga find models through the registries and tensor uses through
    the declarations: none of them names a NodeKind member."""
    hits = [h for pkg in ("sw_sim", "hw", "rtl_sim", "fpga") for f in sorted((ROOT / pkg).rglob("*.py"))
            for h in _kind_attributes(f)]
    assert not hits, hits


def test_docs_primitive_table_is_the_declarations():
    """docs/primitives.md carries the table generated from the declarations."""
    text = (ROOT / "docs" / "primitives.md").read_text()
    assert primitives_table() in text, "regenerate with: python tools/gen_docs.py"


def test_architecture_doc_code_is_the_code():
    """Every code block of docs/architecture.md that names a file (``# file: path``) is a
    verbatim excerpt of that file, so the worked examples stay real."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    blocks = [b.split("```")[0] for b in text.split("```python\n")[1:]]
    named = [b for b in blocks if b.startswith("# file: ")]
    assert named
    for b in named:
        head, _, body = b.partition("\n")
        path = ROOT / head.removeprefix("# file: ").strip()
        assert body.strip("\n") in path.read_text(), f"docs/architecture.md quotes {path} out of date"
