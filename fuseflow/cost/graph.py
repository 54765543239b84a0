"""The FuseFlow heuristic: FLOPs, bytes and cycles of a graph, a program or a model without
simulating.

Each stream of a graph gets a :class:`Stat`: its expected tree sizes (``n[k]`` = elements at
nesting depth ``k``; ``n[-1]`` is the data tokens), the ``N`` tokens among them, and where it is
cheap a histogram ``h`` of the data values (coordinates over the index's dimension, or positions
of the level a reference stream points into).  A rule per primitive kind maps input stats to
output stats and counts the operations and memory words of the node:

* scanners of an input tensor weight each fibre by the histogram of the references that open
  it (a row opened by many references counts that often), so chains of scans are exact;
* intersections multiply per-coordinate presence rates (``h / fibres``), unions combine them
  (independence between operands: the one assumption; ``rates`` overrides it per index);
* reductions and accumulators fold fibres (an accumulator's output is the expected union of
  the fibres it merges);
* writers turn their input stats into the stats of the tensor they write, which later graphs
  read (their fibre lengths are then taken as uniform).

``cycles`` is a bound, not a schedule: the busiest stream's tokens (every node moves one token
per cycle), per graph.  With an off-chip memory it is the larger of that plus the slowest read
port's stalls (runs that miss its two lines wait whole accesses; streamed lines wait what the
next-line prefetch cannot hide; accesses cost a row conflict at the rate the bank model gives,
see ``_conflicts``) and the bytes moved over the bandwidth.  The counters have the names of
``sw_sim.counters`` so the two compare directly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import gammaln
from scipy.stats import binom

from ..compiler.runner import initial_tensors
from ..ir.masks import mask_keep, mask_params
from ..ir.memory import IDEAL, MemoryModel, Placement, word_bytes
from ..ir.samml import Graph, NodeKind
from ..ir.tensor import Format, TensorData
from ..ir.tokens import CRD_WIDTH, VAL_WIDTH

__all__ = ["Estimate", "TensorStats", "estimate_graph", "estimate_program", "stats_of", "uniform_stats"]

ANY_PLACEMENT = Placement(strict=False)  # nothing on chip; names not checked
_HIST_MAX = 1 << 22  # histograms longer than this are dropped (scalar rates instead)


# ----------------------------------------------------------------------------- tensor statistics
@dataclass
class LevelStats:
    """One storage level: its dimension, the positions of its parent level, its own positions,
    and (when known) the fibre length per parent position and the coordinate histogram."""

    dim: int
    dense: bool
    parents: float  # positions of the parent level (1 for level 0)
    nnz: float  # positions of this level
    lens: np.ndarray | None = None  # fibre length per parent position
    parent_of: np.ndarray | None = None  # parent position of each position (compressed)
    crd: np.ndarray | None = None  # coordinate of each position (compressed)
    crd_hist: np.ndarray | None = None  # expected count of each coordinate over all fibres
    fan: np.ndarray | None = None  # without ``lens``: how many fibres have each length (expected)


@dataclass
class TensorStats:
    levels: list[LevelStats]


def stats_of(td: TensorData) -> TensorStats:
    """Exact statistics of stored data (fibre lengths and coordinates per level)."""
    levels: list[LevelStats] = []
    parents = 1
    for lvl, fmt in enumerate(td.fmt.levels):
        dim = td.shape[td.fmt.mode_order[lvl]]
        if fmt is Format.DENSE:
            lens = np.full(parents, dim, dtype=np.float64) if parents <= _HIST_MAX else None
            levels.append(LevelStats(dim, True, parents, parents * dim, lens, None, None,
                                     np.full(dim, float(parents))))
            parents *= dim
        else:
            crd = np.asarray(td.crd[lvl])
            # a singleton level: one coordinate per parent position
            seg = np.asarray(td.seg[lvl]) if fmt.has_seg else np.arange(len(crd) + 1)
            lens = np.diff(seg).astype(np.float64)
            parent_of = np.repeat(np.arange(len(lens)), np.diff(seg))
            hist = np.bincount(crd, minlength=dim).astype(np.float64)
            levels.append(LevelStats(dim, False, parents, float(len(crd)), lens, parent_of, crd, hist))
            parents = len(crd)
    return TensorStats(levels)


# ----------------------------------------------------------------------------- stream statistics
@dataclass
class Stat:
    n: tuple[float, ...]  # elements per nesting depth; n[-1] = data tokens
    dim: int | None = None  # coordinate domain (crd streams)
    h: np.ndarray | None = None  # histogram of the data values, when known
    nn: float = 0.0  # N tokens among the data tokens
    held: Stat | None = None  # crd_hold output: each fibre repeats one coordinate of this stream
    run: float = 1.0  # expected run of consecutive values (positions read one after another)
    seq: bool = False  # values ascend through each outer fibre (a prefetching port streams them)
    fill: float = 1.0  # of an ascending reference stream: the share of the positions it passes that it reads
    # of an ascending reference stream: its positions start over with every innermost fibre
    # (coordinates located under a repeated reference) instead of every fibre above that
    restarts: bool = False
    # fan-out per depth, where known: lens[d][k] = how many elements of depth d - 1 have k
    # elements of depth d below them (lens[0] is None); a merge needs the spread, not the mean
    lens: tuple[np.ndarray | None, ...] | None = None
    pop: float | None = None  # distinct fibres the innermost fibres are drawn from (a scanned level's parents)
    rep: bool = False  # a repeated reference: the elements of each innermost fibre are one value
    # the innermost fibres of each group are one fibre read again (scanned under repeated
    # references), before any join: the presence rate of each coordinate in that fibre
    same: np.ndarray | None = None

    @property
    def data(self) -> float:
        return self.n[-1]

    @property
    def tokens(self) -> float:
        """Data tokens, one stop per innermost fibre, and D."""
        return self.n[-1] + (self.n[-2] if len(self.n) > 1 else 0.0) + 1.0

    def scaled(self, data: float, n: tuple[float, ...] | None = None,
               lens: tuple[np.ndarray | None, ...] | None = None) -> Stat:
        """Same shape with ``data`` tokens (histogram and N thinned alike); ``n`` (and its
        ``lens``) replace the outer depths."""
        f = data / self.data if self.data else 0.0
        h = self.h * f if self.h is not None else None
        if n is None:
            lens, pop = thinned(self.lens, f), self.pop
        else:
            pop = None
        return Stat((n or self.n[:-1]) + (data,), self.dim, h, self.nn * f,
                    run=max(1.0, self.run * min(f, 1.0)), seq=self.seq, lens=lens, pop=pop, fill=self.fill,
                    restarts=self.restarts)


def thinned(lens: tuple[np.ndarray | None, ...] | None, keep: float | None = None) -> tuple[np.ndarray | None, ...] | None:
    """The fan-outs of a stream whose innermost elements were kept each with probability
    ``keep`` (binomial thinning of the last fan-out; unknown without ``keep``)."""
    if lens is None:
        return None
    last = lens[-1]
    if last is None or keep is None or not 0.0 <= keep <= 1.0 or len(last) * np.count_nonzero(last) > _HIST_MAX:
        return lens[:-1] + (None,)
    if keep == 1.0:
        return lens
    ks = np.flatnonzero(last)
    pmf = binom.pmf(np.arange(len(last))[None, :], ks[:, None], keep)
    return lens[:-1] + (last[ks] @ pmf,)


def fanout(lens: tuple[np.ndarray | None, ...] | None, depth: int) -> np.ndarray | None:
    return lens[depth] if lens is not None and -len(lens) <= depth < len(lens) else None


@dataclass
class Estimate:
    """Predicted counters (``sw_sim.counters`` names) and a cycle bound."""

    flops: dict[str, float] = field(default_factory=dict)
    arrays: dict[str, dict[str, Any]] = field(default_factory=dict)
    cycles: float = 0.0
    graphs: list[tuple[str, float]] = field(default_factory=list)  # (graph, cycle bound)
    tokens: dict[str, float] = field(default_factory=dict)  # "graph:edge" -> expected tokens
    seconds: float = 0.0

    @property
    def flops_total(self) -> float:
        return sum(self.flops.values())

    @property
    def bytes_read(self) -> float:
        return sum(a["bytes_read"] for a in self.arrays.values())

    @property
    def bytes_written(self) -> float:
        return sum(a["bytes_written"] for a in self.arrays.values())

    @property
    def bytes_offchip(self) -> float:
        return sum(a.get("bytes_moved", 0.0) for a in self.arrays.values())

    def to_json(self) -> dict[str, Any]:
        """Stable field names: flops, flops_total, bytes_read, bytes_written, bytes_offchip,
        intensity, cycles, graphs [{name, cycles}], arrays, seconds."""
        moved = self.bytes_read + self.bytes_written
        return {"flops": {k: round(v, 1) for k, v in sorted(self.flops.items())},
                "flops_total": round(self.flops_total, 1), "bytes_read": round(self.bytes_read, 1),
                "bytes_written": round(self.bytes_written, 1), "bytes_offchip": round(self.bytes_offchip, 1),
                "intensity": round(self.flops_total / moved, 6) if moved else None,
                "cycles": round(self.cycles), "graphs": [{"name": g, "cycles": round(c)} for g, c in self.graphs],
                "arrays": {k: {f: (round(v, 1) if isinstance(v, float) else v) for f, v in a.items()}
                           for k, a in sorted(self.arrays.items())},
                "seconds": round(self.seconds, 6)}


# ----------------------------------------------------------------------------- the rules
@dataclass
class _Read:
    """One off-chip read port of a graph, as the memory terms of the cycle bound see it."""

    array: tuple[str, str, int | None]  # (tensor, seg | crd | vals, level)
    words: float
    distinct: float  # words at distinct positions (a repeated reference reads one word per fibre)
    runs: float  # runs that may miss the port's two lines
    seq: bool  # ascending positions (the next-line prefetch streams them)
    passes: float  # of ascending positions: how often they start over
    fill: float  # of ascending positions: the share of the positions passed that are read
    run: float  # words read one after another
    size: float  # the array's words
    word_bytes: int


@dataclass
class _Ctx:
    graph: Graph
    tensors: Mapping[str, TensorStats]
    model: MemoryModel
    placement: Placement
    cw: int
    vw: int
    rates: Mapping[str, float]
    est: Estimate
    written: dict[str, dict[int, Stat]] = field(default_factory=dict)  # tensor -> level -> crd stat
    reads: list[_Read] = field(default_factory=list)  # off-chip read ports
    writes: dict[tuple[str, str, int | None], float] = field(default_factory=dict)  # off-chip words written

    def read_port(self, tensor: str, array: str, level: int | None, words: float, runs: float,
                  ref: Stat, passes: float, run: float) -> None:
        """An off-chip read port, for the memory terms of the cycle bound: its words, its runs
        (a run = ``run`` consecutive words; each new run may miss the port's two lines), and of
        the position stream ``ref`` whether it ascends, its ``passes`` over the array, the share
        of the positions it reads and whether it repeats each position (one distinct word per
        fibre)."""
        if not self.placement.offchip(self.model, tensor):
            return
        lv = self.tensors[tensor].levels
        size = (lv[level].parents + 1 if array == "seg" else lv[level].nnz) if level is not None else lv[-1].nnz
        wb = word_bytes(self.vw if array == "vals" else self.cw)
        distinct = words * (ref.n[-2] / ref.data) if ref.rep and ref.data and len(ref.n) > 1 else words
        self.reads.append(_Read((tensor, array, level), words, distinct, runs, ref.seq, passes, ref.fill,
                                max(run, 1.0), size, wb))

    def words(self, tensor: str, array: str, level: int | None, words: float, write: bool) -> None:
        key = f"{tensor}.{array}" if level is None else f"{tensor}.{array}{level}"
        a = self.est.arrays.setdefault(key, {"offchip": self.placement.offchip(self.model, tensor),
                                             "words_read": 0.0, "words_written": 0.0,
                                             "bytes_read": 0.0, "bytes_written": 0.0})
        wb = word_bytes(self.vw if array == "vals" else self.cw)
        if write and a["offchip"]:
            self.writes[(tensor, array, level)] = self.writes.get((tensor, array, level), 0.0) + words
        a["words_written" if write else "words_read"] += words
        a["bytes_written" if write else "bytes_read"] += words * wb

    def flop(self, node, count: float) -> None:
        op = node.all_params().get("op", node.kind.value)
        op = getattr(op, "value", str(op))
        self.est.flops[op] = self.est.flops.get(op, 0.0) + count


Rule = Callable[[_Ctx, Any, dict[str, Stat]], dict[str, Stat]]
RULES: dict[NodeKind, Rule] = {}


def rule(kind: str) -> Callable[[Rule], Rule]:
    def reg(fn: Rule) -> Rule:
        RULES[NodeKind(kind)] = fn
        return fn
    return reg


@rule("root")
def _root(c, node, ins):
    return {"ref": Stat((1.0,), None, np.ones(1), seq=True, lens=(None,))}


@rule("scan")
def _scan(c, node, ins):
    p = node.all_params()
    t, lvl = p["tensor"], p["level"]
    ref = ins["ref"]
    lv = c.tensors[t].levels[lvl]
    live = ref.data - ref.nn
    if ref.h is not None and lv.lens is not None and len(ref.h) == len(lv.lens):
        d = float(ref.h @ lv.lens)
        if lv.dense:
            crd_h = np.full(lv.dim, float(ref.h.sum()))
            pos_h = np.repeat(ref.h, lv.dim) if len(ref.h) * lv.dim <= _HIST_MAX else None
        else:
            w = ref.h[lv.parent_of]
            crd_h = np.bincount(lv.crd, weights=w, minlength=lv.dim)
            pos_h = w
    else:
        d = live * (lv.nnz / lv.parents if lv.parents else 0.0)
        crd_h = lv.crd_hist * (d / lv.crd_hist.sum()) if lv.crd_hist is not None and lv.crd_hist.sum() else None
        pos_h = None
    mean = d / live if live else 0.0
    lens = ref.lens + (_level_fanout(lv, ref, live),) if ref.lens is not None else None
    if not lv.dense:
        seg = c.graph.tensors[t].fmt.levels[lvl].has_seg  # a singleton level reads no seg
        if seg:
            c.words(t, "seg", lvl, 2 * live, False)
        c.words(t, "crd", lvl, d, False)
        runs = _runs(c, ref, live, c.cw)
        if seg:
            c.read_port(t, "seg", lvl, 2 * live, runs, ref, _passes(ref), 2.0)
        c.read_port(t, "crd", lvl, d, runs, ref, _passes(ref), mean)
    n = ref.n + (d,)
    crd_run = float(lv.dim) if lv.dense else 1.0
    same = crd_h / live if ref.rep and crd_h is not None and live else None
    return {"crd": Stat(n, lv.dim, crd_h, run=max(crd_run, 1.0), seq=True, lens=lens, pop=lv.parents, same=same),
            "ref": Stat(n, None, pos_h, run=max(mean, 1.0), seq=ref.seq, lens=lens, pop=lv.parents, fill=ref.fill)}


def _level_fanout(lv: LevelStats, ref: Stat, live: float) -> np.ndarray | None:
    """How many references open fibres of each length (an N reference opens an empty one)."""
    if lv.dense:
        w = np.zeros(lv.dim + 1)
        w[lv.dim] = live
    elif lv.lens is None:
        if lv.fan is None or not lv.fan.sum():
            return None
        w = lv.fan * (live / lv.fan.sum())
    elif not len(lv.lens) or lv.lens.max() >= _HIST_MAX:
        return None
    elif ref.h is not None and len(ref.h) == len(lv.lens):
        w = np.bincount(lv.lens.astype(np.int64), weights=ref.h)
    else:
        w = np.bincount(lv.lens.astype(np.int64)) * (live / len(lv.lens))
    w = np.asarray(w, dtype=np.float64)
    w[0] += ref.nn
    return w


def _fibres(s: Stat) -> float:
    return s.n[-2] if len(s.n) > 1 else 1.0


def _index_dim(ins: list[Stat]) -> int:
    return max((s.dim or 0) for s in ins) or max(1, int(max(s.data for s in ins)))


def _presence(c: _Ctx, node, crds: list[Stat]) -> list[np.ndarray | float]:
    """Per-coordinate presence rate per fibre of each joined stream (histogram / fibres), or a
    scalar density when a histogram is missing."""
    f = max(_fibres(crds[0]), 1e-12)
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
    f = _fibres(crds[0])
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


@rule("repsig")
def _repsig(c, node, ins):
    s = ins["in"]
    return {"repsig": Stat(s.n, None, None, lens=s.lens)}


@rule("repeat")
def _repeat(c, node, ins):
    ref, sig = ins["ref"], ins["repsig"]
    out = ref.scaled(sig.data, sig.n[:-1], sig.lens)
    out.rep = True
    per = sig.data / ref.data if ref.data else 1.0  # each reference repeated this often: one line
    out.run = max(1.0, ref.run * per)
    return {"ref": out}


@rule("locate")
def _locate(c, node, ins):
    outer, inner = ins["outer"], ins["inner"]
    dim = node.all_params()["dim"]
    h = None
    if outer.h is not None and inner.h is not None and len(outer.h) * dim <= _HIST_MAX and outer.h.sum():
        h = np.outer(outer.h / outer.h.sum(), inner.h).ravel()
    dense_inner = inner.dim is not None and inner.run >= inner.dim
    # ascending coordinates under ascending parents: ascending positions, contiguous when the
    # coordinates cover their dimension, with gaps (the share ``fill`` read) otherwise
    fill = 1.0 if dense_inner else min(1.0, inner.data / max(_fibres(inner) * dim, 1.0))
    # under a repeated outer reference (one position for a whole fibre of fibres) the located
    # positions start over with every fibre of coordinates
    return {"ref": Stat(inner.n, None, h, inner.nn, run=inner.run, seq=outer.seq and inner.seq, lens=inner.lens,
                        fill=fill * outer.fill, restarts=outer.rep)}


def _lanes(node) -> int:
    """Values per token of the node's value streams (vectors: W; each counts W FLOPs / words)."""
    return int(node.all_params().get("lanes", 1))


@rule("array_load")
def _array_load(c, node, ins):
    ref = ins["ref"]
    c.words(node.params["tensor"], "vals", None, (ref.data - ref.nn) * _lanes(node), False)
    live = ref.data - ref.nn
    c.read_port(node.params["tensor"], "vals", None, live * _lanes(node), _runs(c, ref, live, c.vw), ref, _passes(ref),
                ref.run * _lanes(node))
    return {"val": Stat(ref.n, None, None, 0.0)}


@rule("alu")
def _alu(c, node, ins):
    a = ins["a"]
    c.flop(node, a.data * _lanes(node))
    return {"val": Stat(a.n, None, None)}


@rule("reduce")
def _reduce(c, node, ins):
    v = ins["val"]
    c.flop(node, v.data * _lanes(node))
    return {"val": Stat(v.n[:-1] if len(v.n) > 1 else (1.0,), None, None)}


@rule("lane_reduce")
def _lane_reduce(c, node, ins):
    v = ins["val"]
    c.flop(node, v.data * (_lanes(node) - 1))  # a tree of W - 1 operations per vector
    return {"val": Stat(v.n, None, None)}


def _merged(inner: Stat, groups: float) -> tuple[float, np.ndarray | None, np.ndarray | None]:
    """Expected union size of the fibres of ``inner`` merged ``groups`` ways: each fibre draws
    coordinate j at the stream's rate q_j; the fibres of one group are distinct fibres of the
    population they are read from (drawn without replacement), and groups have as many fibres
    as the stream's fan-out says (an empty group merges nothing) — or the mean, if unknown.
    Returns the size, its coordinate histogram and the fan-out of the merged fibres (how many
    groups get each size; where the groups' fibre counts are known)."""
    fib = _fibres(inner)
    if not groups or not fib:
        return 0.0, (np.zeros(inner.dim) if inner.h is not None and inner.dim else None), None
    dim = inner.dim or 1
    if inner.h is not None:
        q = np.minimum(inner.h / fib, 1.0)
    else:
        q = np.full(dim, min(inner.data / (fib * dim), 1.0))
    w = fanout(inner.lens, -2)
    known = w is not None and w.sum() and len(q) * np.count_nonzero(w) <= _HIST_MAX
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
    if top >= _HIST_MAX:
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
    c.flop(node, val.data * _lanes(node))
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


@rule("crd_drop")
def _crd_drop(c, node, ins):
    outer, inner = ins["outer"], ins["inner"]
    mu = inner.data / outer.data if outer.data else 0.0
    kept = outer.data * (1 - math.exp(-mu)) if mu < 30 else outer.data
    return {"outer": outer.scaled(kept), "inner": inner}


@rule("crd_hold")
def _crd_hold(c, node, ins):
    outer, inner = ins["outer"], ins["inner"]
    return {"outer": Stat(inner.n, outer.dim, None, held=outer, lens=inner.lens), "inner": inner}


@rule("crd_mask")
def _crd_mask(c, node, ins):
    outer, inner, ref = ins["outer"], ins["inner"], ins["ref"]
    p = mask_params(node.name, node.all_params())
    di, dj = outer.dim or 1, inner.dim or 1
    if di * dj <= _HIST_MAX:
        keep = np.array([[mask_keep(j=j, i=i, **p) for j in range(dj)] for i in range(di)], dtype=np.float64)
        hi = outer.h if outer.h is not None and len(outer.h) == di else np.ones(di)
        hj = inner.h if inner.h is not None and len(inner.h) == dj else np.ones(dj)
        wi = hi / hi.sum() if hi.sum() else hi
        frac_j = (wi @ keep) * (hj / hj.sum() if hj.sum() else hj)
        frac = float(frac_j.sum())
        h = frac_j * inner.data if inner.h is not None else None
    else:
        frac, h = 1.0, None
    d = inner.data * frac
    s = Stat(inner.n[:-1] + (d,), inner.dim, h, lens=thinned(inner.lens, frac), pop=inner.pop)
    return {"crd": s, "ref": ref.scaled(d)}


@rule("broadcast")
def _broadcast(c, node, ins):
    return {f"out{i}": ins["in"] for i in range(node.all_params()["n"])}


@rule("stkn_drop")
def _stkn_drop(c, node, ins):
    return {"out": ins["in"]}


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


@rule("write")
def _write(c, node, ins):
    p = node.all_params()
    t, lvl = p["tensor"], p["level"]
    s = ins["crd"]
    if c.graph.tensors[t].fmt.levels[lvl] is Format.COMPRESSED:
        c.words(t, "crd", lvl, s.data, True)
        c.words(t, "seg", lvl, _fibres(s) + 1, True)
    c.written.setdefault(t, {})[lvl] = s
    return {}


@rule("vals_write")
def _vals_write(c, node, ins):
    c.words(node.params["tensor"], "vals", None, ins["val"].data * _lanes(node), True)
    return {}


# ----------------------------------------------------------------------------- graphs, programs
def _written_stats(graph: Graph, tensor: str, crds: dict[int, Stat]) -> TensorStats:
    """Statistics of a tensor a graph writes, from its writers' input streams (fibre lengths
    uniform, coordinate histograms kept)."""
    spec = graph.tensors[tensor]
    levels = []
    parents = 1.0
    for lvl, fmt in enumerate(spec.fmt.levels):
        dim = spec.level_dim(lvl)
        s = crds.get(lvl)
        nnz = s.data if s is not None and fmt is Format.COMPRESSED else parents * dim
        hist = s.h if s is not None and s.h is not None and len(s.h) == dim else None
        fan = fanout(s.lens, -1) if s is not None and fmt is Format.COMPRESSED else None
        levels.append(LevelStats(dim, fmt is Format.DENSE, parents, nnz, None, None, None,
                                 hist if fmt is Format.COMPRESSED else np.full(dim, parents),
                                 fan=None if fan is None else fan.copy()))
        parents = nnz
    return TensorStats(levels)


def estimate_graph(graph: Graph, tensors: Mapping[str, TensorStats | TensorData], *,
                   memory: MemoryModel = IDEAL, placement: Placement = ANY_PLACEMENT,
                   cw: int = CRD_WIDTH, vw: int = VAL_WIDTH, rates: Mapping[str, float] | None = None,
                   est: Estimate | None = None) -> tuple[Estimate, dict[str, TensorStats]]:
    """Estimate one graph (its input tensors as data or statistics); returns the estimate (added
    to ``est`` if given) and the statistics of the tensors it writes."""
    t0 = time.perf_counter()
    est = est if est is not None else Estimate()
    stats = {t: (stats_of(v) if isinstance(v, TensorData) else v) for t, v in tensors.items()}
    ctx = _Ctx(graph, stats, memory, placement, cw, vw, rates or {}, est)
    before = {k: dict(a) for k, a in est.arrays.items()}
    streams: dict[Any, Stat] = {}
    driver = graph.driver()
    busiest = 0.0
    for name in graph.topo_order():
        node = graph.nodes[name]
        ins = {}
        for port in node.inputs():
            e = driver.get(node[port])
            if e is not None and not graph.is_feedback(e):
                ins[port] = streams[e.src]
        if len(ins) < sum(1 for port in node.inputs() if not _is_feedback_port(node, port)):
            raise ValueError(f"estimate: node {name!r} has unconnected inputs")
        outs = RULES[node.kind](ctx, node, ins)
        for port, s in outs.items():
            streams[node[port]] = s
        busiest = max(busiest, _work(node, ins, outs))
    for e in graph.edges:
        if e.src in streams:
            key = f"{graph.name}:{e}"
            est.tokens[key] = est.tokens.get(key, 0.0) + streams[e.src].tokens
    cycles = busiest
    if not memory.ideal:
        moved = 0.0
        for key, a in est.arrays.items():
            old = before.get(key, {})
            if a["offchip"]:
                new = (a["bytes_read"] - old.get("bytes_read", 0.0)) + (a["bytes_written"] - old.get("bytes_written", 0.0))
                lines = math.ceil(new / memory.burst_bytes) + (1 if new else 0)
                a["lines"] = a.get("lines", 0.0) + lines
                a["bytes_moved"] = a.get("bytes_moved", 0.0) + lines * memory.burst_bytes
                moved += lines * memory.burst_bytes
        conflict = _conflicts(ctx)
        stall = max((_port_stall(memory, r, busiest, conflict.get(r.array, 0.0)) for r in ctx.reads), default=0.0)
        cycles = max(busiest + stall, moved / memory.bytes_per_cycle) + memory.t_rcd + memory.t_cl + memory.latency
    est.cycles += cycles
    est.graphs.append((graph.name, cycles))
    est.seconds += time.perf_counter() - t0
    out = {t: _written_stats(graph, t, crds) for t, crds in ctx.written.items()}
    return est, out


def _runs(c: _Ctx, ref: Stat, live: float, width: int) -> float:
    """Runs of a port read at the positions of ``ref`` (a run = words read one after another;
    each run may miss the port's two lines).  Random positions: ``live / run``.  Ascending
    positions: blocks of ``run`` consecutive words, one pass over them per outer fibre; a pass
    is one run (next-line prefetch streams it) when the blocks are adjacent (``fill`` = 1), and
    otherwise each block whose gap to the last one is more than a line starts a run of its own:
    the gap is ``run (1 - fill) / fill`` words on average."""
    if not ref.seq:
        return live / max(ref.run, 1.0)
    passes = _passes(ref)
    if ref.fill >= 1.0 or not live or not passes:
        return passes
    per_line = max(1, c.model.burst_bytes // word_bytes(width))
    run = max(ref.run, 1.0)
    blocks = live / passes / run
    near = min(1.0, per_line * ref.fill / (run * (1.0 - ref.fill)))
    return passes * (1.0 + max(blocks - 1.0, 0.0) * (1.0 - near))


def _passes(s: Stat) -> float:
    """How often an ascending stream starts over: once per fibre of its parent level, or once
    per fibre when it ``restarts``."""
    if s.restarts:
        return s.n[-2] if len(s.n) > 1 else 1.0
    return s.n[-3] if len(s.n) > 2 else 1.0


def _port_stall(m: MemoryModel, r: _Read, busy: float, conflict: float) -> float:
    """Cycles an off-chip read port holds its node up.  A port holds one request at a time: a
    run that starts outside the two lines it holds waits a whole access and transfer; on an
    ascending read the next-line prefetch is asked for on entering a line and arrives an
    access, a transfer and a grant cycle later, so when a line's words pass faster than that
    (at the graph's pace: ``busy`` cycles over the port's words, at least one word a cycle)
    each streamed line waits the difference.  ``conflict`` is the port's row-conflict rate."""
    access = _access(m, conflict)
    misses = _misses(m, r)
    wait = misses * (access + m.xfer_cycles)
    if r.seq and r.words > 0:
        lines = _lines(m, r)
        if lines > misses:
            pace = max(1.0, busy / r.words)
            wait += (lines - misses) * max(0.0, access + m.xfer_cycles + 1 - r.words / lines * pace)
    return wait


def _misses(m: MemoryModel, r: _Read) -> float:
    """Runs of a read port that start outside the two lines it holds."""
    return r.runs * (1.0 - min(1.0, 2.0 / max(1.0, r.size * r.word_bytes / m.burst_bytes)))


def _access(m: MemoryModel, conflict: float) -> float:
    """Expected cycles from a request's grant to its data, before the transfer: a row hit, or
    with probability ``conflict`` a precharge and activation too (the closed policy always
    activates)."""
    if m.policy != "open":
        return m.latency + m.t_rcd + m.t_cl
    return m.latency + m.t_cl + conflict * (m.t_rp + m.t_rcd)


def _lines(m: MemoryModel, r: _Read) -> float:
    """Lines a read port enters: an array of at most two lines once; ascending positions the
    lines their distinct words fill (runs shorter than a line share it with the words
    ``fill`` says lie beside them), at most the array's lines and a prefetch per pass; random
    positions a line and a prefetch per run that misses the two lines the port holds."""
    per_line = m.burst_bytes / r.word_bytes
    array = max(1.0, r.size / per_line)
    if r.words <= 0:
        return 0.0
    if array <= 2.0:
        return float(math.ceil(array))
    if r.seq:
        return min(r.distinct / min(per_line, max(r.run, per_line * r.fill)), max(r.passes, 1.0) * (array + 1.0))
    return r.runs * (1.0 - 2.0 / array) * (r.run / per_line + 1.0)


def _conflicts(c: _Ctx) -> dict[tuple, float]:
    """Row-conflict rate per off-chip array (open-row policy).  An array's rows go round the
    banks from the bank its number sets (as ``fuseflow.ir.memory.MemPort.bank_row``), and its
    lines (its read ports' and its writer's; ports of one array read the same rows) spread
    evenly over its rows.  An array read in ascending order enters a row and stays in it for
    its next lines, so a line conflicts only when another array's line reached the bank in
    between: the others move ``load - own`` of the bank's lines per line of its own, a Poisson
    count.  An array read at random positions hits when its bank's last line was its own (its
    share of the bank's lines) and in the same row (one in its rows of that bank)."""
    m = c.model
    if m.policy != "open":
        return {}
    per_row = m.lines_per_row
    arrays: dict[tuple, list] = {}  # array -> [lines, ascending, size in lines]
    for r in c.reads:
        a = arrays.setdefault(r.array, [0.0, True, r.size * r.word_bytes / m.burst_bytes])
        a[0] += _lines(m, r)
        a[1] = a[1] and r.seq
    for key, words in c.writes.items():
        lines = words * word_bytes(c.vw if key[1] == "vals" else c.cw) / m.burst_bytes
        a = arrays.setdefault(key, [0.0, True, lines])
        a[0] += lines
    if len(arrays) < 2:
        return {}
    ids = {k: i for i, k in enumerate(sorted(arrays, key=lambda k: (k[0], k[1], -1 if k[2] is None else k[2])))}
    load = np.zeros(m.banks)
    spreads = {}
    for k, (lines, _, size) in arrays.items():
        chunks = min(max(1, math.ceil(size / per_row)), 4 * m.banks)
        w = np.bincount((np.arange(chunks) + ids[k]) % m.banks, minlength=m.banks) / chunks
        spreads[k] = w
        load += lines * w
    out = {}
    for k, (lines, seq, size) in arrays.items():
        w = spreads[k]
        if not lines:
            continue
        if seq:
            # consecutive lines share a row: a conflict needs another array's line in the bank
            # between two of its own (the others move ``load - own`` lines per ``lines`` of its)
            others = (load - lines * w) / lines
            out[k] = float(np.sum(w * -np.expm1(-others)))
        else:
            same = 1.0 / max(1.0, math.ceil(size / per_row) / m.banks)
            share = np.divide(lines * w, load, out=np.zeros(m.banks), where=load > 0)
            out[k] = float(np.sum(w * (1.0 - share * same)))
    return out


def _work(node, ins: dict[str, Stat], outs: dict[str, Stat]) -> float:
    """Cycles a node is busy (one token per cycle on its busiest port): a join walks its
    inputs' coordinates (those matched move together), an accumulator takes its inputs then
    flushes its outputs."""
    t_in = max((s.tokens for s in ins.values()), default=0.0)
    t_out = max((s.tokens for s in outs.values()), default=0.0)
    if node.kind in (NodeKind.INTERSECT, NodeKind.UNION):
        # copies of one stream (a broadcast to several inputs) always match: walked once
        crds = [s.tokens for s in {id(s): s for p, s in ins.items() if p.startswith("crd")}.values()]
        return max(sum(crds) - outs["crd"].tokens * (len(crds) - 1), t_out)
    if node.kind in (NodeKind.SPACC1, NodeKind.SPACC2):
        return t_in + t_out
    return max(t_in, t_out)


def _is_feedback_port(node, port: str) -> bool:
    return port in node.spec.feedback


def estimate_program(compiled, data: Mapping[str, Any], **kw) -> Estimate:
    """Estimate every graph of a compiled program in order (intermediates' statistics handed
    on; permuted copies keep their source's counts with uniform fibres)."""
    t0 = time.perf_counter()
    tensors: dict[str, TensorStats | TensorData] = dict(initial_tensors(compiled, data))
    est = Estimate()
    for cg in compiled.groups:
        g = cg.graph
        _, written = estimate_graph(g, {t: tensors[t] for t in g.input_tensors()}, est=est, **kw)
        tensors.update(written)
        for p in compiled.permuted:
            if p.source in written:
                tensors[p.name] = _permuted(written[p.source], g, p)
    est.seconds = time.perf_counter() - t0
    return est


def _permuted(src: TensorStats, graph: Graph, p) -> TensorStats:
    shape = graph.tensors[p.source].shape
    return uniform_stats(shape, p.fmt, src.levels[-1].nnz if src.levels else 0.0)


def uniform_stats(shape: tuple[int, ...], fmt, total: float) -> TensorStats:
    """Statistics of a tensor of ``total`` nonzeros spread uniformly (a host-side reformat)."""
    levels = []
    parents = 1.0
    frac = min(1.0, total / max(1.0, math.prod(shape)))
    order = len(fmt.levels)
    for lvl, f in enumerate(fmt.levels):
        dim = shape[fmt.mode_order[lvl]]
        dense = f is Format.DENSE
        if dense:
            nnz = parents * dim
        elif lvl == order - 1 or not f.unique:  # a non-unique level: a position per entry
            nnz = total
        elif f is Format.SINGLETON:
            nnz = parents
        else:  # coordinates of this level that have any nonzero below
            below = math.prod(shape[fmt.mode_order[k]] for k in range(lvl + 1, order))
            nnz = parents * dim * (1 - (1 - frac) ** below)
        levels.append(LevelStats(dim, dense, parents, nnz, None, None, None, np.full(dim, nnz / dim)))
        parents = nnz
    return TensorStats(levels)
