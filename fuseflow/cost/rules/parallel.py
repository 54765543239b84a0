"""Cost rules of the ``parallel`` family."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..stats import Stat
from . import fibres, rule


def _dealt(s: Stat, k: int) -> list[Stat] | None:
    """The lanes of a one-fibre stream whose values are known (``h``: each at most once, in
    ascending order, e.g. the outermost index's coordinates or references): lane ``l`` gets the
    values of rank ``l``, ``l + k``, … (the parallelizer's round-robin), so the work below each
    lane follows the values it got (a heavy row lands on one lane).  None for any other stream
    (its tokens spread over many fibres: an even split)."""
    if s.h is None or abs(fibres(s) - 1.0) > 1e-9 or not np.all((s.h == 0) | (s.h == 1)):
        return None
    values = np.flatnonzero(s.h)
    out = []
    for lane in range(k):
        h = np.zeros_like(s.h)
        h[values[lane::k]] = 1.0
        out.append(replace(s.scaled(float(h.sum())), h=h))
    return out


@rule("parallelize")
def _parallelize(c, node, ins):
    k = node.all_params()["n"]
    s = ins["in"]
    lanes = _dealt(s, k) or [s.scaled(s.data / k)] * k
    return {**{f"out{i}": lane for i, lane in enumerate(lanes)}, "sel": Stat(s.n, None, None)}


@rule("serialize")
def _serialize(c, node, ins):
    k = node.all_params()["n"]
    lanes = [ins[f"in{i}"] for i in range(k)]
    return {"out": lanes[0].scaled(sum(s.data for s in lanes))}
