"""RTL repeat primitives: repeat-signal generators (crd/ref and value streams) and the repeater."""

from __future__ import annotations

from amaranth.hdl import Signal

from fuseflow.ir.primitives.base import stream_kind
from fuseflow.ir.samml import StreamKind
from fuseflow.ir.tokens import CRD_WIDTH

from .base import StreamPrimitive
from .registry import HwBuild, rtl
from .word import data_word, done_word, is_data, is_done, is_empty, is_stop, level, stop_word


class RepSig(StreamPrimitive):
    """Repeat-signal generator: data/N -> R (data 1), stop -> S0, D -> D.  The input is read
    at width ``iw`` (default ``cw``; the value width when it repeats a value stream's shape),
    the repsig is ``cw`` wide."""

    def __init__(self, *, cw: int = CRD_WIDTH, iw: int | None = None, depths=None):
        self.cw, self.iw = cw, cw if iw is None else iw
        super().__init__({"in": self.iw}, {"repsig": cw}, depths)

    def logic(self, m):
        iw, cw = self.iw, self.cw
        inp = self.i_in
        tok = inp.payload
        with m.If(inp.valid & self.room()):
            self.pop(m, "in")
            with m.If(is_data(tok, iw) | is_empty(tok, iw)):
                self.push(m, "repsig", data_word(1, cw))
            with m.Elif(is_done(tok, iw)):
                self.push(m, "repsig", done_word(cw))
            with m.Else():
                self.push(m, "repsig", stop_word(0, cw))


class Repeat(StreamPrimitive):
    """Repeat: ref + repsig -> ref, holding the current reference in ``cur``.  ``rw`` is the
    width of the repeated stream (``cw`` for references, ``vw`` when it carries values)."""

    def __init__(self, *, cw: int = CRD_WIDTH, rw: int | None = None, depths=None):
        self.cw, self.rw = cw, rw or cw
        super().__init__({"ref": self.rw, "repsig": cw}, {"ref": self.rw}, depths)

    def logic(self, m):
        ws, w = self.cw, self.rw
        ref, rs = self.i_ref, self.i_repsig
        cur = Signal(w + 1)
        cur_valid = Signal()
        sig, head = rs.payload, ref.payload
        with m.If(rs.valid & self.room()):
            with m.If(is_data(sig, ws)):  # R
                with m.If(cur_valid):
                    self.push(m, "ref", cur)
                    self.pop(m, "repsig")
                with m.Elif(ref.valid):
                    self.push(m, "ref", head)
                    self.pop(m, "ref")
                    self.pop(m, "repsig")
                    m.d.sync += [cur.eq(head), cur_valid.eq(1)]
            with m.Elif(is_done(sig, ws)), m.If(ref.valid):
                self.push(m, "ref", done_word(w))
                self.pop(m, "ref")
                self.pop(m, "repsig")
            with m.Else():  # S
                with m.If(~cur_valid), m.If(ref.valid):
                    self.pop(m, "ref")
                    with m.If(is_stop(head, w)):
                        self.push(m, "ref", stop_word(level(head) + 1, w))
                        self.pop(m, "repsig")
                    with m.Else():
                        m.d.sync += [cur.eq(head), cur_valid.eq(1)]
                with m.Elif(ref.valid):
                    with m.If(is_stop(head, w)):
                        self.pop(m, "ref")
                        self.push(m, "ref", stop_word(level(head) + 1, w))
                    with m.Else():
                        self.push(m, "ref", stop_word(0, w))
                    m.d.sync += cur_valid.eq(0)
                    self.pop(m, "repsig")



@rtl("repsig")
def _repsig(b: HwBuild):
    iw = b.width(stream_kind(b.params.get("stream"), StreamKind.CRD))
    return RepSig(cw=b.cfg.cw, iw=iw, depths=b.depths), {}


@rtl("repeat")
def _repeat(b: HwBuild):
    sk = stream_kind(b.params.get("stream"), StreamKind.REF)
    return Repeat(cw=b.cfg.cw, rw=b.width(sk), depths=b.depths), {}
