"""The ``fuse`` pass: cross-expression fusion of one group (:func:`fuseflow.compiler.fusion.fuse`:
fresh indices, inlining, tensor views, partial order graph, permuted copies), and its dataflow
order: the first lowerable topological order of the POG, or the one ``fused_orders`` gives."""

from __future__ import annotations

from ...options import Kind, Option, Source
from ..fusion import fuse, order_problem
from ..program import FusionError, Rejected
from .base import GroupIR, Pass, ProgramIR, indent

__all__ = ["FUSED_ORDERS", "PASS"]

FUSED_ORDERS = Option("fused_orders", Kind.ANY, None,
                      "full fused order of graph number GRAPH (e.g. 0=i,u0,j), checked against "
                      "its partial order graph", sources=Source.PROGRAM, metavar="GRAPH=ORDER",
                      cli=False, schedule=False, sweep=False)


def _run(state: ProgramIR, g: GroupIR) -> Rejected | None:
    group = fuse(state.program, g.plan, state.formats)
    if isinstance(group, Rejected):
        return group
    fused_orders = state.options.fused_orders
    if fused_orders and g.index in fused_orders:
        why = order_problem(group, fused_orders[g.index])
        if why:
            return Rejected(why, FusionError)
        group.order = tuple(fused_orders[g.index])
    g.group = group
    state.permuted += group.permuted
    return None


def _text(_: ProgramIR, g: GroupIR) -> str:
    group = g.group
    assert group is not None
    capped = "+ (capped)" if group.orders_capped else ""
    lines = ["fused einsum:", indent(group.fused_einsum()),
             "partial order graph:", indent(group.pog_text()),
             f"valid dataflow orders: {group.orders_count}{capped} ({group.lowerable_count} lowerable)",
             f"order: {' -> '.join(group.order)}"]
    lines += [f"permuted copy: {p.name} = {p.source} stored as {p.fmt} ({p.reason})"
              for p in group.permuted]
    lines += [f"note: {n}" for n in group.notes]
    return "\n".join(lines) + "\n"


PASS = Pass("fuse", "cross-expression fusion: fresh indices, inlining, tensor views, partial order "
            "graph, permuted copies, dataflow order", "GroupPlan", "Group", _run, _text,
            options=(FUSED_ORDERS,), needs=("plan",))
