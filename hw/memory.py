"""RTL value load."""

from __future__ import annotations

from amaranth.hdl import Mux, Signal, unsigned
from amaranth.lib import memory
from amaranth.lib.wiring import In

from fuseflow.tokens import CRD_WIDTH, VAL_WIDTH

from .base import MemWrite, StreamPrimitive, bits_for
from .registry import HwBuild, rtl
from .word import (
    data_word,
    is_data,
    is_empty,
    recast,
)


class ArrayLoad(StreamPrimitive):
    """Value load ``vals[ref]`` from a memory loaded through ``vals_wr``.  II 1, latency 2
    (sw_sim's ``ArrayLoad``): the read stage holds the token while the block RAM reads its
    address; the next stage registers the word read, so the RAM's clock-to-output (over 5 ns on
    ECP5) ends at a register instead of running on into the output FIFO."""

    def __init__(self, *, depth: int, cw: int = CRD_WIDTH, vw: int = VAL_WIDTH, depths=None):
        self.cw, self.vw, self.depth = cw, vw, depth
        super().__init__({"ref": cw}, {"val": vw}, depths, {"vals_wr": In(MemWrite(bits_for(depth), vw))})

    def logic(self, m):
        cw, vw = self.cw, self.vw
        inp = self.i_ref
        vals = memory.Memory(shape=unsigned(vw), depth=self.depth, init=[])
        m.submodules.vals = vals
        wp = vals.write_port()
        rp = vals.read_port(domain="sync")
        m.d.comb += [wp.addr.eq(self.vals_wr.addr), wp.data.eq(self.vals_wr.data), wp.en.eq(self.vals_wr.en)]
        read_valid, read_tok = Signal(), Signal(cw + 1)  # stage 1: the RAM is reading
        word_valid, word_tok, word = Signal(), Signal(cw + 1), Signal(vw)  # stage 2
        consumed, word_free, read_free = Signal(), Signal(), Signal()
        m.d.comb += [consumed.eq(word_valid & self.room()),
                     word_free.eq(~word_valid | consumed),
                     read_free.eq(~read_valid | word_free),
                     inp.ready.eq(read_free), rp.addr.eq(inp.payload[:cw]), rp.en.eq(read_free)]
        out = Mux(is_data(word_tok, cw), data_word(word, vw),
                  Mux(is_empty(word_tok, cw), data_word(0, vw), recast(word_tok, cw, vw)))
        with m.If(consumed):
            self.push(m, "val", out)
        with m.If(word_free):
            m.d.sync += [word_valid.eq(read_valid), word_tok.eq(read_tok), word.eq(rp.data)]
        with m.If(read_free):
            m.d.sync += [read_valid.eq(inp.valid), read_tok.eq(inp.payload)]



@rtl("array_load")
def _array_load(b: HwBuild):
    c = ArrayLoad(depth=b.params.get("vals_depth", 1), cw=b.cfg.cw, vw=b.cfg.vw, depths=b.depths)
    return c, {"vals": ("vals_wr", c.depth, b.cfg.vw, "w", None)}
