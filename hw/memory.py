"""RTL value load."""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Signal, unsigned
from amaranth.lib import memory
from amaranth.lib.wiring import In

from fuseflow.ir.tokens import CRD_WIDTH, VAL_WIDTH

from .base import MemWrite, StreamPrimitive, addr_bits
from .dram import ReadGate, attach, buffer_words, bus_members
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
    ``r`` once word ``r``'s line is resident.

    ``lanes`` W > 1 (a vector load, sw_sim's ``VecArrayLoad``): the memory is W lanes wide, one
    row per W values, so a reference ``r`` reads ``vals[r*W .. r*W+W-1]`` in one read (lane
    ``l`` in bits ``[l*vw, (l+1)*vw)``); the host still writes one value per address (value
    ``a`` into lane ``a mod W`` of row ``a / W``, a lane write enable).  Off chip, the read
    waits for the line of word ``r*W`` (a vector lies inside one line)."""

    def __init__(self, *, depth: int, cw: int = CRD_WIDTH, vw: int = VAL_WIDTH, depths=None, mem=None,
                 model=None, lanes: int = 1, buffered: bool = False):
        self.cw, self.vw, self.depth, self.lanes = cw, vw, depth, lanes
        self.mem, self.model = dict(mem or {}), model
        self.buffered = buffered and bool(self.mem)
        # line buffers: the port's three lines (hw.dram), addressed through the gate
        self.memory_depth = buffer_words(self.mem["vals"], model, lanes) if self.buffered else depth
        super().__init__({"ref": cw}, {"val": vw * lanes}, depths,
                         {"vals_wr": In(MemWrite(addr_bits(self.memory_depth), vw))} | bus_members(self.mem, cw))

    def _memory(self, m):
        """The values memory and its ports: one value per word, or (vectors) a row of
        ``lanes`` values per word written a lane at a time."""
        vw, lanes = self.vw, self.lanes
        if lanes == 1:
            vals = memory.Memory(shape=unsigned(vw), depth=self.memory_depth, init=[])
            m.submodules.vals = vals
            wp = vals.write_port()
            rp = vals.read_port(domain="sync")
            m.d.comb += [wp.addr.eq(self.vals_wr.addr), wp.data.eq(self.vals_wr.data), wp.en.eq(self.vals_wr.en)]
            return rp
        shift = lanes.bit_length() - 1
        vals = memory.Memory(shape=unsigned(vw * lanes), depth=-(-self.memory_depth // lanes), init=[])
        m.submodules.vals = vals
        wp = vals.write_port(granularity=vw)
        rp = vals.read_port(domain="sync")
        lane = self.vals_wr.addr[:shift]
        m.d.comb += [wp.addr.eq(self.vals_wr.addr[shift:]), wp.data.eq(self.vals_wr.data.replicate(lanes)),
                     wp.en.eq(Mux(self.vals_wr.en, Const(1, lanes) << lane, 0))]
        return rp

    def logic(self, m):
        cw, vw = self.cw, self.vw * self.lanes
        inp = self.i_ref
        rp = self._memory(m)
        read_valid, read_tok = Signal(), Signal(cw + 1)  # stage 1: the RAM is reading
        word_valid, word_tok, word = Signal(), Signal(cw + 1), Signal(vw)  # stage 2
        consumed, word_free, read_free = Signal(), Signal(), Signal()
        m.d.comb += [consumed.eq(word_valid & self.room()),
                     word_free.eq(~word_valid | consumed),
                     read_free.eq(~read_valid | word_free)]
        addr = inp.payload[:cw]
        if "vals" in self.mem:  # a data reference waits for its vals line
            g = attach(m, self, "vals", ReadGate(self.mem["vals"], self.model, cw, buffered=self.buffered))
            data = is_data(inp.payload, cw)
            pop_ok = ~data | g.ok
            shift = self.lanes.bit_length() - 1
            first = inp.payload[:cw] if self.lanes == 1 else inp.payload[:cw] << shift
            m.d.comb += [g.word.eq(first), g.look.eq(first), g.want.eq(read_free & inp.valid & data),
                         inp.ready.eq(read_free & pop_ok)]
            take = inp.valid & pop_ok
            if self.buffered:
                addr = g.look_addr >> shift  # the row of the vector's first word
        else:
            m.d.comb += inp.ready.eq(read_free)
            take = inp.valid
        m.d.comb += [rp.addr.eq(addr), rp.en.eq(read_free)]
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
                  mem=b.params.get("mem"), model=b.cfg.memory, lanes=b.lanes, buffered=b.cfg.line_buffers)
    return c, {"vals": ("vals_wr", c.depth, b.cfg.vw, "w", None)}
