"""hw: Amaranth SAMML primitive library and the graph elaborator (SAMML graph -> RTL top)."""

from .build import build_graph, to_verilog
from .elaborate import (
           GraphTop,
           HwConfig,
           MemoryMap,
           PrimitiveHarness,
           make_primitive,
           tensor_capacities,
)

__all__ = [
           "GraphTop",
           "HwConfig",
           "MemoryMap",
           "PrimitiveHarness",
           "build_graph",
           "make_primitive",
           "tensor_capacities",
           "to_verilog",
]
