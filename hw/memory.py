"""RTL value load."""

from __future__ import annotations

from amaranth.hdl import Mux, Signal, unsigned
from amaranth.lib import memory
from amaranth.lib.wiring import In

from fuseflow.tokens import CRD_WIDTH, VAL_WIDTH

from .base import MemWrite, StreamPrimitive, bits_for
from .dram import ReadGate, attach, bus_members
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
    ECP5) ends at a register instead of running on into the output FIFO.

    ``mem``: the off-chip ``vals`` port (``hw.dram``): the read stage pops a data reference
    ``r`` once word ``r``'s line is resident."""

    def __init__(self, *, depth: int, cw: int = CRD_WIDTH, vw: int = VAL_WIDTH, depths=None, mem=None,
                 model=None):
        self.cw, self.vw, self.depth = cw, vw, depth
        self.mem, self.model = dict(mem or {}), model
        super().__init__({"ref": cw}, {"val": vw}, depths, {"vals_wr": In(MemWrite(bits_for(depth), vw))}
                         | bus_members(self.mem, cw))

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
                     read_free.eq(~read_valid | word_free)]
        if "vals" in self.mem:  # a data reference waits for its vals line
            g = attach(m, self, "vals", ReadGate(self.mem["vals"], self.model, cw))
            data = is_data(inp.payload, cw)
            pop_ok = ~data | g.ok
            m.d.comb += [g.word.eq(inp.payload[:cw]), g.want.eq(read_free & inp.valid & data),
                         inp.ready.eq(read_free & pop_ok)]
            take = inp.valid & pop_ok
        else:
            m.d.comb += inp.ready.eq(read_free)
            take = inp.valid
        m.d.comb += [rp.addr.eq(inp.payload[:cw]), rp.en.eq(read_free)]
        out = Mux(is_data(word_tok, cw), data_word(word, vw),
                  Mux(is_empty(word_tok, cw), data_word(0, vw), recast(word_tok, cw, vw)))
        with m.If(consumed):
            self.push(m, "val", out)
        with m.If(word_free):
            m.d.sync += [word_valid.eq(read_valid), word_tok.eq(read_tok), word.eq(rp.data)]
        with m.If(read_free):
            m.d.sync += [read_valid.eq(take), read_tok.eq(inp.payload)]



@rtl("array_load")
def _array_load(b: HwBuild):
    c = ArrayLoad(depth=b.params.get("vals_depth", 1), cw=b.cfg.cw, vw=b.cfg.vw, depths=b.depths,
                  mem=b.params.get("mem"), model=b.cfg.memory)
    return c, {"vals": ("vals_wr", c.depth, b.cfg.vw, "w", None)}
