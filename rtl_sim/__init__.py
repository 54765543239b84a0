"""rtl_sim: Verilator verification of the RTL, primitive by primitive (cocotb) and whole graphs
(cocotb or the compiled native harness of ``rtl_sim/native.py``)."""

from .api import RtlResult, run_graph, run_graph_batch, run_primitive_batch, simulate_primitive
from .native import RtlTimeout
from .toolchain import ToolchainError, ensure_verilator

__all__ = [
           "RtlResult",
           "RtlTimeout",
           "ToolchainError",
           "ensure_verilator",
           "run_graph",
           "run_graph_batch",
           "run_primitive_batch",
           "simulate_primitive",
]
