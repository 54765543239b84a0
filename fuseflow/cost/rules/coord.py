"""Cost rules of the ``coord`` family."""

from __future__ import annotations

import math

import numpy as np

from ..stats import HIST_MAX, Stat
from . import fibres, rule


@rule("locate")
def _locate(c, node, ins):
    outer, inner = ins["outer"], ins["inner"]
    dim = node.all_params()["dim"]
    h = None
    if outer.h is not None and inner.h is not None and len(outer.h) * dim <= HIST_MAX and outer.h.sum():
        h = np.outer(outer.h / outer.h.sum(), inner.h).ravel()
    dense_inner = inner.dim is not None and inner.run >= inner.dim
    # ascending coordinates under ascending parents: ascending positions, contiguous when the
    # coordinates cover their dimension, with gaps (the share ``fill`` read) otherwise
    fill = 1.0 if dense_inner else min(1.0, inner.data / max(fibres(inner) * dim, 1.0))
    # under a repeated outer reference (one position for a whole fibre of fibres) the located
    # positions start over with every fibre of coordinates
    return {"ref": Stat(inner.n, None, h, inner.nn, run=inner.run, seq=outer.seq and inner.seq, lens=inner.lens,
                        fill=fill * outer.fill, restarts=outer.rep)}


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
