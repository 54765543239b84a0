"""Cost rules of the ``repeat`` family."""

from __future__ import annotations

from ..stats import Stat
from . import rule


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
