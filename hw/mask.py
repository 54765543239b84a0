"""RTL coordinate mask."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import memory

from fuseflow.ir.masks import mask_params
from fuseflow.ir.samml import MaskPred
from fuseflow.ir.tokens import CRD_WIDTH

from .base import StreamPrimitive
from .registry import HwBuild, rtl
from .word import (
    done_word,
    is_data,
    is_done,
    level,
)


class CrdMask(StreamPrimitive):
    """Coordinate mask (see sw_sim.mask.CrdMask); the block pattern is a ROM of bits."""

    def __init__(self, *, pred: MaskPred, before: int = 0, after: int = 0, block: int = 1,
                 pattern: tuple[tuple[int, ...], ...] = (), cw: int = CRD_WIDTH, depths=None):
        self.pred, self.before, self.after, self.block, self.pattern, self.cw = pred, before, after, block, pattern, cw
        super().__init__({"outer": cw, "inner": cw, "ref": cw}, {"crd": cw, "ref": cw}, depths)

    def _keep(self, m: Module, i: Value, j: Value) -> Value:
        if self.pred is MaskPred.CAUSAL:
            return j <= i
        if self.pred is MaskPred.BAND:
            d = j.as_signed() - i.as_signed()
            return (d >= -self.before) & (d <= self.after)
        sh = self.block.bit_length() - 1
        rows, cols = len(self.pattern), len(self.pattern[0])
        bi, bj = i >> sh, j >> sh
        bits = [int(x) for row in self.pattern for x in row]
        mem = memory.Memory(shape=1, depth=len(bits), init=bits)
        m.submodules.pattern = mem
        rp = mem.read_port(domain="comb")
        m.d.comb += rp.addr.eq(bi * cols + bj)
        return (bi < rows) & (bj < cols) & rp.data

    def logic(self, m):
        w = self.cw
        outer, inner, ref = self.i_outer, self.i_inner, self.i_ref
        cur = Signal(w)
        cur_valid = Signal()
        tok, r, oh = inner.payload, ref.payload, outer.payload
        i = Mux(cur_valid, cur, oh[:w])
        keep = Signal()
        m.d.comb += keep.eq(self._keep(m, i, tok[:w]))

        def take():
            self.pop(m, "inner")
            self.pop(m, "ref")

        with m.If(inner.valid & ref.valid & self.room()):
            with m.If(is_data(tok, w)), m.If(cur_valid | outer.valid):
                with m.If(~cur_valid):
                    self.pop(m, "outer")
                    m.d.sync += [cur.eq(oh[:w]), cur_valid.eq(1)]
                take()
                with m.If(keep):
                    self.push(m, "crd", tok)
                    self.push(m, "ref", r)
            with m.Elif(outer.valid):
                with m.If(is_done(tok, w)):
                    self.pop(m, "outer")
                    take()
                    self.push(m, "crd", done_word(w))
                    self.push(m, "ref", done_word(w))
                with m.Elif(level(tok) == 0):
                    with m.If(~cur_valid):
                        self.pop(m, "outer")
                    m.d.sync += cur_valid.eq(0)
                    take()
                    self.push(m, "crd", tok)
                    self.push(m, "ref", tok)
                with m.Elif(~cur_valid & is_data(oh, w)):
                    self.pop(m, "outer")
                with m.Else():
                    self.pop(m, "outer")
                    m.d.sync += cur_valid.eq(0)
                    take()
                    self.push(m, "crd", tok)
                    self.push(m, "ref", tok)



@rtl("crd_mask")
def _crd_mask(b: HwBuild):
    return CrdMask(**mask_params("crd_mask", b.params), cw=b.cfg.cw, depths=b.depths), {}
