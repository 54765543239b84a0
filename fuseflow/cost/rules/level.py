"""Cost rules of the ``level`` family."""

from __future__ import annotations

import numpy as np

from ...ir.tensor import Format
from ..dram import passes_of, runs_of
from ..stats import HIST_MAX, LevelStats, Stat
from . import fibres, lanes, rule


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
    if lv.dense and p.get("stride", 1) > 1:
        return _strided_scan(ref, lv, live, p.get("offset", 0), p["stride"])
    if ref.h is not None and lv.lens is not None and len(ref.h) == len(lv.lens):
        d = float(ref.h @ lv.lens)
        if lv.dense:
            crd_h = np.full(lv.dim, float(ref.h.sum()))
            pos_h = np.repeat(ref.h, lv.dim) if len(ref.h) * lv.dim <= HIST_MAX else None
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
        runs = runs_of(c, ref, live, c.cw)
        if seg:
            c.read_port(t, "seg", lvl, 2 * live, runs, ref, passes_of(ref), 2.0)
        c.read_port(t, "crd", lvl, d, runs, ref, passes_of(ref), mean)
    n = ref.n + (d,)
    crd_run = float(lv.dim) if lv.dense else 1.0
    same = crd_h / live if ref.rep and crd_h is not None and live else None
    return {"crd": Stat(n, lv.dim, crd_h, run=max(crd_run, 1.0), seq=True, lens=lens, pop=lv.parents, same=same),
            "ref": Stat(n, None, pos_h, run=max(mean, 1.0), seq=ref.seq, lens=lens, pop=lv.parents, fill=ref.fill)}


def _strided_scan(ref: Stat, lv: LevelStats, live: float, offset: int, stride: int) -> dict[str, Stat]:
    """A lane's share of a dense level (coordinates offset, offset + stride, ...): ``m`` of
    each fibre's ``dim``."""
    m = len(range(offset, lv.dim, stride))
    d = live * m
    crd_h = np.zeros(lv.dim)
    crd_h[offset::stride] = live
    w = np.zeros(m + 1)
    w[m] = live
    w[0] += ref.nn
    lens = ref.lens + (w,) if ref.lens is not None else None
    n = ref.n + (d,)
    return {"crd": Stat(n, lv.dim, crd_h, run=max(float(m), 1.0), seq=True, lens=lens, pop=lv.parents),
            "ref": Stat(n, None, None, run=1.0, seq=ref.seq, lens=lens, pop=lv.parents, fill=ref.fill)}


def _level_fanout(lv: LevelStats, ref: Stat, live: float) -> np.ndarray | None:
    """How many references open fibres of each length (an N reference opens an empty one)."""
    if lv.dense:
        w = np.zeros(lv.dim + 1)
        w[lv.dim] = live
    elif lv.lens is None:
        if lv.fan is None or not lv.fan.sum():
            return None
        w = lv.fan * (live / lv.fan.sum())
    elif not len(lv.lens) or lv.lens.max() >= HIST_MAX:
        return None
    elif ref.h is not None and len(ref.h) == len(lv.lens):
        w = np.bincount(lv.lens.astype(np.int64), weights=ref.h)
    else:
        w = np.bincount(lv.lens.astype(np.int64)) * (live / len(lv.lens))
    w = np.asarray(w, dtype=np.float64)
    w[0] += ref.nn
    return w


@rule("write")
def _write(c, node, ins):
    p = node.all_params()
    t, lvl = p["tensor"], p["level"]
    s = ins["crd"]
    if c.graph.tensors[t].fmt.levels[lvl] is Format.COMPRESSED:
        c.words(t, "crd", lvl, s.data, True)
        c.words(t, "seg", lvl, fibres(s) + 1, True)
    c.written.setdefault(t, {})[lvl] = s
    return {}


@rule("vals_write")
def _vals_write(c, node, ins):
    c.words(node.params["tensor"], "vals", None, ins["val"].data * lanes(node), True)
    return {}
