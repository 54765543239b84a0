"""What the core asks of a simulator.

The core never imports a simulator: code that runs graphs (:func:`fuseflow.compiler.run_program`,
:func:`fuseflow.models.plan.run_model`, the suite cases that need intermediates) takes one as an
argument.  ``sw_sim.run_graph`` is one; the CLI, tests and benchmarks pass it in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .overflow import Overflow
from .samml import Graph
from .tensor import TensorData

__all__ = ["SimRun", "Simulator", "graph_overflow_records", "graph_overflows"]


class SimRun(Protocol):
    """The part of a simulation result the core reads (``sw_sim.SimResult`` has more)."""

    @property
    def outputs(self) -> Mapping[str, TensorData]: ...

    @property
    def cycles(self) -> int: ...


class Simulator(Protocol):
    """Runs ``graph`` on ``data`` (input tensor name -> data); ``options`` are the simulator's
    own (for ``sw_sim.run_graph``: ``numerics``, ``val_width``, ``max_cycles``, …)."""

    def __call__(self, graph: Graph, data: Mapping[str, TensorData], /, **options: Any) -> SimRun: ...


def graph_overflows(graph: str, res: SimRun) -> dict[str, int]:
    """A simulator result's overflow counts keyed ``graph/node`` (none if it reports none)."""
    return {f"{graph}/{n}": k for n, k in (getattr(res, "overflows", None) or {}).items()}


def graph_overflow_records(graph: str, res: SimRun) -> list[Overflow]:
    """A simulator result's overflows as :class:`~fuseflow.ir.overflow.Overflow` records named
    ``graph/node``: sw_sim's (``overflow_records``: counts and magnitudes), else the flags a
    result reports (``overflows``: count only)."""
    records = getattr(res, "overflow_records", None)
    if records is not None:
        return [Overflow(f"{graph}/{o.node}", o.count, o.peak, o.numerics) for o in records]
    fmt = str(getattr(res, "numerics", "") or "unknown format")
    return [Overflow(f"{graph}/{n}", k, None, fmt) for n, k in (getattr(res, "overflows", None) or {}).items()]
