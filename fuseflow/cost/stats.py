"""Statistics of tensors and streams, and the estimate they add up to (:class:`Estimate`).

A stream's :class:`Stat` holds its expected tree sizes (``n[k]`` = elements at nesting depth
``k``; ``n[-1]`` is the data tokens), the ``N`` tokens among them, and where it is cheap a
histogram ``h`` of the data values (coordinates over the index's dimension, or positions of the
level a reference stream points into)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import binom

from ..ir.tensor import Format, TensorData

__all__ = ["HIST_MAX", "Estimate", "LevelStats", "Stat", "TensorStats", "fanout", "stats_of", "thinned", "uniform_stats"]

HIST_MAX = 1 << 22  # histograms longer than this are dropped (scalar rates instead)


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
            lens = np.full(parents, dim, dtype=np.float64) if parents <= HIST_MAX else None
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
    if last is None or keep is None or not 0.0 <= keep <= 1.0 or len(last) * np.count_nonzero(last) > HIST_MAX:
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
