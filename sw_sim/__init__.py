"""sw_sim: a cycle model of SAMML graphs (values and cycle counts), driven by the graph data."""

from .engine import DeadlockError, NodeStats, ProtocolError, SimError
from .run import PrimitiveResult, SimResult, run_graph, simulate_primitive

__all__ = [
           "DeadlockError",
           "NodeStats",
           "PrimitiveResult",
           "ProtocolError",
           "SimError",
           "SimResult",
           "run_graph",
           "simulate_primitive",
]
