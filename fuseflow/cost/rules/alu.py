"""Cost rules of the ``alu`` family."""

from __future__ import annotations

from ..stats import Stat
from . import lanes, rule


@rule("alu")
def _alu(c, node, ins):
    a = ins["a"]
    c.flop(node, a.data * lanes(node))
    return {"val": Stat(a.n, None, None)}


@rule("reduce")
def _reduce(c, node, ins):
    v = ins["val"]
    c.flop(node, v.data * lanes(node))
    return {"val": Stat(v.n[:-1] if len(v.n) > 1 else (1.0,), None, None)}


@rule("lane_reduce")
def _lane_reduce(c, node, ins):
    v = ins["val"]
    c.flop(node, v.data * (lanes(node) - 1))  # a tree of W - 1 operations per vector
    return {"val": Stat(v.n, None, None)}
