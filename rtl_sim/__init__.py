"""rtl_sim: cocotb + Verilator verification of the RTL, primitive by primitive and whole graphs."""

from .api import RtlResult, run_graph, run_graph_batch, run_primitive_batch, simulate_primitive
from .toolchain import ToolchainError, ensure_verilator

__all__ = [
           "RtlResult",
           "ToolchainError",
           "ensure_verilator",
           "run_graph",
           "run_graph_batch",
           "run_primitive_batch",
           "simulate_primitive",
]
