"""fuseflow: the FuseFlow compiler, the SAMML graph IR and the token type shared by every package."""

from .samml import (PRIMITIVES, AluOp, Edge, Graph, GraphError, Node, NodeKind, PortRef, ReduceOp,
                    Role, StreamKind, TensorSpec)
from .tensor import CSC, CSR, DCSR, DENSE2, Format, TensorData, TensorFormat
from .tokens import DONE, EMPTY, REPEAT, Stop, format_stream, parse_stream, stop

__all__ = ["PRIMITIVES", "AluOp", "Edge", "Graph", "GraphError", "Node", "NodeKind", "PortRef",
           "ReduceOp", "Role", "StreamKind", "TensorSpec", "CSC", "CSR", "DCSR", "DENSE2", "Format",
           "TensorData", "TensorFormat", "DONE", "EMPTY", "REPEAT", "Stop", "format_stream",
           "parse_stream", "stop"]
