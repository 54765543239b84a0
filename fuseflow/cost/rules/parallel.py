"""Cost rules of the ``parallel`` family."""

from __future__ import annotations

from ..stats import Stat
from . import rule


@rule("parallelize")
def _parallelize(c, node, ins):
    k = node.all_params()["n"]
    s = ins["in"]
    lane = s.scaled(s.data / k)
    return {**{f"out{i}": lane for i in range(k)}, "sel": Stat(s.n, None, None)}


@rule("serialize")
def _serialize(c, node, ins):
    k = node.all_params()["n"]
    lanes = [ins[f"in{i}"] for i in range(k)]
    return {"out": lanes[0].scaled(sum(s.data for s in lanes))}
