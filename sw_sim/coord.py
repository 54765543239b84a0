"""Cycle models of the outer/inner coordinate walkers: coordinate drop and hold, locate."""

from __future__ import annotations

from fuseflow.ir.tokens import DONE, EMPTY, Control, Stop

from .engine import Primitive
from .registry import Build, model, plain


class _OuterInner(Primitive):
    """Shared walk of an outer crd stream against the inner stream nested under it.

    ``cur`` holds the outer coordinate whose inner fiber is being read.  Per inner token (fires
    when both outputs have room):
    data: load ``cur`` from the outer input if empty (same cycle); ``on_data``.
    ``S0``: end of ``cur``'s fiber (an outer data token with an empty fiber is popped now).
    ``Sk`` (k>=1): end of the outer fiber; if no ``cur`` and the outer head is data (a last
    coordinate with an empty fiber) pop it and wait a cycle; then the outer head must be
    ``S(k-1)``: pop both, emit the stops.  ``D``: both ``D``.

    Subclasses say what is emitted through the hooks ``on_data`` (inner data), ``on_fiber_end``
    (``S0``), ``on_outer_end`` (``Sk``, k>=1, with the outer stop) and ``on_done``; ``outputs``
    (one or two channels) must all have room for the node to fire.  ``outer_empty``: an ``N``
    outer token is an element (a parent with no position), not a protocol error.
    """

    outer_empty = False

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.iouter = ins["outer"]
        self.iinner = ins["inner"]
        self.outputs = tuple(outs.values())
        self.cur = None

    def on_data(self, tok, loaded: bool) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_fiber_end(self, tok) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_outer_end(self, outer_stop: Stop, inner_stop: Stop) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_done(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _outer_elem(self, tok) -> bool:
        """``tok`` (an outer head) is an element of the outer fiber, not a stop or ``D``."""
        return not isinstance(tok, Control) or (tok is EMPTY and self.outer_empty)

    def _data_step(self, tok) -> bool:
        """Inner data (or ``EMPTY``) head ``tok``: load ``cur`` from the outer input if empty
        (same cycle), pop the inner token, ``on_data``."""
        inner, outer = self.iinner, self.iouter
        loaded = False
        if self.cur is None:
            if not outer.q:
                return False
            if not self._outer_elem(outer.q[0]):
                raise self.error(f"inner data {tok} but the outer stream is at {outer.q[0]}")
            self.cur = outer.pop()
            loaded = True
        inner.pop()
        self.on_data(tok, loaded)
        return True

    def _done_step(self) -> bool:
        """Inner head ``D``: the outer head must be ``D``; pop both, emit ``D`` on both outputs."""
        inner, outer = self.iinner, self.iouter
        if not outer.q:
            return False
        if outer.q[0] is not DONE:
            raise self.error(f"inner stream ended but the outer stream is at {outer.q[0]}")
        outer.pop()
        inner.pop()
        self.on_done()
        self.finish()
        return True

    def _stop_step(self, tok: Stop) -> bool:
        """Inner head stop ``tok``: ``S0`` ends ``cur``'s fiber; ``Sk`` (k>=1) ends the outer fiber."""
        inner, outer = self.iinner, self.iouter
        if tok.level == 0:
            if self.cur is None:
                if not outer.q:
                    return False
                if not self._outer_elem(outer.q[0]):
                    raise self.error(f"inner S0 but the outer stream is at {outer.q[0]}")
                outer.pop()
            self.cur = None
            inner.pop()
            self.on_fiber_end(tok)
            return True
        if not outer.q:
            return False
        oh = outer.q[0]
        if self.cur is None and self._outer_elem(oh):
            outer.pop()
            return True
        if type(oh) is not Stop or oh.level != tok.level - 1:
            raise self.error(f"inner {tok} needs outer S{tok.level - 1}, but the outer stream is at {oh}")
        outer.pop()
        inner.pop()
        self.cur = None
        self.on_outer_end(oh, tok)
        return True

    def step(self) -> bool:
        inner = self.iinner
        outs = self.outputs  # one or two channels
        if not inner.q or outs[0].isfull or outs[-1].isfull:
            return False
        tok = inner.q[0]
        if not isinstance(tok, Control) or tok is EMPTY:
            return self._data_step(tok)
        if tok is DONE:
            return self._done_step()
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in the inner stream")
        return self._stop_step(tok)


class _Pair(_OuterInner):
    """A walker with an outer and an inner output (drop, hold): at the end of an outer fiber
    it emits ``held_stop`` on the outer output and the inner stop on the inner one."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.oouter = outs["outer"]
        self.oinner = outs["inner"]

    def on_outer_end(self, outer_stop, inner_stop):
        self.oouter.push(self.held_stop(outer_stop, inner_stop))
        self.oinner.push(inner_stop)

    def on_done(self):
        self.oouter.push(DONE)
        self.oinner.push(DONE)

    def held_stop(self, outer_stop: Stop, inner_stop: Stop) -> Stop:  # pragma: no cover
        raise NotImplementedError



class CrdDrop(_Pair):
    """Coordinate drop: outer coordinates whose inner fiber is empty are dropped; the inner
    stream passes through.  An outer coordinate is emitted with its fiber's first element."""

    def on_data(self, tok, loaded):
        if loaded:
            self.oouter.push(self.cur)
        self.oinner.push(tok)

    def on_fiber_end(self, tok):
        self.oinner.push(tok)

    def held_stop(self, outer_stop, inner_stop):
        return outer_stop



class CrdHold(_Pair):
    """Coordinate hold: emits the current outer coordinate once per inner element; the held
    stream follows the inner stream's stops."""

    def on_data(self, tok, loaded):
        self.oouter.push(self.cur)
        self.oinner.push(tok)

    def on_fiber_end(self, tok):
        self.oouter.push(tok)
        self.oinner.push(tok)

    def held_stop(self, outer_stop, inner_stop):
        return inner_stop


plain("crd_drop", CrdDrop)
plain("crd_hold", CrdHold)


class Locate(_OuterInner):
    """Locate into a dense level of ``dim`` coordinates: the outer stream holds one parent
    reference per inner fiber (as ``crd_hold``'s outer stream), the output ``ref`` is aligned
    token for token with the inner stream.  Inner data ``c`` -> ``cur * dim + c`` in the same
    cycle (latency 0, II 1, the walk of :class:`_OuterInner`); an ``N`` inner token or an ``N``
    parent (``cur``) -> ``N``; the inner stream's stops and ``D`` pass through.  A coordinate
    outside ``0 .. dim-1`` is a protocol error here (the RTL computes ``cur * dim + c`` modulo
    ``2**W`` regardless, as it does not check coordinates anywhere)."""

    outer_empty = True

    def __init__(self, name, ins, outs, *, dim: int):
        super().__init__(name, ins, outs)
        self.oref = outs["ref"]
        self.dim = dim

    def on_data(self, tok, loaded):
        if tok is EMPTY or self.cur is EMPTY:
            self.oref.push(EMPTY)
            return
        if not 0 <= tok < self.dim:
            raise self.error(f"inner coordinate {tok} outside dimension {self.dim}")
        self.oref.push(self.cur * self.dim + tok)

    def on_fiber_end(self, tok):
        self.oref.push(tok)

    def on_outer_end(self, outer_stop, inner_stop):
        self.oref.push(inner_stop)

    def on_done(self):
        self.oref.push(DONE)


@model("locate")
def _locate(b: Build) -> Locate:
    return Locate(b.name, b.ins, b.outs, dim=b.params["dim"])
