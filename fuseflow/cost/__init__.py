"""Cost estimates without simulating: FLOPs, bytes and cycles of a graph, a program or a model.

* :mod:`.graph` — tensor and stream statistics, the per-kind cost rules, the DRAM cost model, and
  the estimate of one graph or one compiled program;
* :mod:`.model` — the estimate of a compiled model (every step);
* :mod:`.rank` — fusion granularities and schedules of a model ranked by their estimates.
"""

from .graph import Estimate, TensorStats, estimate_graph, estimate_program, stats_of, uniform_stats
from .model import estimate_model
from .rank import Config, Ranking, rank_model

__all__ = [
    "Config",
    "Estimate",
    "Ranking",
    "TensorStats",
    "estimate_graph",
    "estimate_model",
    "estimate_program",
    "rank_model",
    "stats_of",
    "uniform_stats",
]
