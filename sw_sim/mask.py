"""Cycle model of the coordinate mask."""

from __future__ import annotations

from fuseflow.ir.masks import mask_keep, mask_params
from fuseflow.ir.samml import (
    MaskPred,
)
from fuseflow.ir.tokens import DONE, EMPTY, Control, Stop

from .engine import Primitive
from .registry import Build, model


class CrdMask(Primitive):
    """Coordinate mask: in outer ``crd`` + inner ``crd`` + ``ref`` -> inner ``crd`` + ``ref``.

    ``cur`` holds the outer coordinate whose inner fiber is being read.  Fires when both outputs
    have room and the inner crd and ref heads are present.  Inner data: load ``cur`` from the
    outer input if empty (same cycle); emit crd and ref if :func:`mask_keep` holds; pop both.
    ``S0``: end of ``cur``'s fiber (an outer coordinate with an empty fiber is popped now); emit
    ``S0``.  ``Sk`` (k>=1): if no ``cur`` and the outer head is data, pop it and wait a cycle;
    then the outer head must be ``S(k-1)``: pop the three, emit ``Sk``.  ``D``: all three ``D``.
    A fiber the mask empties keeps its stop (use :class:`StknDrop` / crd_drop to prune it).
    Latency 0, II 1.
    """

    def __init__(self, name, ins, outs, *, pred: MaskPred, before: int = 0, after: int = 0, block: int = 1,
                 pattern: tuple[tuple[int, ...], ...] = ()):
        super().__init__(name, ins, outs)
        self.iouter, self.iinner, self.iref = ins["outer"], ins["inner"], ins["ref"]
        self.ocrd, self.oref = outs["crd"], outs["ref"]
        self.kw = {"before": before, "after": after, "block": block, "pattern": pattern}
        self.pred = pred
        self.cur: int | None = None

    def _data_step(self, tok, r) -> bool:
        """Inner data head ``tok`` (ref head ``r``): load ``cur`` from the outer input if empty
        (same cycle); emit crd and ref if :func:`mask_keep` holds; pop both."""
        inner, ref, outer = self.iinner, self.iref, self.iouter
        if isinstance(r, Control) and r is not EMPTY:
            raise self.error(f"inner coordinate {tok} but the ref stream is at {r}")
        if self.cur is None:
            if not outer.q:
                return False
            if isinstance(outer.q[0], Control):
                raise self.error(f"inner data {tok} but the outer stream is at {outer.q[0]}")
            self.cur = outer.pop()
        if mask_keep(self.pred, self.cur, tok, **self.kw):
            self.ocrd.push(tok)
            self.oref.push(r)
        inner.pop()
        ref.pop()
        return True

    def _done_step(self, oh) -> bool:
        """Inner and ref heads ``D`` (outer head ``oh``): all three ``D``; pop them, emit ``D``."""
        inner, ref, outer = self.iinner, self.iref, self.iouter
        if oh is not DONE:
            raise self.error(f"inner stream ended but the outer stream is at {oh}")
        outer.pop()
        inner.pop()
        ref.pop()
        self.ocrd.push(DONE)
        self.oref.push(DONE)
        self.finish()
        return True

    def _stop_step(self, tok: Stop, oh) -> bool:
        """Inner and ref heads stop ``tok`` (outer head ``oh``): ``S0`` ends ``cur``'s fiber;
        ``Sk`` (k>=1) ends the outer fiber."""
        inner, ref, outer = self.iinner, self.iref, self.iouter
        if tok.level == 0:
            if self.cur is None:
                if isinstance(oh, Control):
                    raise self.error(f"inner S0 but the outer stream is at {oh}")
                outer.pop()
            self.cur = None
        elif self.cur is None and not isinstance(oh, Control):
            outer.pop()
            return True
        elif type(oh) is not Stop or oh.level != tok.level - 1:
            raise self.error(f"inner {tok} needs outer S{tok.level - 1}, but the outer stream is at {oh}")
        else:
            outer.pop()
            self.cur = None
        inner.pop()
        ref.pop()
        self.ocrd.push(tok)
        self.oref.push(tok)
        return True

    def step(self) -> bool:
        inner, ref, outer = self.iinner, self.iref, self.iouter
        if not inner.q or not ref.q or self.ocrd.full() or self.oref.full():
            return False
        tok, r = inner.q[0], ref.q[0]
        if not isinstance(tok, Control):
            return self._data_step(tok, r)
        if r is not tok:
            raise self.error(f"inner {tok} but the ref stream is at {r}")
        if not outer.q:
            return False
        oh = outer.q[0]
        if tok is DONE:
            return self._done_step(oh)
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in the inner stream")
        return self._stop_step(tok, oh)



@model("crd_mask")
def _crd_mask(b: Build) -> Primitive:
    return CrdMask(b.name, b.ins, b.outs, **mask_params(b.name, b.params))
