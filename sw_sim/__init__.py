"""sw_sim: a cycle model of SAMML graphs (values and cycle counts), driven by the graph data.

One model per primitive kind, in files named after the declaration families of
:mod:`fuseflow.ir.primitives` (``level``, ``join``, ``repeat``, ``coord``, ``memory``, ``alu``,
``nonlinear``, ``accumulate``, ``mask``, ``stream``, ``parallel``) and registered by kind in
:mod:`sw_sim.registry`.  Each class mirrors the micro-architecture of the RTL primitive of the
same name in the same-named file of ``hw/`` decision for decision; its docstring states the
per-cycle rules.  Common rule: a primitive acts in a cycle only when every one of its output
FIFOs has room ("fire"), except where a docstring says otherwise (writers have no outputs; the
front stage of the memory-reading primitives fills its pipeline register independently).

The hot modules run compiled (Cython) when they can: :mod:`sw_sim.native`.
"""

from . import native

native.activate(__path__)  # before any model module is imported

from .engine import DeadlockError, NodeStats, ProtocolError, SimError
from .run import PrimitiveResult, SimResult, run_graph, simulate_primitive

ENGINE = native.ENGINE  # "compiled" or "python"

__all__ = [
           "ENGINE",
           "DeadlockError",
           "NodeStats",
           "PrimitiveResult",
           "ProtocolError",
           "SimError",
           "SimResult",
           "run_graph",
           "simulate_primitive",
]
