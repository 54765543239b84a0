"""Cost rules of the ``accumulate`` family."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from ..stats import HIST_MAX, Stat, fanout
from . import fibres, lanes, rule


def _merged(inner: Stat, groups: float) -> tuple[float, np.ndarray | None, np.ndarray | None]:
    """Expected union size of the fibres of ``inner`` merged ``groups`` ways: each fibre draws
    coordinate j at the stream's rate q_j; the fibres of one group are distinct fibres of the
    population they are read from (drawn without replacement), and groups have as many fibres
    as the stream's fan-out says (an empty group merges nothing) — or the mean, if unknown.
    Returns the size, its coordinate histogram and the fan-out of the merged fibres (how many
    groups get each size; where the groups' fibre counts are known)."""
    fib = fibres(inner)
    if not groups or not fib:
        return 0.0, (np.zeros(inner.dim) if inner.h is not None and inner.dim else None), None
    dim = inner.dim or 1
    if inner.h is not None:
        q = np.minimum(inner.h / fib, 1.0)
    else:
        q = np.full(dim, min(inner.data / (fib * dim), 1.0))
    w = fanout(inner.lens, -2)
    known = w is not None and w.sum() and len(q) * np.count_nonzero(w) <= HIST_MAX
    if known:
        ks = np.flatnonzero(w).astype(np.float64)
        wk = w[ks.astype(np.int64)] * (groups / w.sum())
    else:
        ks, wk = np.array([fib / groups]), np.array([groups])
    if inner.same is not None and len(inner.same) == len(q):
        # one fibre (presence b) thinned per copy by a join (presence q / b): in the union
        # when it is in the fibre and some copy keeps it
        b = np.minimum(inner.same, 1.0)
        r = np.divide(q, b, out=np.zeros_like(q), where=b > 0)
        hit = b[:, None] * (1.0 - _miss(np.minimum(r, 1.0), ks, None))
    else:
        hit = 1.0 - _miss(q, ks, inner.pop)
    per = hit @ wk
    scale = dim / len(q)
    fan = _spread(hit.sum(axis=0) * scale, wk) if known else None
    if inner.h is not None:
        return float(per.sum()), per, fan
    return float(per.sum()) * scale, None, fan


def _spread(sizes: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
    """A fan-out histogram from (expected size, groups) pairs: each size split between its two
    neighbouring integers so that the mean is kept."""
    top = int(np.ceil(sizes.max())) if len(sizes) else 0
    if top >= HIST_MAX:
        return None
    lo = np.floor(sizes)
    frac = sizes - lo
    out = np.bincount(lo.astype(np.int64), weights=weights * (1 - frac), minlength=top + 2)
    out += np.bincount(lo.astype(np.int64) + 1, weights=weights * frac, minlength=top + 2)
    return out


def _miss(q: np.ndarray, ks: np.ndarray, pop: float | None) -> np.ndarray:
    """P(no fibre of a group of k contains j) for each j (rows) and k (columns): drawn without
    replacement from ``pop`` fibres, q_j * pop of which contain j; independently if unknown."""
    q, ks = q[:, None], ks[None, :]
    if pop is None or pop < 1 or ks.max() > pop:
        return (1.0 - q) ** ks
    c = q * pop
    rest = pop - c - ks + 1.0
    ok = rest > 0
    logm = gammaln(pop - c + 1.0) + gammaln(pop - ks + 1.0) - gammaln(np.where(ok, rest, 1.0)) - gammaln(pop + 1.0)
    return np.where(ok, np.exp(np.minimum(logm, 0.0)), 0.0)


@rule("spacc1")
def _spacc1(c, node, ins):
    inner, val = ins["inner"], ins["val"]
    c.flop(node, val.data * lanes(node))
    groups = inner.n[-3] if len(inner.n) > 2 else 1.0
    if inner.held is not None:  # one coordinate per fibre: the union is the held coordinates
        o = inner.held
        mu = inner.data / o.data if o.data else 0.0
        d = o.data * (1 - math.exp(-mu)) if mu < 30 else o.data
        h = o.h * (d / o.data) if o.h is not None and o.data else None
        fan = None
    else:
        d, h, fan = _merged(inner, groups)
    n = inner.n[:-2] + (d,)
    lens = inner.lens[:-2] + (fan,) if inner.lens is not None and len(inner.lens) > 2 else None
    return {"crd": Stat(n, inner.dim, h, lens=lens, seq=True), "val": Stat(n)}  # flushed in order


@rule("spacc2")
def _spacc2(c, node, ins):
    i1, val = ins["inner1"], ins["val"]
    c.flop(node, val.data)
    p = node.all_params()
    groups = i1.n[-4] if len(i1.n) > 3 else 1.0
    cells = p["dim0"] * p["dim1"] * groups
    d = cells * (1 - math.exp(-val.data / cells)) if cells else 0.0
    rows = min(p["dim0"] * groups, d)
    n1 = i1.n[:-3] + (rows,)
    return {"crd0": Stat(n1, p["dim0"], seq=True), "crd1": Stat(n1 + (d,), p["dim1"], seq=True), "val": Stat(n1 + (d,))}


@rule("merge2")
def _merge2(c, node, ins):
    rows = [ins[f"crd0_{s}"] for s in "ab"]
    ents = [ins[f"crd1_{s}"] for s in "ab"]
    groups = rows[0].n[-2] if len(rows[0].n) > 1 else 1.0
    dim0 = rows[0].dim or rows[1].dim or 1
    dim1 = ents[0].dim or ents[1].dim or 1

    def union(x: float, y: float, cells: float) -> float:
        """Expected size of the union of x and y of ``cells`` positions, drawn independently."""
        return x + y - (x * y / cells if cells else 0.0)

    r = union(rows[0].data, rows[1].data, dim0 * groups)
    d = union(ents[0].data, ents[1].data, dim0 * dim1 * groups)
    c.flop(node, ents[0].data + ents[1].data - d)  # one operation per (i, j) on both sides
    n1 = rows[0].n[:-1] + (r,)
    return {"crd0": Stat(n1, dim0, seq=True), "crd1": Stat(n1 + (d,), dim1, seq=True), "val": Stat(n1 + (d,))}
