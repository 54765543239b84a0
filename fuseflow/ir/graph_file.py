"""Graph files: JSON checked against the published schema (``fuseflow/ir/graph.schema.json``,
format version 1) before it becomes a :class:`~fuseflow.ir.samml.Graph`, then the graph rules and
the resource caps -- every problem named by file, field and value.

Every command that reads a graph file goes through :func:`load_graph`; :meth:`Graph.from_json`
stays the unchecked constructor for trusted dictionaries (graphs the toolkit wrote itself)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from .json_file import JsonFileError, read_json
from .samml import Graph, GraphError, NodeKind
from .tensor import Format, TensorFormat

__all__ = ["GRAPH_FORMAT_VERSION", "MAX_DENSE_WORDS", "graph_schema", "load_graph", "reference_problems", "resource_problems",
           "schema_problems"]

GRAPH_FORMAT_VERSION = 1
# the largest dense part of one tensor (positions of its dense levels): 2**28 words is 1-2 GiB
# in a simulator and far beyond any FPGA's block RAM
MAX_DENSE_WORDS = 1 << 28
_MAX_REPORTED = 8  # schema problems listed before "... and N more"


@cache
def graph_schema() -> dict[str, Any]:
    """The JSON Schema of graph files (draft 2020-12): ``graph.schema.json`` with the node kinds
    filled in from the primitive declarations, in declaration order (a new kind needs no edit
    of the file)."""
    schema = json.loads(resources.files(__package__).joinpath("graph.schema.json").read_text())
    schema["$defs"]["node"]["properties"]["kind"]["enum"] = [k.value for k in NodeKind]
    return schema


def _field(path) -> str:
    """A JSON path as the user reads it: ``nodes[3].params.n``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def schema_problems(d: Any) -> list[str]:
    """Where ``d`` breaks the graph schema: one line per problem, naming the field and value."""
    validator = jsonschema.Draft202012Validator(graph_schema())
    errors = sorted(validator.iter_errors(d), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    out = []
    for e in errors[:_MAX_REPORTED]:
        if e.validator in ("additionalProperties", "required"):
            out.append(f"{_field(e.absolute_path)}: {e.message}")
        else:
            out.append(f"{_field(e.absolute_path)} = {_shown(e.instance)}: {_rule(e)}")
    if len(errors) > _MAX_REPORTED:
        out.append(f"... and {len(errors) - _MAX_REPORTED} more")
    return out


def _rule(e: jsonschema.ValidationError) -> str:
    """What the schema wants, in words."""
    v, want = e.validator, e.validator_value
    if v == "type":
        return f"must be {' or '.join(want) if isinstance(want, list) else want}"
    if v == "enum":
        return f"must be one of {', '.join(map(str, want))}"
    if v in ("minimum", "maximum"):
        return f"must be {'at least' if v == 'minimum' else 'at most'} {want}"
    if v == "pattern":
        return "must read 'node.port'" if want.startswith("^.+") else "must not contain '.'"
    if v in ("maxItems", "maxProperties", "minLength", "maxLength"):
        return e.message.split(" is ", 1)[-1] if " is " in e.message else e.message
    if v == "const":
        return f"must be {want}"
    return e.message


def resource_problems(g: Graph) -> list[str]:
    """The caps: the dense part of every tensor (product of its dense levels' dimensions) is at
    most :data:`MAX_DENSE_WORDS`."""
    out = []
    for name, spec in g.tensors.items():
        dims = [spec.shape[m] for m in spec.fmt.mode_order]
        dense = math.prod(d for d, f in zip(dims, spec.fmt.levels) if f is Format.DENSE)
        if dense > MAX_DENSE_WORDS:
            out.append(f"tensor {name!r}: its dense levels hold {dense} positions, over the limit of "
                       f"{MAX_DENSE_WORDS} (2**28); store a level compressed or use a smaller shape")
    return out


def reference_problems(g: Graph) -> list[str]:
    """Discarded ports and index ports that name no node or no output port of their node."""
    out = []
    refs = [("discard", p) for p in g.discards] + [(f"indices.{i}", p) for i, ps in g.indices.items() for p in ps]
    for where, ref in refs:
        node = g.nodes.get(ref.node)
        if node is None:
            out.append(f"{where}: {str(ref)!r} names no node {ref.node!r}")
        elif where == "discard" and ref.port not in node.outputs():
            out.append(f"{where}: node {ref.node!r} ({node.kind.value}) has no output port {ref.port!r}")
    return out


def graph_from_dict(d: Any, source: str) -> Graph:
    """A verified graph from a decoded graph file ``d``; :class:`GraphError` naming ``source``."""
    problems = schema_problems(d)
    if problems:
        raise GraphError(f"graph file {source!r} does not match the graph schema (format version "
                         f"{GRAPH_FORMAT_VERSION}):\n  - " + "\n  - ".join(problems))
    assert isinstance(d, Mapping)
    problems = []
    for name, t in d.get("tensors", {}).items():
        try:
            TensorFormat.from_json(t["format"])
        except ValueError as exc:
            problems.append(f"tensors.{name}.format: {exc}")
    if problems:
        raise GraphError(f"graph file {source!r}:\n  - " + "\n  - ".join(problems))
    try:
        g = Graph.from_json({k: v for k, v in d.items() if k != "format_version"}, source=source)
    except GraphError:
        raise
    except (ValueError, TypeError) as exc:  # a value the schema cannot express a rule for
        raise GraphError(f"graph file {source!r}: {exc}") from None
    try:
        g.verify()
    except GraphError as exc:
        raise GraphError(f"graph file {source!r}: {exc}") from None
    problems = resource_problems(g) + reference_problems(g)
    if problems:
        raise GraphError(f"graph file {source!r}:\n  - " + "\n  - ".join(problems))
    return g


def load_graph(path: str | Path) -> Graph:
    """Read, check and verify the graph file ``path``."""
    p = Path(path)
    try:
        d = read_json(p, "graph file")
    except JsonFileError as exc:
        raise GraphError(str(exc)) from None
    return graph_from_dict(d, str(p))
