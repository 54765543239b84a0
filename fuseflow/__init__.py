"""fuseflow: the FuseFlow compiler, the SAMML graph IR and the token type shared by every package."""

from .ir.numerics import Numerics
from .ir.samml import (
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
from .ir.tensor import CSC, CSR, DCSR, DENSE2, Format, TensorData, TensorFormat
from .ir.tokens import DONE, EMPTY, REPEAT, Stop, format_stream, parse_stream, stop

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
