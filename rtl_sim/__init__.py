"""rtl_sim: verification of the RTL, primitive by primitive (Verilator + cocotb) and whole graphs
(Verilator with cocotb or the compiled native harness of ``rtl_sim/native.py``, or amaranth.sim
with ``rtl_sim/amaranth_sim.py``)."""

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
