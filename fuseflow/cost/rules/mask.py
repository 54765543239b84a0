"""Cost rules of the ``mask`` family."""

from __future__ import annotations

import numpy as np

from ...ir.masks import mask_keep, mask_params
from ..stats import HIST_MAX, Stat, thinned
from . import rule


@rule("crd_mask")
def _crd_mask(c, node, ins):
    outer, inner, ref = ins["outer"], ins["inner"], ins["ref"]
    p = mask_params(node.name, node.all_params())
    di, dj = outer.dim or 1, inner.dim or 1
    if di * dj <= HIST_MAX:
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
