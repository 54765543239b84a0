"""What a compiler pass is: its declaration (:class:`Pass`) and the IR the passes rewrite
(:class:`ProgramIR`, :class:`GroupIR`).

A pass declares its name, what it does, the IR it reads and writes, its options
(:class:`~fuseflow.options.Option`: type, range, units, help, the sources they apply to) and the
passes whose output it needs.  The pipeline (:mod:`fuseflow.compiler.pipeline`) lists the
passes in order; everything that names a pass option (the compile options, schedule files,
command-line flags, ``--list-passes``, sweep files) reads these declarations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...ir.samml import Graph
from ...ir.tensor import TensorFormat
from ...options import Option
from ..fused import Group, PermutedCopy
from ..fusion import GroupPlan
from ..program import Program, Rejected
from ..table_records import FusionTable

__all__ = ["GroupIR", "Pass", "ProgramIR", "graph_text", "indent", "run_passes"]


@dataclass
class GroupIR:
    """One graph's IR as the group passes rewrite it: each pass fills the next field."""

    index: int
    plan: GroupPlan
    group: Group | None = None
    tables: list[FusionTable] = field(default_factory=list)
    graph: Graph | None = None
    seconds: float = 0.0
    parallel: list = field(default_factory=list)  # the par pass's ParallelRegions


@dataclass
class ProgramIR:
    """The whole compilation: the program, its options (:class:`~fuseflow.compiler.pipeline.
    Options`), the plan pass's decision and the groups.  ``formats``: the stored format of every
    tensor a graph so far reads or writes."""

    program: Program
    options: Any
    source: Program | None = None  # the program as written, when the block pass rewrote it
    split_adds: bool | None = None  # None: the plan pass decides
    split_reason: str = ""
    groups: list[GroupIR] = field(default_factory=list)
    formats: dict[str, TensorFormat] = field(default_factory=dict)
    permuted: list[PermutedCopy] = field(default_factory=list)


Run = Callable[[ProgramIR, GroupIR], Rejected | None]
Text = Callable[[ProgramIR, GroupIR], str]


@dataclass(frozen=True)
class Pass:
    """One compiler pass: ``run`` rewrites the IR in place and returns None, or the reason its
    input cannot be realised; ``text`` renders its output IR.  A program pass (``per_group``
    false) runs once, with the first group as a placeholder argument; the others once per
    group.  ``options``: what it takes (fields of the compile options); ``needs``: the passes
    whose output it reads (earlier in the pipeline)."""

    name: str
    description: str
    input_ir: str
    output_ir: str
    run: Run
    text: Text
    per_group: bool = True
    options: tuple[Option, ...] = ()
    needs: tuple[str, ...] = ()


Dump = Callable[[str, str, str], None]  # (pass name, graph name or program name, text)


def run_passes(state: ProgramIR, passes: Sequence[Pass], dump_after: str | None = None,
               on_dump: Dump | None = None) -> Rejected | None:
    """Run ``passes`` (program passes first, then the group passes group by group); None, or
    the first pass's rejection."""
    def after(p: Pass, g: GroupIR, name: str) -> None:
        if p.name == dump_after and on_dump is not None:
            on_dump(p.name, name, p.text(state, g))

    placeholder = GroupIR(-1, GroupPlan(state.program.name, [], []))
    for p in (p for p in passes if not p.per_group):
        why = p.run(state, placeholder)
        if why is not None:
            return why
        after(p, placeholder, state.program.name)
    group_passes = [p for p in passes if p.per_group]
    for g in state.groups:
        t0 = time.perf_counter()
        for p in group_passes:
            why = p.run(state, g)
            if why is not None:
                return why
            after(p, g, g.plan.name)
        g.seconds = time.perf_counter() - t0
    return None


def graph_text(g: Graph) -> str:
    """A graph as text: tensors, nodes with their parameters, edges with FIFO depths, discarded
    ports (the text form of the ``lower``, ``fifo`` and ``verify`` passes' output)."""
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


def graph_pass_text(_: ProgramIR, g: GroupIR) -> str:
    """The text of a graph pass's output: the group's graph."""
    assert g.graph is not None
    return graph_text(g.graph)


def indent(text: str) -> str:
    return "\n".join("  " + ln for ln in text.splitlines())
