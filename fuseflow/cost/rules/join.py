"""Cost rules of the ``join`` family."""

from __future__ import annotations

import numpy as np

from ...ir.samml import Graph
from ..context import Ctx
from ..stats import Stat, thinned
from . import fibres, rule


def _index_dim(ins: list[Stat]) -> int:
    return max((s.dim or 0) for s in ins) or max(1, int(max(s.data for s in ins)))


def _presence(c: Ctx, node, crds: list[Stat]) -> list[np.ndarray | float]:
    """Per-coordinate presence rate per fibre of each joined stream (histogram / fibres), or a
    scalar density when a histogram is missing."""
    f = max(fibres(crds[0]), 1e-12)
    dim = _index_dim(crds)
    out = []
    for s in crds:
        if s.h is not None and len(s.h) == dim:
            out.append(np.minimum(s.h / f, 1.0))
        else:
            out.append(min(s.data / (f * dim), 1.0))
    return out


def _join(c, node, ins, union: bool):
    k = node.all_params()["n"]
    crds = [ins[f"crd{i}"] for i in range(k)]
    f = fibres(crds[0])
    dim = _index_dim(crds)
    pres = _presence(c, node, crds)
    if union:
        miss = np.ones(dim)
        for r in pres:
            miss = miss * (1 - r)
        per = 1 - miss
    else:
        per = np.ones(dim)
        for r in pres:
            per = per * r
        index = _index_name(c.graph, node)
        if index in c.rates:
            per = np.full(dim, c.rates[index])
    h = per * f
    d = float(h.sum())
    n = crds[0].n[:-1] + (d,)
    lens = thinned(crds[0].lens, d / crds[0].data if crds[0].data and not union else None)
    same = [s.same for s in crds if s.same is not None and len(s.same) == dim]
    out = {"crd": Stat(n, dim, h, lens=lens, pop=None if union else crds[0].pop,
                       same=same[0] if len(same) == 1 and not union else None, seq=all(s.seq for s in crds))}
    for i in range(k):
        r = ins[f"ref{i}"]
        if union:  # every input element comes out (same positions), the rest as N
            present = min(crds[i].data, d)
            out[f"ref{i}"] = Stat(n, None, r.h, d - present + r.nn, run=r.run, seq=r.seq, lens=lens)
        elif r.h is not None and len(r.h) == dim and crds[i].h is not None and np.allclose(r.h, crds[i].h):
            # positions that are the coordinates (a dense outer level): they survive as those do
            out[f"ref{i}"] = Stat(n, None, h.copy(), r.nn * (d / r.data if r.data else 0.0), seq=r.seq,
                                  lens=lens)
        else:
            out[f"ref{i}"] = r.scaled(d, crds[0].n[:-1], lens)
    return out


def _index_name(graph: Graph, node) -> str | None:
    for index, refs in graph.indices.items():
        if any(r.node == node.name for r in refs):
            return index
    return None


@rule("intersect")
def _intersect(c, node, ins):
    out = _join(c, node, ins, union=False)
    if node.all_params().get("skip"):
        for i in range(node.all_params()["n"]):
            out[f"skip{i}"] = Stat((1.0, 0.0))
    return out


@rule("union")
def _union(c, node, ins):
    return _join(c, node, ins, union=True)
