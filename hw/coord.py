"""RTL outer/inner coordinate walkers: coordinate drop and hold."""

from __future__ import annotations

from amaranth.hdl import Signal

from fuseflow.tokens import CRD_WIDTH

from .base import StreamPrimitive
from .registry import plain
from .word import (
    done_word,
    is_data,
    is_done,
    is_empty,
    level,
)


class _OuterInner(StreamPrimitive):
    hold = False

    def __init__(self, *, cw: int = CRD_WIDTH, depths=None):
        self.cw = cw
        super().__init__({"outer": cw, "inner": cw}, {"outer": cw, "inner": cw}, depths)

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
                    self.push(m, "inner", tok)
                    if self.hold:
                        self.push(m, "outer", cur)
                with m.Elif(outer.valid):
                    self.pop(m, "outer")
                    self.pop(m, "inner")
                    self.push(m, "inner", tok)
                    self.push(m, "outer", oh)
                    m.d.sync += [cur.eq(oh), cur_valid.eq(1)]
            with m.Elif(is_done(tok, w)), m.If(outer.valid):
                self.pop(m, "outer")
                self.pop(m, "inner")
                self.push(m, "outer", done_word(w))
                self.push(m, "inner", done_word(w))
            with m.Elif(level(tok) == 0), m.If(cur_valid | outer.valid):
                with m.If(~cur_valid):
                    self.pop(m, "outer")
                m.d.sync += cur_valid.eq(0)
                self.pop(m, "inner")
                self.push(m, "inner", tok)
                if self.hold:
                    self.push(m, "outer", tok)
            with m.Elif(outer.valid):
                with m.If(~cur_valid & is_data(oh, w)):
                    self.pop(m, "outer")
                with m.Else():
                    self.pop(m, "outer")
                    self.pop(m, "inner")
                    m.d.sync += cur_valid.eq(0)
                    self.push(m, "outer", tok if self.hold else oh)
                    self.push(m, "inner", tok)



class CrdDrop(_OuterInner):
    """Coordinate drop (see sw_sim.coord.CrdDrop)."""



class CrdHold(_OuterInner):
    """Coordinate hold (see sw_sim.coord.CrdHold)."""

    hold = True



plain("crd_drop", CrdDrop)
plain("crd_hold", CrdHold)
