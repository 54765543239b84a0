"""hw: Amaranth SAMML primitive library and the graph elaborator (SAMML graph -> RTL top).

One RTL model per primitive kind, in files named after the declaration families of
:mod:`fuseflow.ir.primitives` (``level``, ``join``, ``repeat``, ``coord``, ``memory``, ``alu``,
``nonlinear``, ``accumulate``, ``mask``, ``stream``, ``parallel``) and registered by kind in
:mod:`hw.registry`.  Each mirrors the cycle model of the same name in the same-named file of
``sw_sim/`` decision for decision; see the docstrings there for the per-cycle rules and the
declarations for latency and II.  Value arithmetic is generated in :mod:`hw.arith`.

Widths: ``cw`` is the data width of crd / ref / repsig streams, ``vw`` of val streams.
Memories that hold tensor levels are synchronous-read (block RAM); a read issued in cycle
``t`` returns data in ``t + 1``.  The scanner's coordinate memory is addressed with the
next-state position so that ``crd[p]`` is ready in the cycle ``p`` is current.
"""

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
