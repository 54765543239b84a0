"""The graph side of the FPGA resource model (``fpga.resource_model``): what a graph's board top
is built from, counted from the SAMML graph and the datapath widths (crd width ``cw``, value
width ``vw``).  The hardware side (tensor memories, block-RAM choices) is the fpga package's."""

from __future__ import annotations

from ..ir.primitives import AluOp, NodeKind, StreamKind
from ..ir.samml import Graph

__all__ = ["DSP_WIDTH", "GRAPH_FEATURES", "accumulators", "fifos", "graph_features"]

DSP_WIDTH = 18  # a multiplier lane up to this wide takes one DSP block (wider: a few)
GRAPH_FEATURES = ("one", "fifo_bits", "fifos", "ctl_bits", "val_bits", "mul_lanes", "spacc_dim", "lanes",
                  "mul_narrow", "mul_wide", "table_lanes", "div_lanes", "const_mul_lanes", "slow_op")
_VALUE_KINDS = {NodeKind.ALU, NodeKind.REDUCE, NodeKind.ARRAY_LOAD}
# ALU ops whose datapath is more than an adder or a DSP product: the nonlinear functions (a table
# lookup, an interpolating product and a scaling shift in one cycle), division (a combinational
# divider) and products by a constant (shift-and-add logic, not a DSP block)
_TABLE_OPS = frozenset({AluOp.EXP, AluOp.RSQRT, AluOp.SIGMOID, AluOp.GELU})


def fifos(graph: Graph, cw: int, vw: int, fifo_depth: int | None = None) -> list[tuple[int, int]]:
    """``(depth, width)`` of every edge's FIFO: its depth (``fifo_depth`` or the graph's
    default where the edge sets none) and its word (``vw`` per lane for values, else ``cw``,
    plus the control bit)."""
    default = fifo_depth or graph.fifo_depth
    out = []
    for e in graph.edges:
        t = graph.edge_type(e)
        width = (vw * t.lanes if t.kind is StreamKind.VAL else cw) + 1
        out.append((e.depth if e.depth is not None else default, width))
    return out


def accumulators(graph: Graph) -> list[tuple[int, int, int]]:
    """``(dim, buffers, lanes)`` of every order-1 sparse accumulator."""
    return [(int(n.params.get("dim", 0) or 0), int(n.params.get("buffers", 1) or 1), int(n.params.get("lanes", 1) or 1))
            for n in graph.nodes.values() if n.kind is NodeKind.SPACC1]


def _is_mul(node) -> bool:
    return node.kind is NodeKind.ALU and node.params.get("op") in (AluOp.MUL, "mul")


def _op(node) -> AluOp | None:
    op = node.params.get("op") if node.kind is NodeKind.ALU else None
    if isinstance(op, str):
        try:
            return AluOp(op)
        except ValueError:
            return None
    return op


def graph_features(graph: Graph, cw: int, vw: int, fifo_depth: int | None = None) -> dict[str, float]:
    """FIFO bits and count, control and value datapath bits, multiplier lanes (up to
    :data:`DSP_WIDTH` bits and wider), sparse-accumulator entries, the widest lane split, the
    lanes of nonlinear-function, division and constant-product ALUs, and ``slow_op`` (1 when a
    nonlinear function or a division is in the graph: a one-cycle path of its own)."""
    f = dict.fromkeys(GRAPH_FEATURES, 0.0)
    f["one"] = 1.0
    for depth, width in fifos(graph, cw, vw, fifo_depth):
        f["fifo_bits"] += depth * width
        f["fifos"] += 1
    for node in graph.nodes.values():
        lanes = int(node.params.get("lanes", 1) or 1)
        if node.kind is NodeKind.PARALLELIZE:  # the widest fan-out
            f["lanes"] = max(f["lanes"], float(node.params.get("n", 1)))
        if _is_mul(node):
            f["mul_lanes"] += lanes
            f["mul_narrow" if vw <= DSP_WIDTH else "mul_wide"] += lanes
        op = _op(node)
        if op in _TABLE_OPS:
            f["table_lanes"] += lanes
        elif op is AluOp.DIV:
            f["div_lanes"] += lanes
        elif op is AluOp.MUL_SCALAR:
            f["const_mul_lanes"] += lanes
        if node.kind in (NodeKind.SPACC1, NodeKind.SPACC2):
            dim = int(node.params.get("dim", 0) or 0) or int(node.params.get("dim0", 0)) * int(node.params.get("dim1", 0))
            f["spacc_dim"] += dim
        if node.kind in _VALUE_KINDS:
            f["val_bits"] += vw * lanes
        else:
            f["ctl_bits"] += cw
    f["slow_op"] = float(f["table_lanes"] + f["div_lanes"] > 0)
    return f
