"""RTL level primitives: root, level scanner, level and value writers."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import memory
from amaranth.lib.wiring import In, Out

from fuseflow.tensor import Format
from fuseflow.tokens import CRD_WIDTH, VAL_WIDTH

from .base import MemRead, MemWrite, StreamPrimitive, bits_for
from .registry import HwBuild, plain, rtl
from .word import (
    data_word,
    done_word,
    is_data,
    is_done,
    is_empty,
    is_stop,
    level,
    stop_word,
)

FIBER, END, IDLE = 0, 1, 2



class Root(StreamPrimitive):
    """Emits ``0, D`` once ``go`` is high.  Latency 0.

    Its two tokens are offered straight from a state register instead of through a channel
    FIFO: ``0`` is visible the cycle after ``go``, ``D`` the cycle after ``0`` is taken, which
    is what a FIFO of two or more slots filled in two consecutive cycles shows its consumer."""

    def __init__(self, *, cw: int = CRD_WIDTH, depths=None):
        self.cw = cw
        super().__init__({}, {"ref": cw}, depths, {"go": In(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        state = Signal(2)  # 0 waiting for go, 1 offering 0, 2 offering D, 3 finished
        out = self.o_ref
        m.d.comb += [out.valid.eq((state == 1) | (state == 2)),
                     out.payload.eq(Mux(state == 1, data_word(0, self.cw), done_word(self.cw)))]
        with m.If(((state == 0) & self.go) | (out.valid & out.ready)):
            m.d.sync += state.eq(state + 1)
        return m



class Scan(StreamPrimitive):
    """Level scanner.  Compressed: ``seg``/``crd`` memories loaded through ``seg_wr``/``crd_wr``;
    dense: dimension ``dim``.  Latency 2 (pipeline register, then fiber walk), II 1."""

    def __init__(self, *, compressed: bool, dim: int = 0, seg_depth: int = 2, crd_depth: int = 1,
                 cw: int = CRD_WIDTH, depths=None):
        self.compressed, self.dim, self.cw = compressed, dim, cw
        self.seg_depth, self.crd_depth = seg_depth, crd_depth
        extra = {}
        if compressed:
            extra = {"seg_wr": In(MemWrite(bits_for(seg_depth), cw)),
                     "crd_wr": In(MemWrite(bits_for(crd_depth), cw))}
        super().__init__({"ref": cw}, {"crd": cw, "ref": cw}, depths, extra)

    def logic(self, m):
        w = self.cw
        inp = self.i_ref
        pipe_valid = Signal()
        pipe_tok = Signal(w + 1)
        mode = Signal(2, init=IDLE)
        p, hi = Signal(w), Signal(w)
        p_next = Signal(w)
        consumed = Signal()
        pipe_free = Signal()
        m.d.comb += pipe_free.eq(~pipe_valid | consumed)

        if self.compressed:
            seg = memory.Memory(shape=unsigned(w), depth=self.seg_depth, init=[])
            crd = memory.Memory(shape=unsigned(w), depth=self.crd_depth, init=[])
            m.submodules.seg = seg
            m.submodules.crd = crd
            for mem, port in ((seg, self.seg_wr), (crd, self.crd_wr)):
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(port.addr), wp.data.eq(port.data), wp.en.eq(port.en)]
            seg_lo = seg.read_port(domain="sync")
            seg_hi = seg.read_port(domain="sync")
            crd_rp = crd.read_port(domain="sync")
            r = inp.payload[:w]
            m.d.comb += [seg_lo.addr.eq(r), seg_hi.addr.eq(r + 1), seg_lo.en.eq(pipe_free),
                         seg_hi.en.eq(pipe_free), crd_rp.addr.eq(p_next), crd_rp.en.eq(1)]
            pipe_lo, pipe_hi = seg_lo.data, seg_hi.data
            crd_out = crd_rp.data
        else:
            # Only the fiber start r * dim is registered (the multiplier is one DSP block).  The
            # coordinate is a counter beside the position, and the fiber ends when it reaches
            # dim - 1: no end register, no subtractor.
            pipe_lo = Signal(w)
            with m.If(pipe_free):
                m.d.sync += pipe_lo.eq(inp.payload[:w] * self.dim)
            pipe_hi = 0
            k = Signal(range(max(self.dim, 1) + 1))
            crd_out = k

        # The words pushed, chosen outside the control flow so that the crd memory's read
        # data passes one multiplexer (fiber or control word) on its way into the FIFO.
        ctl_word = Mux(is_stop(pipe_tok, w), stop_word(level(pipe_tok) + 1, w),
                       Mux(mode == END, stop_word(0, w), done_word(w)))
        crd_word, ref_word = Signal(w + 1), Signal(w + 1)
        m.d.comb += [crd_word.eq(Mux(mode == FIBER, data_word(crd_out, w), ctl_word)),
                     ref_word.eq(Mux(mode == FIBER, data_word(p, w), ctl_word)),
                     self._fifos["crd"].w_data.eq(crd_word), self._fifos["ref"].w_data.eq(ref_word)]
        m.d.comb += p_next.eq(p)
        with m.If(self.room()):
            with m.If(mode == FIBER):
                self.push(m, "crd")
                self.push(m, "ref")
                m.d.comb += p_next.eq(p + 1)
                m.d.sync += p.eq(p + 1)
                last = (p + 1)[:w] == hi if self.compressed else k == self.dim - 1
                with m.If(last):
                    m.d.sync += mode.eq(END)
                if not self.compressed:
                    m.d.sync += k.eq(k + 1)
            with m.Elif(pipe_valid):
                with m.If(is_stop(pipe_tok, w)):
                    self.push(m, "crd")
                    self.push(m, "ref")
                    m.d.comb += consumed.eq(1)
                    m.d.sync += mode.eq(IDLE)
                with m.Elif(is_done(pipe_tok, w)):
                    self.push(m, "crd")  # S0 closing the last fiber, then D
                    self.push(m, "ref")
                    with m.If(mode == END):
                        m.d.sync += mode.eq(IDLE)
                    with m.Else():
                        m.d.comb += consumed.eq(1)
                with m.Else():
                    with m.If(mode == END):
                        self.push(m, "crd")
                        self.push(m, "ref")
                    empty = is_empty(pipe_tok, w)
                    new_lo = Mux(empty, 0, pipe_lo)
                    new_hi = Mux(empty, 0, pipe_hi)
                    m.d.comb += [p_next.eq(new_lo), consumed.eq(1)]
                    # a dense fiber is never empty (dim >= 1): no compare on the new bounds
                    nonempty = (new_lo < new_hi) if self.compressed else (~empty if self.dim else 0)
                    m.d.sync += [p.eq(new_lo), hi.eq(new_hi), mode.eq(Mux(nonempty, FIBER, END))]
                    if not self.compressed:
                        m.d.sync += k.eq(0)
        m.d.comb += inp.ready.eq(pipe_free)
        with m.If(pipe_free):
            m.d.sync += [pipe_valid.eq(inp.valid), pipe_tok.eq(inp.payload)]



class LevelWrite(StreamPrimitive):
    """Level writer.  Compressed: fills ``seg``/``crd`` memories (host reads them through
    ``seg_rd``/``crd_rd``; ``seg_len``/``crd_len`` count entries).  Dense: counts coordinates.
    Pops every cycle; ``done`` rises after ``D``."""

    def __init__(self, *, compressed: bool, seg_depth: int = 2, crd_depth: int = 1, cw: int = CRD_WIDTH,
                 skip_empty: bool = False):
        self.compressed, self.cw, self.skip_empty = compressed, cw, skip_empty
        self.seg_depth, self.crd_depth = seg_depth, crd_depth
        extra = {"done": Out(1), "seg_len": Out(32), "crd_len": Out(32)}
        if compressed:
            extra |= {"seg_rd": In(MemRead(bits_for(seg_depth), cw)),
                      "crd_rd": In(MemRead(bits_for(crd_depth), cw))}
        super().__init__({"crd": cw}, {}, None, extra)

    def logic(self, m):
        w = self.cw
        inp = self.i_crd
        seg_n = Signal(32, init=1)
        crd_n = Signal(32)
        done = Signal()
        m.d.comb += [self.done.eq(done), self.seg_len.eq(seg_n), self.crd_len.eq(crd_n), inp.ready.eq(1)]
        tok = inp.payload
        if self.compressed:
            seg = memory.Memory(shape=unsigned(w), depth=self.seg_depth, init=[])
            crd = memory.Memory(shape=unsigned(w), depth=self.crd_depth, init=[])
            m.submodules.seg, m.submodules.crd = seg, crd
            seg_wp, crd_wp = seg.write_port(), crd.write_port()
            for mem, port in ((seg, self.seg_rd), (crd, self.crd_rd)):
                rp = mem.read_port(domain="sync")
                m.d.comb += [rp.addr.eq(port.addr), port.data.eq(rp.data)]
            m.d.comb += [seg_wp.addr.eq(seg_n), seg_wp.data.eq(crd_n), crd_wp.addr.eq(crd_n),
                         crd_wp.data.eq(tok[:w])]
        fiber_open = Signal()  # a coordinate arrived since the last stop
        closes = fiber_open if self.skip_empty else 1
        with m.If(inp.valid):
            with m.If(is_data(tok, w)):
                m.d.sync += [crd_n.eq(crd_n + 1), fiber_open.eq(1)]
                if self.compressed:
                    m.d.comb += crd_wp.en.eq(1)
            with m.Elif(is_stop(tok, w)):
                m.d.sync += fiber_open.eq(0)
                with m.If(closes):
                    m.d.sync += seg_n.eq(seg_n + 1)
                    if self.compressed:
                        m.d.comb += seg_wp.en.eq(1)
            with m.Elif(is_done(tok, w)):
                m.d.sync += done.eq(1)



class ValsWrite(StreamPrimitive):
    """Values writer: fills ``vals`` (host reads through ``vals_rd``; ``vals_len`` counts)."""

    def __init__(self, *, depth: int, vw: int = VAL_WIDTH):
        self.vw, self.depth = vw, depth
        super().__init__({"val": vw}, {}, None, {"done": Out(1), "vals_len": Out(32),
                                                 "vals_rd": In(MemRead(bits_for(depth), vw))})

    def logic(self, m):
        w = self.vw
        inp = self.i_val
        n = Signal(32)
        done = Signal()
        vals = memory.Memory(shape=unsigned(w), depth=self.depth, init=[])
        m.submodules.vals = vals
        wp = vals.write_port()
        rp = vals.read_port(domain="sync")
        tok = inp.payload
        m.d.comb += [self.done.eq(done), self.vals_len.eq(n), inp.ready.eq(1),
                     rp.addr.eq(self.vals_rd.addr), self.vals_rd.data.eq(rp.data),
                     wp.addr.eq(n), wp.data.eq(Mux(is_data(tok, w), tok[:w], 0))]
        with m.If(inp.valid):
            with m.If(is_data(tok, w) | is_empty(tok, w)):
                m.d.comb += wp.en.eq(1)
                m.d.sync += n.eq(n + 1)
            with m.Elif(is_done(tok, w)):
                m.d.sync += done.eq(1)



@rtl("scan")
def _scan(b: HwBuild):
    p, cw = b.params, b.cfg.cw
    compressed = Format.parse(p["format"]) is Format.COMPRESSED
    c = Scan(compressed=compressed, dim=p.get("dim", 0), seg_depth=p.get("seg_depth", 2),
             crd_depth=p.get("crd_depth", 1), cw=cw, depths=b.depths)
    if not compressed:
        return c, {}
    return c, {"seg": ("seg_wr", c.seg_depth, cw, "w", None), "crd": ("crd_wr", c.crd_depth, cw, "w", None)}


@rtl("write")
def _write(b: HwBuild):
    p, cw = b.params, b.cfg.cw
    compressed = Format.parse(p["format"]) is Format.COMPRESSED
    c = LevelWrite(compressed=compressed, seg_depth=p.get("seg_depth", 2), crd_depth=p.get("crd_depth", 1),
                   cw=cw, skip_empty=bool(p.get("skip_empty", False)))
    if not compressed:
        return c, {}
    return c, {"seg": ("seg_rd", c.seg_depth, cw, "r", "seg_len"), "crd": ("crd_rd", c.crd_depth, cw, "r", "crd_len")}


@rtl("vals_write")
def _vals_write(b: HwBuild):
    c = ValsWrite(depth=b.params.get("vals_depth", 1), vw=b.cfg.vw)
    return c, {"vals": ("vals_rd", c.depth, b.cfg.vw, "r", "vals_len")}


plain("root", Root)
