"""The ``table`` pass: one fusion table per output of a fused group
(:func:`fuseflow.compiler.table.table_or_rejection`: factoring choice, cells, merges, reducers,
stored format); the stored formats it decides are what later groups read."""

from __future__ import annotations

from ..program import Rejected
from ..table import table_or_rejection
from .base import GroupIR, Pass, ProgramIR

__all__ = ["PASS", "tables_text"]


def _run(state: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.group is not None
    for o in g.group.outputs:
        t = table_or_rejection(g.group, o, state.options.factored)
        if isinstance(t, Rejected):
            return t
        g.tables.append(t)
    state.formats.update({t.output.tensor: t.out_fmt for t in g.tables})
    written = {t.output.tensor for t in g.tables}
    # an output converted on the host (pog._convert_output): later groups read its declared format
    state.formats.update({p.name: p.fmt for p in g.group.permuted if p.source in written})
    for v in g.group.views.values():
        state.formats.setdefault(v.tensor, v.fmt)
    return None


def tables_text(_: ProgramIR, g: GroupIR) -> str:
    """The text of the ``table`` and ``locate`` passes' output: each fusion table."""
    return "".join(f"fusion table for {t.output.tensor} (stored as {t.out_fmt}):\n{t.render()}\n"
                   for t in g.tables)


PASS = Pass("table", "one fusion table per group output (factoring choice, cells, merges, "
            "reducers, stored format)", "Group", "list[FusionTable]", _run, tables_text,
            needs=("fuse",))
