"""The ``verify`` pass: :meth:`fuseflow.ir.samml.Graph.verify` on every generated graph (ports,
stream types, parameters)."""

from __future__ import annotations

from ..program import Rejected
from .base import GroupIR, Pass, ProgramIR, graph_pass_text

__all__ = ["PASS"]


def _run(_: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.graph is not None
    g.graph.verify()
    return None


PASS = Pass("verify", "check the graph (ports, stream types, parameters)", "samml.Graph",
            "samml.Graph", _run, graph_pass_text, needs=("lower",))
