"""RTL stream utilities: broadcast and stop-token drop."""

from __future__ import annotations

from amaranth.hdl import Signal

from fuseflow.ir.primitives.base import stream_kind
from fuseflow.ir.samml import StreamKind
from fuseflow.ir.tokens import CRD_WIDTH

from .base import StreamPrimitive
from .registry import HwBuild, rtl
from .word import (
    done_word,
    is_done,
    is_stop,
    level,
    stop_word,
)


class Broadcast(StreamPrimitive):
    """Fan-out of one stream to ``n`` outputs (all take the token in the same cycle)."""

    def __init__(self, *, n: int, width: int = CRD_WIDTH, depths=None):
        self.n = n
        super().__init__({"in": width}, {f"out{i}": width for i in range(n)}, depths)

    def logic(self, m):
        inp = self.i_in
        with m.If(inp.valid & self.room()):
            self.pop(m, "in")
            for i in range(self.n):
                self.push(m, f"out{i}", inp.payload)



class StknDrop(StreamPrimitive):
    """Stop-token drop (see sw_sim.stream.StknDrop): one held token, II 1."""

    def __init__(self, *, width: int = CRD_WIDTH, depths=None):
        self.w = width
        super().__init__({"in": width}, {"out": width}, depths)

    def logic(self, m):
        w = self.w
        inp = self.i_in
        tok = inp.payload
        held = Signal(w + 1)
        held_valid = Signal()
        lead = Signal(init=1)
        held_stop = held_valid & is_stop(held, w)
        with m.If(inp.valid & self.room()):
            with m.If(is_done(tok, w)):
                with m.If(held_valid):
                    self.push(m, "out", held)
                    m.d.sync += held_valid.eq(0)
                with m.Else():
                    self.push(m, "out", done_word(w))
                    self.pop(m, "in")
            with m.Elif(is_stop(tok, w)):
                self.pop(m, "in")
                with m.If(held_stop), m.If(level(tok) > level(held)):
                    m.d.sync += held.eq(stop_word(level(tok), w))
                with m.Else():
                    with m.If(held_valid):
                        self.push(m, "out", held)
                    m.d.sync += [held.eq(tok), held_valid.eq(1)]
            with m.Else():
                self.pop(m, "in")
                with m.If(held_valid & ~lead):
                    self.push(m, "out", held)
                m.d.sync += [held.eq(tok), held_valid.eq(1), lead.eq(0)]



@rtl("stkn_drop")
def _stkn_drop(b: HwBuild):
    return StknDrop(width=b.width(stream_kind(b.params.get("stream"), StreamKind.CRD)), depths=b.depths), {}


@rtl("broadcast")
def _broadcast(b: HwBuild):
    sk = stream_kind(b.params.get("stream"), StreamKind.CRD)
    return Broadcast(n=b.params["n"], width=b.width(sk), depths=b.depths), {}
