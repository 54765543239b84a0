"""Composite lowerings: softmax, layernorm and bias add as reusable SAMML subgraph builders.

Each builder adds nodes to a :class:`~fuseflow.ir.builder.GraphBuilder` and returns the output
port(s).  They work on the innermost fibers of a value stream (a "row"): a reducer collapses
each row to one value, a repeat of that value stream (``repeat`` with ``stream="val"``, driven
by a repeat signal of the row) replays it over the row, and an ALU combines it with the row.

The builder ``b`` is a :class:`~fuseflow.ir.builder.GraphBuilder` or anything with its
``node``, ``bcast``, ``alu`` and ``link`` methods (the compiler's emitter, which resolves
fan-out itself).

Buffering: the row must wait in a FIFO while its reduction is computed, so the bypass edges
(the row into the combining ALU and the repeat signals) get a FIFO of ``max_row + 2`` entries,
where ``max_row`` bounds the row length (tokens per innermost fiber).  A shorter FIFO deadlocks
on longer rows (sw_sim reports which nodes are blocked).
"""

from __future__ import annotations

from ..ir.builder import GraphBuilder
from ..ir.samml import AluOp, NodeKind, PortRef, ReduceOp, StreamKind

__all__ = ["bias_add", "bias_lookup", "reduce_rows", "repeat_over", "row_layernorm", "row_softmax", "unary"]


def _bypass(max_row: int) -> int:
    if max_row < 1:
        raise ValueError(f"max_row={max_row}: the longest row must be at least 1 token")
    return max_row + 2


def unary(b: GraphBuilder, op: AluOp, val: PortRef, scalar: float | None = None) -> PortRef:
    """A unary ALU node (``scalar`` for ``add_scalar`` / ``mul_scalar``)."""
    params = {"op": op.value} if scalar is None else {"op": op.value, "scalar": scalar}
    return b.node(NodeKind.ALU, op.value, {"a": val}, **params)["val"]


def reduce_rows(b: GraphBuilder, op: ReduceOp, val: PortRef) -> PortRef:
    """One value per innermost fiber (the stream loses one level)."""
    return b.node(NodeKind.REDUCE, f"reduce_{op.value}", {"val": val}, op=op.value)["val"]


def repeat_over(b: GraphBuilder, per_row: PortRef, like: PortRef, max_row: int) -> PortRef:
    """Replay each value of ``per_row`` once per element of the matching row of ``like``
    (a value stream one level deeper); the result is aligned with ``like``."""
    rs = b.node(NodeKind.REPSIG, f"repsig_{like.node}", {"in": like}, stream=StreamKind.VAL.value)
    rep = b.node(NodeKind.REPEAT, f"repeat_{per_row.node}", {"ref": per_row}, stream=StreamKind.VAL.value)
    b.link(rs["repsig"], rep["repsig"], _bypass(max_row))
    return rep["ref"]


def _alu_bypass(b: GraphBuilder, op: AluOp, row: PortRef, other: PortRef, max_row: int) -> PortRef:
    n = b.node(NodeKind.ALU, op.value, {"b": other}, op=op.value)
    b.link(row, n["a"], _bypass(max_row))
    return n["val"]


def row_softmax(b: GraphBuilder, val: PortRef, max_row: int) -> PortRef:
    """``softmax`` over each innermost fiber of ``val``: ``exp(x - max) / sum(exp(x - max))``.

    Nodes: broadcast, max-reduce, value repeat, subtract, exp, broadcast, sum-reduce, value
    repeat, divide.  Empty rows stay empty."""
    x_max, x_rs, x_row = b.bcast(val, 3, StreamKind.VAL)
    m = reduce_rows(b, ReduceOp.MAX, x_max)
    shifted = _alu_bypass(b, AluOp.SUB, x_row, repeat_over(b, m, x_rs, max_row), max_row)
    e = unary(b, AluOp.EXP, shifted)
    e_sum, e_rs, e_row = b.bcast(e, 3, StreamKind.VAL)
    s = reduce_rows(b, ReduceOp.ADD, e_sum)
    return _alu_bypass(b, AluOp.DIV, e_row, repeat_over(b, s, e_rs, max_row), max_row)


def row_layernorm(b: GraphBuilder, val: PortRef, n: int, eps: float = 1e-5, max_row: int | None = None) -> PortRef:
    """Layer normalisation (no affine) over dense rows of ``n`` values:
    ``(x - mean) * rsqrt(var + eps)`` with ``mean = sum(x)/n`` and ``var = sum((x - mean)**2)/n``.
    Scale / shift by learned vectors with :func:`bias_lookup` and ALU mul / :func:`bias_add`."""
    if n < 1:
        raise ValueError(f"row_layernorm: row length n={n} must be at least 1")
    max_row = n if max_row is None else max_row
    x_sum, x_rs, x_row = b.bcast(val, 3, StreamKind.VAL)
    mean = unary(b, AluOp.MUL_SCALAR, reduce_rows(b, ReduceOp.ADD, x_sum), 1.0 / n)
    xc = _alu_bypass(b, AluOp.SUB, x_row, repeat_over(b, mean, x_rs, max_row), max_row)
    c_a, c_b, c_rs, c_row = b.bcast(xc, 4, StreamKind.VAL)
    var = unary(b, AluOp.MUL_SCALAR, reduce_rows(b, ReduceOp.ADD, b.alu(AluOp.MUL, c_a, c_b)), 1.0 / n)
    inv = unary(b, AluOp.RSQRT, unary(b, AluOp.ADD_SCALAR, var, eps))
    return _alu_bypass(b, AluOp.MUL, c_row, repeat_over(b, inv, c_rs, max_row), max_row)


def bias_lookup(b: GraphBuilder, bias: str, crd: PortRef, ref: PortRef, outer: PortRef
                ) -> tuple[PortRef, PortRef, PortRef]:
    """Align a dense bias vector ``bias_j`` with a fiber stream over ``j``.

    ``crd``/``ref`` are the ``j`` coordinates and references of the operand, ``outer`` the
    coordinate stream of the level above (one root reference of ``bias`` is repeated per outer
    coordinate).  Returns ``(crd, ref, bias_val)``: the operand's coordinates and references
    after the intersection with the (dense) bias level — the same entries — and the bias values
    aligned with them.  Load the operand's values from the returned ``ref``."""
    cb, rb = b.scan(bias, 0, b.repeat(b.root(bias), outer))
    c, (r, rbias) = b.join(NodeKind.INTERSECT, [(crd, ref), (cb, rb)])
    return c, r, b.load(bias, rbias)


def bias_add(b: GraphBuilder, val: PortRef, bias_val: PortRef) -> PortRef:
    """``val + bias`` over aligned value streams (see :func:`bias_lookup`)."""
    return b.alu(AluOp.ADD, val, bias_val)
