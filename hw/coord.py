"""RTL outer/inner coordinate walkers: coordinate drop and hold, locate."""

from __future__ import annotations

from amaranth.hdl import C, Mux, Signal, Value

from fuseflow.ir.tokens import CRD_WIDTH

from .base import StreamPrimitive
from .registry import HwBuild, plain, rtl
from .word import (
    data_word,
    done_word,
    empty_word,
    is_data,
    is_done,
    is_empty,
    level,
)


class _OuterInner(StreamPrimitive):
    """The walk of an outer stream against the inner stream nested under it (see
    sw_sim.coord._OuterInner).  Subclasses say what is pushed through the hooks ``emit_data``,
    ``emit_fiber_end`` (``S0``), ``emit_outer_end`` (``Sk``, k>=1) and ``emit_done``;
    ``outer_empty``: an ``N`` outer word is an element (it is loaded and popped like data)."""

    outer_empty = False

    def __init__(self, outs: dict[str, int], *, cw: int = CRD_WIDTH, depths=None):
        self.cw = cw
        super().__init__({"outer": cw, "inner": cw}, outs, depths)

    def emit_data(self, m, tok: Value, outer: Value, loaded: bool) -> None:  # pragma: no cover
        raise NotImplementedError

    def emit_fiber_end(self, m, tok: Value) -> None:  # pragma: no cover
        raise NotImplementedError

    def emit_outer_end(self, m, outer_stop: Value, inner_stop: Value) -> None:  # pragma: no cover
        raise NotImplementedError

    def emit_done(self, m) -> None:  # pragma: no cover
        raise NotImplementedError

    def outer_elem(self, oh: Value) -> Value:
        w = self.cw
        return is_data(oh, w) | is_empty(oh, w) if self.outer_empty else is_data(oh, w)

    def logic(self, m):
        w = self.cw
        outer, inner = self.i_outer, self.i_inner
        cur = Signal(w + 1)
        cur_valid = Signal()
        tok, oh = inner.payload, outer.payload
        with m.If(inner.valid & self.room()):
            with m.If(is_data(tok, w) | is_empty(tok, w)):
                with m.If(cur_valid):
                    self.pop(m, "inner")
                    self.emit_data(m, tok, cur, loaded=False)
                with m.Elif(outer.valid):
                    self.pop(m, "outer")
                    self.pop(m, "inner")
                    self.emit_data(m, tok, oh, loaded=True)
                    m.d.sync += [cur.eq(oh), cur_valid.eq(1)]
            with m.Elif(is_done(tok, w)), m.If(outer.valid):
                self.pop(m, "outer")
                self.pop(m, "inner")
                self.emit_done(m)
            with m.Elif(level(tok) == 0), m.If(cur_valid | outer.valid):
                with m.If(~cur_valid):
                    self.pop(m, "outer")
                m.d.sync += cur_valid.eq(0)
                self.pop(m, "inner")
                self.emit_fiber_end(m, tok)
            with m.Elif(outer.valid):
                with m.If(~cur_valid & self.outer_elem(oh)):
                    self.pop(m, "outer")
                with m.Else():
                    self.pop(m, "outer")
                    self.pop(m, "inner")
                    m.d.sync += cur_valid.eq(0)
                    self.emit_outer_end(m, oh, tok)



class _Pair(_OuterInner):
    """A walker with an outer and an inner output (drop, hold)."""

    hold = False

    def __init__(self, *, cw: int = CRD_WIDTH, depths=None):
        super().__init__({"outer": cw, "inner": cw}, cw=cw, depths=depths)

    def emit_data(self, m, tok, outer, loaded):
        self.push(m, "inner", tok)
        if loaded or self.hold:
            self.push(m, "outer", outer)

    def emit_fiber_end(self, m, tok):
        self.push(m, "inner", tok)
        if self.hold:
            self.push(m, "outer", tok)

    def emit_outer_end(self, m, outer_stop, inner_stop):
        self.push(m, "outer", inner_stop if self.hold else outer_stop)
        self.push(m, "inner", inner_stop)

    def emit_done(self, m):
        self.push(m, "outer", done_word(self.cw))
        self.push(m, "inner", done_word(self.cw))



class CrdDrop(_Pair):
    """Coordinate drop (see sw_sim.coord.CrdDrop)."""



class CrdHold(_Pair):
    """Coordinate hold (see sw_sim.coord.CrdHold)."""

    hold = True



plain("crd_drop", CrdDrop)
plain("crd_hold", CrdHold)


class Locate(_OuterInner):
    """Locate into a dense level (see sw_sim.coord.Locate): inner data ``c`` -> ``(cur * dim +
    c) mod 2**W`` in the same cycle, ``N`` (inner or parent) -> ``N``, stops and ``D`` pass
    through.  The multiply by the constant ``dim`` is combinational: shifted copies of
    ``cur`` summed by a balanced adder tree in logic (:func:`_times_constant`), not a DSP
    multiplier, whose unregistered path limited Fmax (GCN layer on ECP5: 84 MHz)."""

    outer_empty = True

    def __init__(self, *, dim: int, cw: int = CRD_WIDTH, depths=None):
        self.dim = dim
        super().__init__({"ref": cw}, cw=cw, depths=depths)

    def emit_data(self, m, tok, outer, loaded):
        w = self.cw
        pos = _times_constant(outer[:w], self.dim, w) + tok[:w]
        self.push(m, "ref", Mux(is_empty(tok, w) | is_empty(outer, w), empty_word(w), data_word(pos, w)))

    def emit_fiber_end(self, m, tok):
        self.push(m, "ref", tok)

    def emit_outer_end(self, m, outer_stop, inner_stop):
        self.push(m, "ref", inner_stop)

    def emit_done(self, m):
        self.push(m, "ref", done_word(self.cw))


def _times_constant(x, k: int, w: int):
    """``x * k mod 2**w`` as a balanced sum of ``x`` shifted by the set bits of ``k``."""
    terms = [(x << i)[:w] for i in range(min(k.bit_length(), w)) if k >> i & 1]
    if not terms:
        return C(0, w)
    while len(terms) > 1:
        pairs = [(terms[j] + terms[j + 1])[:w] for j in range(0, len(terms) - 1, 2)]
        terms = pairs + ([terms[-1]] if len(terms) % 2 else [])
    return terms[0]


@rtl("locate")
def _locate(b: HwBuild):
    return Locate(dim=b.params["dim"], cw=b.cfg.cw, depths=b.depths), {}
