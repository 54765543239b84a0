"""RTL level primitives: root, level scanner, level and value writers."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import memory
from amaranth.lib.wiring import In, Out

from fuseflow.ir.primitives.level import SKIP_GALLOP_SHIFT, SKIP_LINEAR
from fuseflow.ir.tensor import Format
from fuseflow.ir.tokens import CRD_WIDTH, VAL_WIDTH

from .base import MemRead, MemWrite, StreamPrimitive, addr_bits
from .dram import ReadGate, WriteGate, attach, buffer_words, bus_members
from .registry import HwBuild, plain, rtl
from .word import data_word, done_word, is_data, is_done, is_empty, is_stop, level, stop_word

FIBER, END, IDLE, SEARCH = 0, 1, 2, 3



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
    """Level scanner.  Compressed: ``seg``/``crd`` memories loaded through ``seg_wr``/``crd_wr``
    (a non-unique level is scanned the same way); singleton (``singleton``, with
    ``compressed``): the ``crd`` memory only, the fibre of reference ``r`` is position ``r``
    (bounds ``r, r + 1`` from a register instead of the seg reads); dense: dimension ``dim``.
    Latency 2 (pipeline register, then fiber walk), II 1.

    ``skip`` (compressed only): input ``skip`` takes an intersect's skip requests, and the
    scanner jumps ahead by a search in its ``crd`` memory (see sw_sim.level.SkipScan).

    ``mem`` (compressed, no skip): the off-chip ``seg`` / ``crd`` ports (``hw.dram``): the front
    stage pops a data reference ``r`` once ``seg`` words ``r`` and ``r + 1`` are resident, the
    back stage emits position ``p`` once ``crd`` word ``p`` is."""

    def __init__(self, *, compressed: bool, dim: int = 0, seg_depth: int = 2, crd_depth: int = 1,
                 cw: int = CRD_WIDTH, depths=None, skip: bool = False, mem=None, model=None,
                 singleton: bool = False, buffered: bool = False, offset: int = 0, stride: int = 1):
        if (offset or stride != 1) and compressed:
            raise ValueError("parameters 'offset' / 'stride' split a dense level")
        self.offset, self.stride = offset, stride  # dense: coordinates offset, offset + stride, ...
        if singleton and not compressed:
            raise ValueError("a singleton scanner reads a crd memory: pass compressed=True with singleton=True")
        if skip and (singleton or not compressed):
            raise ValueError("parameter 'skip' needs a compressed level; a dense or singleton scanner cannot skip")
        if mem and (skip or not compressed):
            raise ValueError("off-chip memory ports need a compressed scanner without skip")
        if singleton and "seg" in (mem or {}):
            raise ValueError("a singleton level has no seg array to read off chip")
        self.compressed, self.dim, self.cw, self.skip = compressed, dim, cw, skip
        self.singleton = singleton
        self.seg_depth, self.crd_depth = seg_depth, crd_depth
        self.mem, self.model = dict(mem or {}), model
        self.buffered = buffered and bool(self.mem)
        extra = bus_members(self.mem, cw)
        if compressed and not singleton:
            extra |= {"seg_wr": In(MemWrite(addr_bits(self.memory_depth("seg")), cw))}
        if compressed:
            extra |= {"crd_wr": In(MemWrite(addr_bits(self.memory_depth("crd")), cw))}
        ins = {"ref": cw, "skip": cw} if skip else {"ref": cw}
        super().__init__(ins, {"crd": cw, "ref": cw}, depths, extra)

    def memory_depth(self, array: str) -> int:
        """Entries of the node's memory of ``array``: the array, or (line buffers) the port's lines."""
        if self.buffered and array in self.mem:
            return buffer_words(self.mem[array], self.model)
        return self.seg_depth if array == "seg" else self.crd_depth

    def logic(self, m):
        w = self.cw
        inp = self.i_ref
        s = SimpleNamespace(pipe_valid=Signal(), pipe_tok=Signal(w + 1), mode=Signal(2, init=IDLE),
                            p=Signal(w), hi=Signal(w), p_next=Signal(w), consumed=Signal(), crd_ok=None)
        pipe_free = Signal()
        m.d.comb += pipe_free.eq(~s.pipe_valid | s.consumed)
        seg_ok = None  # off-chip seg: the head token may be popped (control, or lines resident)

        if self.compressed:
            r = inp.payload[:w]
            gates = {}
            if "seg" in self.mem:  # a data reference waits for its seg lines
                gates["seg"] = attach(m, self, "seg", ReadGate(self.mem["seg"], self.model, w, pair=True,
                                                               buffered=self.buffered))
                m.d.comb += gates["seg"].look.eq(r)
            if "crd" in self.mem:  # a FIBER step waits for its crd line
                gates["crd"] = attach(m, self, "crd", ReadGate(self.mem["crd"], self.model, w,
                                                               buffered=self.buffered))
                m.d.comb += gates["crd"].look.eq(s.p_next)
            crd = memory.Memory(shape=unsigned(w), depth=self.memory_depth("crd"), init=[])
            m.submodules.crd = crd
            wp = crd.write_port()
            m.d.comb += [wp.addr.eq(self.crd_wr.addr), wp.data.eq(self.crd_wr.data), wp.en.eq(self.crd_wr.en)]
            crd_rp = crd.read_port(domain="sync")
            m.d.comb += [crd_rp.addr.eq(gates["crd"].look_addr if "crd" in gates else s.p_next), crd_rp.en.eq(1)]
            s.crd_out = crd_rp.data
            if self.singleton:
                # the fibre of reference r is position r: its bounds are registered like the
                # seg reads would be (visible with the token in the pipeline register)
                s.pipe_lo = Signal(w)
                with m.If(pipe_free):
                    m.d.sync += s.pipe_lo.eq(r)
                s.pipe_hi = (s.pipe_lo + 1)[:w]
            else:
                seg = memory.Memory(shape=unsigned(w), depth=self.memory_depth("seg"), init=[])
                m.submodules.seg = seg
                wp = seg.write_port()
                m.d.comb += [wp.addr.eq(self.seg_wr.addr), wp.data.eq(self.seg_wr.data), wp.en.eq(self.seg_wr.en)]
                seg_lo = seg.read_port(domain="sync")
                seg_hi = seg.read_port(domain="sync")
                lo_addr, hi_addr = ((gates["seg"].look_addr, gates["seg"].look_addr_hi) if "seg" in gates
                                    else (r, r + 1))
                m.d.comb += [seg_lo.addr.eq(lo_addr), seg_hi.addr.eq(hi_addr), seg_lo.en.eq(pipe_free),
                             seg_hi.en.eq(pipe_free)]
                s.pipe_lo, s.pipe_hi = seg_lo.data, seg_hi.data
            if "seg" in gates:
                g = gates["seg"]
                data = is_data(inp.payload, w)
                m.d.comb += [g.word.eq(r), g.want.eq(pipe_free & inp.valid & data)]
                seg_ok = ~data | g.ok
            if "crd" in gates:
                g = gates["crd"]
                m.d.comb += [g.word.eq(s.p), g.want.eq(self.room() & (s.mode == FIBER))]
                s.crd_ok = g.ok
        else:
            # Only the fiber start r * dim is registered (the multiplier is one DSP block).  The
            # coordinate is a counter beside the position, and the fiber ends when it reaches
            # dim - 1: no end register, no subtractor.
            s.pipe_lo = Signal(w)
            with m.If(pipe_free):
                m.d.sync += s.pipe_lo.eq(inp.payload[:w] * self.dim)
            s.pipe_hi = 0
            s.k = Signal(range(max(self.dim, 1) + self.stride + 1))
            s.crd_out = s.k

        # The words pushed, chosen outside the control flow so that the crd memory's read
        # data passes one multiplexer (fiber or control word) on its way into the FIFO.
        mode, pipe_tok = s.mode, s.pipe_tok
        ctl_word = Mux(is_stop(pipe_tok, w), stop_word(level(pipe_tok) + 1, w),
                       Mux(mode == END, stop_word(0, w), done_word(w)))
        crd_word, ref_word = Signal(w + 1), Signal(w + 1)
        if self.skip:
            sk = self._skip_signals(m, s)
            # a search that finds its position emits it (the coordinate read now or held)
            ctl_word = Mux(mode == SEARCH, data_word(sk.found_crd, w), ctl_word)
            m.d.comb += [crd_word.eq(Mux(mode == FIBER, data_word(s.crd_out, w), ctl_word)),
                         ref_word.eq(Mux(mode == FIBER, data_word(s.p, w),
                                         Mux(mode == SEARCH, data_word(sk.sl_s, w), ctl_word)))]
        else:
            m.d.comb += [crd_word.eq(Mux(mode == FIBER, data_word(s.crd_out, w), ctl_word)),
                         ref_word.eq(Mux(mode == FIBER, data_word(s.p, w), ctl_word))]
        m.d.comb += [self._fifos["crd"].w_data.eq(crd_word), self._fifos["ref"].w_data.eq(ref_word)]
        m.d.comb += s.p_next.eq(s.p)
        if self.skip:
            with m.If(sk.acts):
                self._skip_step(m, s, sk)
            with m.Elif(self.room()):
                self._back(m, s)
        else:
            with m.If(self.room()):
                self._back(m, s)
        if seg_ok is None:
            m.d.comb += inp.ready.eq(pipe_free)
            take = inp.valid
        else:
            m.d.comb += inp.ready.eq(pipe_free & seg_ok)
            take = inp.valid & seg_ok
        with m.If(pipe_free):
            m.d.sync += [s.pipe_valid.eq(take), s.pipe_tok.eq(inp.payload)]

    def _back(self, m, s):
        """The back stage (the outputs have room)."""
        w, mode, p, hi, pipe_tok = self.cw, s.mode, s.p, s.hi, s.pipe_tok
        with m.If(mode == FIBER), (m.If(s.crd_ok) if s.crd_ok is not None else nullcontext()):
            self.push(m, "crd")
            self.push(m, "ref")
            step = 1 if self.compressed else self.stride
            m.d.comb += s.p_next.eq(p + step)
            m.d.sync += p.eq(p + step)
            # dense: the last coordinate of the lane's share, a constant
            last = (p + 1)[:w] == hi if self.compressed else s.k == self.offset + (self.dim - 1 - self.offset) // step * step
            with m.If(last):
                m.d.sync += mode.eq(END)
            if not self.compressed:
                m.d.sync += s.k.eq(s.k + step)
        with m.Elif(s.pipe_valid):
            with m.If(is_stop(pipe_tok, w)):
                self.push(m, "crd")
                self.push(m, "ref")
                m.d.comb += s.consumed.eq(1)
                m.d.sync += mode.eq(IDLE)
            with m.Elif(is_done(pipe_tok, w)):
                self.push(m, "crd")  # S0 closing the last fiber, then D
                self.push(m, "ref")
                with m.If(mode == END):
                    m.d.sync += mode.eq(IDLE)
                with m.Else():
                    m.d.comb += s.consumed.eq(1)
            with m.Else():
                with m.If(mode == END):
                    self.push(m, "crd")
                    self.push(m, "ref")
                empty = is_empty(pipe_tok, w)
                new_lo = Mux(empty, 0, s.pipe_lo)
                new_hi = Mux(empty, 0, s.pipe_hi)
                first = new_lo if self.compressed else new_lo + self.offset  # a dense lane's first position
                m.d.comb += [s.p_next.eq(first), s.consumed.eq(1)]
                # a dense fiber is never empty (dim > offset): no compare on the new bounds
                nonempty = (new_lo < new_hi) if self.compressed else (~empty if self.dim > self.offset else 0)
                m.d.sync += [p.eq(first), hi.eq(new_hi), mode.eq(Mux(nonempty, FIBER, END))]
                if not self.compressed:
                    m.d.sync += s.k.eq(self.offset)

    def _skip_signals(self, m, s) -> SimpleNamespace:
        """The skip request of this cycle and the search's narrowing (see SkipScan)."""
        w, mode, p, v = self.cw, s.mode, s.p, s.crd_out
        tok = self.i_skip.payload
        m.d.comb += self.i_skip.ready.eq(1)  # every request is taken the cycle it arrives
        # stop tokens queued in the crd output FIFO: a request is fresh only when there is none
        f = self._fifos["crd"]
        queued = Signal(range(self.depths["crd"] + 1))
        enq = f.w_en & f.w_rdy & is_stop(f.w_data, w)
        deq = f.r_en & f.r_rdy & is_stop(f.r_data, w)
        with m.If(enq & ~deq):
            m.d.sync += queued.eq(queued + 1)
        with m.Elif(deq & ~enq):
            m.d.sync += queued.eq(queued - 1)
        fresh = self.i_skip.valid & (queued == 0)
        target = tok[:w]
        sk = SimpleNamespace(t=Signal(w), v0=Signal(w), sl=Signal(w), sh=Signal(w), known=Signal(),
                             sh_crd=Signal(w), j=Signal(w), lin=Signal(range(SKIP_LINEAR + 1)))
        sk.end = fresh & is_stop(tok, w) & ((mode == FIBER) | (mode == SEARCH))
        sk.accept = fresh & is_data(tok, w) & (mode == FIBER) & (v < target)
        sk.acts = sk.end | sk.accept | (mode == SEARCH)
        # accepting target t at p (crd[p] = v < t): search [p + 1, min(hi, p + t - v)]
        bound = Signal(w + 1)
        m.d.comb += bound.eq(p + (target - v))
        sk.sl_a, sk.sh_a = Signal(w + 1), Signal(w + 1)
        m.d.comb += [sk.sl_a.eq(p + 1), sk.sh_a.eq(Mux(bound < s.hi, bound, s.hi))]
        # a SEARCH cycle: probe p, v = crd[p]
        t = sk.t
        sk.hit = Signal()
        m.d.comb += sk.hit.eq(v >= t)
        over, under = Signal(w), Signal(w + 1)
        m.d.comb += [over.eq(v - t), under.eq(p + (t - v))]
        sk.sl_s, sk.sh_s, sk.known_s = Signal(w + 1), Signal(w + 1), Signal()
        sk.j_s, sk.lin_s = Signal(w), Signal(range(SKIP_LINEAR + 1))
        gallop = Signal()
        m.d.comb += gallop.eq((t - v)[:w] >= ((v - sk.v0)[:w] << SKIP_GALLOP_SHIFT))
        m.d.comb += [sk.j_s.eq(sk.j), sk.lin_s.eq(sk.lin)]
        with m.If(sk.hit):
            m.d.comb += [sk.sh_s.eq(p), sk.known_s.eq(1),
                         sk.sl_s.eq(Mux(over < p - sk.sl, p - over, sk.sl))]
        with m.Else():
            lower = under < sk.sh
            m.d.comb += [sk.sl_s.eq(p + 1), sk.sh_s.eq(Mux(lower, under, sk.sh)),
                         sk.known_s.eq(Mux(lower, 0, sk.known))]
            with m.If(sk.lin != 0):
                m.d.comb += sk.lin_s.eq(sk.lin - 1)
                with m.If((sk.lin == 1) & gallop):
                    m.d.comb += sk.j_s.eq(1)
            with m.Elif(sk.j != 0):
                m.d.comb += sk.j_s.eq(Cat(Const(1, 1), sk.j[:w - 1]))  # 2j + 1, saturating
        sk.found_crd = Mux(sk.hit, v, sk.sh_crd)
        return sk

    def _skip_step(self, m, s, sk):
        """Instead of the back stage: a request ends the fiber or starts a search, or a
        search cycle narrows; then the next probe, or the position found."""
        with m.If(sk.end):
            m.d.sync += s.mode.eq(END)
        with m.Else():
            self._narrow(m, s, sk)

    def _narrow(self, m, s, sk):
        mode, p, hi = s.mode, s.p, s.hi
        accept = sk.accept
        sl, sh = Signal(len(sk.sl_a)), Signal(len(sk.sh_a))
        known, j, hit = Signal(), Signal(len(sk.j)), Signal()
        m.d.comb += [sl.eq(Mux(accept, sk.sl_a, sk.sl_s)), sh.eq(Mux(accept, sk.sh_a, sk.sh_s)),
                     known.eq(~accept & sk.known_s), j.eq(Mux(accept, 0, sk.j_s)),
                     hit.eq(~accept & sk.hit)]
        with m.If(accept):
            m.d.sync += [sk.t.eq(self.i_skip.payload[:self.cw]), sk.v0.eq(s.crd_out)]
        with m.Elif(sk.hit):
            m.d.sync += sk.sh_crd.eq(s.crd_out)
        probe = Signal(len(sl))
        mid = (sl + sh) >> 1
        ahead = sl + j
        m.d.comb += probe.eq(Mux(ahead < mid, ahead, mid))
        with m.If(sl != sh):
            m.d.comb += s.p_next.eq(probe)
            m.d.sync += [mode.eq(SEARCH), p.eq(probe), sk.sl.eq(sl), sk.sh.eq(sh), sk.known.eq(known),
                         sk.j.eq(j), sk.lin.eq(Mux(accept, SKIP_LINEAR, sk.lin_s))]
        with m.Elif(sl == hi):
            m.d.sync += mode.eq(END)
        with m.Elif((hit | known) & self.room()):
            self.push(m, "crd")
            self.push(m, "ref")
            m.d.comb += s.p_next.eq(sl + 1)
            m.d.sync += [p.eq(sl + 1), mode.eq(Mux(sl + 1 == hi, END, FIBER))]
        with m.Else():
            m.d.comb += s.p_next.eq(sl)
            m.d.sync += [p.eq(sl), mode.eq(FIBER)]


def _write_gates(m, node, valid, tok, w: int, writes: dict, span: int = 1) -> Signal | None:
    """The off-chip writes of a writer: one :class:`WriteGate` per array of ``node.mem``, fed
    with ``writes[array] = (words written so far, the head token writes ``span`` words)``; at
    ``D`` the gates flush.  Returns whether the head token may be popped (``None``: nothing
    off-chip)."""
    if not node.mem:
        return None
    at_done = valid & is_done(tok, w)
    all_ok, all_flushed = Const(1, 1), Const(1, 1)
    for array, spec in node.mem.items():
        count, writes_it = writes[array]
        g = attach(m, node, array, WriteGate(spec, node.model, node.cw, span, buffered=node.buffered))
        m.d.comb += [g.word.eq(count[:node.cw]), g.want.eq(valid & writes_it), g.flush.eq(at_done)]
        all_ok = all_ok & (~writes_it | g.ok)
        all_flushed = all_flushed & g.flushed
    pop_ok = Signal()
    m.d.comb += pop_ok.eq(Mux(is_done(tok, w), all_flushed, all_ok))
    return pop_ok


class LevelWrite(StreamPrimitive):
    """Level writer.  Compressed: fills ``seg``/``crd`` memories (host reads them through
    ``seg_rd``/``crd_rd``; ``seg_len``/``crd_len`` count entries).  Dense: counts coordinates.
    Pops every cycle; ``done`` rises after ``D``.  ``mem``: the off-chip ``seg`` / ``crd``
    ports (``hw.dram``), which may hold a write (and ``D``) back."""

    def __init__(self, *, compressed: bool, seg_depth: int = 2, crd_depth: int = 1, cw: int = CRD_WIDTH,
                 skip_empty: bool = False, mem=None, model=None, buffered: bool = False):
        if mem and not compressed:
            raise ValueError("off-chip memory ports need a compressed level writer")
        self.compressed, self.cw, self.skip_empty = compressed, cw, skip_empty
        self.seg_depth, self.crd_depth = seg_depth, crd_depth
        self.mem, self.model = dict(mem or {}), model
        self.buffered = buffered and bool(self.mem)
        extra = {"done": Out(1), "seg_len": Out(32), "crd_len": Out(32)} | bus_members(self.mem, cw)
        if compressed:
            extra |= {"seg_rd": In(MemRead(addr_bits(self.memory_depth("seg")), cw)),
                      "crd_rd": In(MemRead(addr_bits(self.memory_depth("crd")), cw))}
        super().__init__({"crd": cw}, {}, None, extra)

    def memory_depth(self, array: str) -> int:
        """Entries of the node's memory of ``array``: the array, or (line buffers) the port's two
        lines, addressed by the low bits of the word index."""
        if self.buffered and array in self.mem:
            return buffer_words(self.mem[array], self.model)
        return self.seg_depth if array == "seg" else self.crd_depth

    def logic(self, m):
        w = self.cw
        inp = self.i_crd
        seg_n = Signal(32, init=1)
        crd_n = Signal(32)
        done = Signal()
        tok = inp.payload
        fiber_open = Signal()  # a coordinate arrived since the last stop
        closes = fiber_open if self.skip_empty else 1
        pop_ok = _write_gates(m, self, inp.valid, tok, w,
                              {"seg": (seg_n, is_stop(tok, w) & closes), "crd": (crd_n, is_data(tok, w))})
        seeded = Const(1, 1)
        if self.buffered and "seg" in self.mem:
            # seg word 0 (always 0) is never written by a stop, but its buffer slot is reused:
            # write it in the run's first cycle, before the first token is taken
            seeded = Signal()
            m.d.sync += seeded.eq(1)
            pop_ok = pop_ok & seeded
        m.d.comb += [self.done.eq(done), self.seg_len.eq(seg_n), self.crd_len.eq(crd_n),
                     inp.ready.eq(1 if pop_ok is None else pop_ok)]
        if self.compressed:
            seg = memory.Memory(shape=unsigned(w), depth=self.memory_depth("seg"), init=[])
            crd = memory.Memory(shape=unsigned(w), depth=self.memory_depth("crd"), init=[])
            m.submodules.seg, m.submodules.crd = seg, crd
            seg_wp, crd_wp = seg.write_port(), crd.write_port()
            for mem, port in ((seg, self.seg_rd), (crd, self.crd_rd)):
                rp = mem.read_port(domain="sync")
                m.d.comb += [rp.addr.eq(port.addr), port.data.eq(rp.data)]
            m.d.comb += [seg_wp.addr.eq(Mux(seeded, seg_n, 0)), seg_wp.data.eq(Mux(seeded, crd_n, 0)),
                         crd_wp.addr.eq(crd_n), crd_wp.data.eq(tok[:w])]
            if self.buffered and "seg" in self.mem:
                with m.If(~seeded):
                    m.d.comb += seg_wp.en.eq(1)
        with m.If(inp.valid if pop_ok is None else inp.valid & pop_ok):
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
    """Values writer: fills ``vals`` (host reads through ``vals_rd``; ``vals_len`` counts).
    ``mem``: the off-chip ``vals`` port (``hw.dram``; word indices of ``cw`` bits).

    Of a vector stream (``lanes`` W > 1, sw_sim's ``VecValsWrite``): each vector (``N``:
    zeros) fills one row of a W-lane-wide memory, one row per cycle.  The host reads one value
    per address, as from a scalar stream: value ``a`` is lane ``a mod W`` of row ``a / W`` (the
    lane registered with the address, so the value arrives the cycle after); ``vals_len``
    counts values (W per vector).  ``mem``: off chip, a vector is one write of W words (it
    lies inside one line)."""

    def __init__(self, *, depth: int, vw: int = VAL_WIDTH, cw: int = CRD_WIDTH, mem=None, model=None,
                 lanes: int = 1, buffered: bool = False):
        self.vw, self.depth, self.lanes, self.cw = vw, depth, lanes, cw
        self.mem, self.model = dict(mem or {}), model
        self.buffered = buffered and bool(self.mem)
        # line buffers: the port's two lines, addressed by the low bits of the word index
        self.memory_depth = buffer_words(self.mem["vals"], model, lanes) if self.buffered else depth
        super().__init__({"val": vw * lanes}, {}, None, {"done": Out(1), "vals_len": Out(32),
                                                         "vals_rd": In(MemRead(addr_bits(self.memory_depth), vw))}
                         | bus_members(self.mem, cw))

    def logic(self, m):
        vw, lanes = self.vw, self.lanes
        w, shift = vw * lanes, lanes.bit_length() - 1
        inp = self.i_val
        rows = Signal(32 - shift)
        done = Signal()
        vals = memory.Memory(shape=unsigned(w), depth=-(-self.memory_depth // lanes), init=[])
        m.submodules.vals = vals
        wp = vals.write_port()
        rp = vals.read_port(domain="sync")
        data = rp.data
        if lanes > 1:
            lane = Signal(shift)  # the lane of the address read last cycle
            m.d.sync += lane.eq(self.vals_rd.addr[:shift])
            data = rp.data.word_select(lane, vw)
        tok = inp.payload
        writes = is_data(tok, w) | is_empty(tok, w)
        pop_ok = _write_gates(m, self, inp.valid, tok, w, {"vals": (rows << shift, writes)}, span=lanes)
        m.d.comb += [self.done.eq(done), self.vals_len.eq(rows << shift), inp.ready.eq(1 if pop_ok is None else pop_ok),
                     rp.addr.eq(self.vals_rd.addr[shift:]), self.vals_rd.data.eq(data),
                     wp.addr.eq(rows), wp.data.eq(Mux(is_data(tok, w), tok[:w], 0))]
        with m.If(inp.valid if pop_ok is None else inp.valid & pop_ok):
            with m.If(writes):
                m.d.comb += wp.en.eq(1)
                m.d.sync += rows.eq(rows + 1)
            with m.Elif(is_done(tok, w)):
                m.d.sync += done.eq(1)


class VecValsWrite(ValsWrite):
    """:class:`ValsWrite` of a vector stream: the name of ``ValsWrite(lanes=W)``, ``lanes``
    required."""

    def __init__(self, *, depth: int, lanes: int, vw: int = VAL_WIDTH, cw: int = CRD_WIDTH, mem=None,
                 model=None, buffered: bool = False):
        super().__init__(depth=depth, vw=vw, cw=cw, mem=mem, model=model, lanes=lanes, buffered=buffered)


@rtl("scan")
def _scan(b: HwBuild):
    p, cw = b.params, b.cfg.cw
    fmt = Format.parse(p["format"])
    skip = bool(p.get("skip", False))
    if skip and fmt is not Format.COMPRESSED:
        raise ValueError(f"parameter 'skip' needs a compressed level, not a {fmt.value} one")
    c = Scan(compressed=fmt.has_crd, dim=p.get("dim", 0), seg_depth=p.get("seg_depth", 2),
             crd_depth=p.get("crd_depth", 1), cw=cw, depths=b.depths, skip=skip,
             mem=p.get("mem"), model=b.cfg.memory, singleton=fmt is Format.SINGLETON,
             buffered=b.cfg.line_buffers, offset=p.get("offset", 0), stride=p.get("stride", 1))
    mems = {}
    if fmt.has_seg:
        mems["seg"] = ("seg_wr", c.seg_depth, cw, "w", None)
    if fmt.has_crd:
        mems["crd"] = ("crd_wr", c.crd_depth, cw, "w", None)
    return c, mems


@rtl("write")
def _write(b: HwBuild):
    p, cw = b.params, b.cfg.cw
    compressed = Format.parse(p["format"]) is Format.COMPRESSED
    c = LevelWrite(compressed=compressed, seg_depth=p.get("seg_depth", 2), crd_depth=p.get("crd_depth", 1),
                   cw=cw, skip_empty=bool(p.get("skip_empty", False)), mem=b.params.get("mem"),
                   model=b.cfg.memory, buffered=b.cfg.line_buffers)
    if not compressed:
        return c, {}
    return c, {"seg": ("seg_rd", c.seg_depth, cw, "r", "seg_len"), "crd": ("crd_rd", c.crd_depth, cw, "r", "crd_len")}


@rtl("vals_write")
def _vals_write(b: HwBuild):
    c = ValsWrite(depth=b.params.get("vals_depth", 1), vw=b.cfg.vw, cw=b.cfg.cw, mem=b.params.get("mem"),
                  model=b.cfg.memory, lanes=b.lanes, buffered=b.cfg.line_buffers)
    return c, {"vals": ("vals_rd", c.depth, b.cfg.vw, "r", "vals_len")}


plain("root", Root)
