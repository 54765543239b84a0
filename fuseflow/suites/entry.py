"""Correlation cases as plain data: what a suite lists and ``rtl_sim.correlate`` runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..ir.samml import Graph
from ..ir.simulator import Simulator
from ..ir.tensor import TensorData

__all__ = ["Case", "SuiteEntry"]

# a graph, its input tensors and the numpy value of its output (None: no independent reference)
Case = tuple[Graph, dict[str, TensorData], np.ndarray | None]


@dataclass
class SuiteEntry:
    """One case of a correlation suite (:mod:`fuseflow.suites`).

    ``make(simulate)`` builds the case; ``simulate`` computes the intermediates a case of a
    multi-graph program reads (cases of one graph ignore it).  Entries whose ``make`` is a
    module-level function or a :func:`functools.partial` of one can go to worker processes.
    """

    name: str
    model: str  # colour group in the correlation plot
    make: Callable[[Simulator], Case]
