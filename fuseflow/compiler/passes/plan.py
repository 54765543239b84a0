"""The ``plan`` pass: the program's fusion regions cut into graphs (groups), with the one choice
between schedules decided up front: whether a region is split where a reduced intermediate is
read under an addition.  With factored iteration it runs the analysis passes (:data:`ANALYSIS`)
on the unsplit regions and splits only when they reject the program with a reason a split
resolves."""

from __future__ import annotations

from ...options import Kind, Option, Source
from ..fusion import Fusion, plan_groups
from ..program import Rejected
from . import block, fuse, table
from .base import GroupIR, Pass, ProgramIR, run_passes

__all__ = ["ANALYSIS", "FACTORED", "FUSION", "ORDERS", "PASS"]

FUSION = Option("fusion", Kind.CHOICE, Fusion.FULL,
                "one graph per statement, per declared region, or for the whole program",
                choices=tuple(f.value for f in Fusion), cli=False, sweep=False)
ORDERS = Option("orders", Kind.TEXT_MAP, None,
                "dataflow order of the statement computing TENSOR, in its own index letters "
                "(e.g. T=ikj)", sources=Source.PROGRAM, metavar="TENSOR=ORDER", cli=False,
                sweep=False)
FACTORED = Option("factored", Kind.FLAG, True,
                  "factored iteration for every reduced intermediate it applies to (off: one "
                  "iteration space per output)", cli=False, schedule=False, sweep=False)


def _run(state: ProgramIR, _: GroupIR) -> Rejected | None:
    opts = state.options
    if state.split_adds is None:
        why = _split_check(state)
        if why is not None and not why.split:
            return why
        state.split_adds = why is not None
        state.split_reason = why.reason if why is not None else ""
    program = state.program
    state.formats = {n: d.fmt for n, d in program.decls.items()
                     if d.fmt is not None and n not in {s.out for s in program.statements}}
    plans = plan_groups(program, opts.fusion, opts.orders, state.split_adds)
    state.groups = [GroupIR(k, p) for k, p in enumerate(plans)]
    return None


def _split_check(state: ProgramIR) -> Rejected | None:
    """Whether the fusion regions must be split where a reduced intermediate is read under an
    addition: always without factored iteration (one iteration space per output needs a sum of
    products); with it, only if the analysis passes reject the unsplit regions (the verdict,
    with ``split`` set when a split resolves it)."""
    if not state.options.factored:
        return Rejected("factored iteration is off: a reduction under an addition needs its own "
                        "graph", split=True)
    trial = ProgramIR(state.program, state.options, state.source, split_adds=False)
    return run_passes(trial, ANALYSIS)


def _text(state: ProgramIR, _: GroupIR) -> str:
    split = f"yes ({state.split_reason})" if state.split_adds else "no"
    lowering = "factored iteration" if state.options.factored else "one iteration space"
    lines = [f"program {state.program.name}: fusion {state.options.fusion.value}, {lowering}",
             f"region split under additions: {split}"]
    for g in state.groups:
        lines.append(f"graph {g.plan.name}: " + "; ".join(s.text for s in g.plan.part))
        lines.append("  materialises " + ", ".join(s.out for s in g.plan.outs))
        if g.plan.note:
            lines.append(f"  note: {g.plan.note}")
    return "\n".join(lines) + "\n"


PASS = Pass("plan", "split the program into fusion regions and those into graphs (region splits "
            "decided up front)", "Program", "list[GroupPlan]", _run, _text, per_group=False,
            options=(FUSION, ORDERS, FACTORED), needs=("block",))
# the passes that decide whether a program compiles (nothing generated)
ANALYSIS: tuple[Pass, ...] = (block.PASS, PASS, fuse.PASS, table.PASS)
