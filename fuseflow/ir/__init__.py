"""The SAMML IR, the contract every package imports: tokens and their hardware words, tensor
formats and data, value numerics, the primitive declarations (:mod:`.primitives`), graphs with
their verifier (:mod:`.samml`), checks of tensor data (:mod:`.validate`), graph files and their
schema (:mod:`.graph_file`, ``graph.schema.json``), a graph builder, the memory system and what
the core asks of a simulator (:mod:`.simulator`)."""


from .numerics import Numerics
from .samml import (
    PRIMITIVES,
    AluOp,
    Edge,
    Graph,
    GraphError,
    Node,
    NodeKind,
    PortRef,
    ReduceOp,
    Role,
    StreamKind,
    TensorSpec,
)
from .tensor import CSC, CSR, DCSR, DENSE2, Format, TensorData, TensorFormat
from .tokens import DONE, EMPTY, REPEAT, Stop, format_stream, parse_stream, stop

__all__ = [
    "CSC",
    "CSR",
    "DCSR",
    "DENSE2",
    "DONE",
    "EMPTY",
    "PRIMITIVES",
    "REPEAT",
    "AluOp",
    "Edge",
    "Format",
    "Graph",
    "GraphError",
    "Node",
    "NodeKind",
    "Numerics",
    "PortRef",
    "ReduceOp",
    "Role",
    "Stop",
    "StreamKind",
    "TensorData",
    "TensorFormat",
    "TensorSpec",
    "format_stream",
    "parse_stream",
    "stop",
]
