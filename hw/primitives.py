"""RTL SAMML primitives (Amaranth).  Each mirrors the cycle model of the same name in
``sw_sim/primitives.py`` decision for decision; see the docstrings there for the per-cycle
rules and the primitive table in :mod:`fuseflow.samml` for latency and II.

Widths: ``cw`` is the data width of crd / ref / repsig streams, ``vw`` of val streams.
Memories that hold tensor levels are synchronous-read (block RAM); a read issued in cycle
``t`` returns data in ``t + 1``.  The scanner's coordinate memory is addressed with the
next-state position so that ``crd[p]`` is ready in the cycle ``p`` is current.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import memory
from amaranth.lib.wiring import In, Out

from fuseflow.numerics import Mode, Numerics
from fuseflow.samml import AluOp, ReduceOp, alu_latency
from fuseflow.tokens import CRD_WIDTH, VAL_WIDTH

from .base import MemRead, MemWrite, StreamPrimitive, bits_for
from .fifo import forwarded_read
from .ml_primitives import _sat, binop, reduce_op
from .word import (
    CTL_WIDTH,
    data_word,
    done_word,
    empty_word,
    is_ctl,
    is_data,
    is_done,
    is_empty,
    is_stop,
    level,
    recast,
    stop_word,
)

__all__ = [
    "Alu",
    "ArrayLoad",
    "Broadcast",
    "CrdDrop",
    "CrdHold",
    "Intersect",
    "LevelWrite",
    "Reduce",
    "RepSig",
    "Repeat",
    "Root",
    "Scan",
    "SpAcc1",
    "Union",
    "ValsWrite",
]

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


class RepSig(StreamPrimitive):
    """Repeat-signal generator: data/N -> R (data 1), stop -> S0, D -> D."""

    def __init__(self, *, cw: int = CRD_WIDTH, depths=None):
        self.cw = cw
        super().__init__({"in": cw}, {"repsig": cw}, depths)

    def logic(self, m):
        w = self.cw
        inp = self.i_in
        tok = inp.payload
        with m.If(inp.valid & self.room()):
            self.pop(m, "in")
            with m.If(is_data(tok, w) | is_empty(tok, w)):
                self.push(m, "repsig", data_word(1, w))
            with m.Elif(is_done(tok, w)):
                self.push(m, "repsig", done_word(w))
            with m.Else():
                self.push(m, "repsig", stop_word(0, w))


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


class _Joiner(StreamPrimitive):
    """n-ary joiner; the ``ref<i>`` streams listed in ``val_refs`` carry values (``vw`` wide)."""

    def __init__(self, *, n: int, cw: int = CRD_WIDTH, vw: int = VAL_WIDTH, val_refs=(), depths=None):
        self.n, self.cw = n, cw
        self.rw = [vw if i in tuple(val_refs) else cw for i in range(n)]
        ins = {**{f"crd{i}": cw for i in range(n)}, **{f"ref{i}": self.rw[i] for i in range(n)}}
        outs = {"crd": cw, **{f"ref{i}": self.rw[i] for i in range(n)}}
        super().__init__(ins, outs, depths)

    def _common(self, m):
        w, n = self.cw, self.n
        crds = [self.inp(f"crd{i}").payload for i in range(n)]
        refs = [self.inp(f"ref{i}").payload for i in range(n)]
        ctl = [is_ctl(c, w) for c in crds]
        ready = self.room()
        for i in range(n):
            ready = ready & self.inp(f"crd{i}").valid & self.inp(f"ref{i}").valid
        fire = Signal()
        all_ctl = Signal()
        any_ctl = Signal()
        m.d.comb += [fire.eq(ready), all_ctl.eq(Cat(*ctl).all()), any_ctl.eq(Cat(*ctl).any())]
        return crds, refs, ctl, fire, all_ctl, any_ctl

    def _pop(self, m, i):
        self.pop(m, f"crd{i}")
        self.pop(m, f"ref{i}")

    def _pass_control(self, m, crds):
        for i in range(self.n):
            self._pop(m, i)
            self.push(m, f"ref{i}", recast(crds[0], self.cw, self.rw[i]))
        self.push(m, "crd", crds[0])


class Intersect(_Joiner):
    """n-ary intersection (see sw_sim.primitives.Intersect)."""

    def logic(self, m):
        w, n = self.cw, self.n
        crds, refs, ctl, fire, all_ctl, any_ctl = self._common(m)
        vals = [c[:w] for c in crds]
        # Input i is behind when some other head is larger: pairwise compares in parallel, so a
        # pop decision is one compare deep (not a max tree followed by a compare).
        behind = [Cat(*[vals[i] < vals[j] for j in range(n) if j != i]).any() for i in range(n)]
        all_eq = Cat(*[v == vals[0] for v in vals[1:]]).all()
        with m.If(fire):
            with m.If(~any_ctl):
                with m.If(all_eq):
                    self.push(m, "crd", data_word(vals[0], w))
                    for i in range(n):
                        self._pop(m, i)
                        self.push(m, f"ref{i}", refs[i])
                with m.Else():
                    for i in range(n):
                        with m.If(behind[i]):
                            self._pop(m, i)
            with m.Elif(all_ctl):
                self._pass_control(m, crds)
            with m.Else():
                for i in range(n):
                    with m.If(~ctl[i]):
                        self._pop(m, i)


class Union(_Joiner):
    """n-ary union (see sw_sim.primitives.Union)."""

    def logic(self, m):
        w, n = self.cw, self.n
        crds, refs, ctl, fire, all_ctl, _ = self._common(m)
        # minimum over data heads (control heads count as +infinity)
        keyed = [Cat(c[:w], c[w]) for c in crds]  # flag as MSB: control sorts last
        # Input i holds the minimum when no other head is smaller: pairwise compares in
        # parallel, so a pop decision is one compare deep; the minimum itself only feeds data.
        least = [Cat(*[keyed[i] <= keyed[j] for j in range(n) if j != i]).all() for i in range(n)]
        mn = keyed[0]
        for k in keyed[1:]:
            mn = Mux(k < mn, k, mn)
        mns = Signal(w + 1)
        m.d.comb += mns.eq(mn)
        with m.If(fire):
            with m.If(all_ctl):
                self._pass_control(m, crds)
            with m.Else():
                self.push(m, "crd", data_word(mns[:w], w))
                for i in range(n):
                    with m.If(~ctl[i] & least[i]):
                        self._pop(m, i)
                        self.push(m, f"ref{i}", refs[i])
                    with m.Else():
                        self.push(m, f"ref{i}", empty_word(self.rw[i]))


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
    """Coordinate drop (see sw_sim.primitives.CrdDrop)."""


class CrdHold(_OuterInner):
    """Coordinate hold (see sw_sim.primitives.CrdHold)."""

    hold = True


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


class Alu(StreamPrimitive):
    """Binary ALU over aligned value streams; arithmetic by the ``numerics`` (default: two's
    complement wrapping to ``vw`` bits), generated by :func:`hw.ml_primitives.binop`.  II 1,
    latency :func:`~fuseflow.samml.alu_latency`: a chain of stage registers where each stage
    loads from the one before when it is empty or being emptied (sw_sim's ``Alu``).

    * 2 stages (add, sub, max, min, div): operands -> operation -> result register.
    * 4 stages (mul): operands -> partial products (``vw > 18``: four half-width products, one
      18x18 DSP block each; else the whole product) -> their sum plus the rounding constant ->
      rounding shift and saturation (or wrap) into the result register."""

    DSP_WIDTH = 18  # signed operand width of one DSP multiplier (ECP5 MULT18X18D)

    def __init__(self, *, op: AluOp, vw: int = VAL_WIDTH, numerics: Numerics | None = None, depths=None):
        self.op, self.vw = op, vw
        self.num = numerics or Numerics.integer(vw)
        super().__init__({"a": vw, "b": vw}, {"val": vw}, depths)

    def logic(self, m):
        w = self.vw
        a, b = self.i_a, self.i_b
        n = alu_latency(self.op)
        valid = [Signal(name=f"stage{k}_valid") for k in range(n)]
        free = [Signal(name=f"stage{k}_free") for k in range(n)]
        emit = Signal()
        both = a.valid & b.valid
        m.d.comb += [emit.eq(valid[-1] & self.room()), free[-1].eq(~valid[-1] | emit),
                     a.ready.eq(free[0] & both), b.ready.eq(free[0] & both)]
        for k in range(n - 2, -1, -1):  # stage k advances when stage k+1 is free
            m.d.comb += free[k].eq(~valid[k] | free[k + 1])
        for k in range(1, n):
            with m.If(free[k]):
                m.d.sync += valid[k].eq(valid[k - 1])
        x_ctl_of = is_ctl(a.payload, w) & ~is_empty(a.payload, w)
        xv_of = Mux(is_data(a.payload, w), a.payload[:w], 0).as_signed()
        yv_of = Mux(is_data(b.payload, w), b.payload[:w], 0).as_signed()
        res = Signal(w + 1)
        with m.If(emit):
            self.push(m, "val", res)
        if n == 2:
            x, y = Signal(w + 1), Signal(w + 1)
            with m.If(free[0]):
                m.d.sync += [valid[0].eq(both), x.eq(a.payload), y.eq(b.payload)]
            xv = Mux(is_data(x, w), x[:w], 0).as_signed()
            yv = Mux(is_data(y, w), y[:w], 0).as_signed()
            x_ctl = is_ctl(x, w) & ~is_empty(x, w)
            with m.If(free[1]):
                m.d.sync += res.eq(Mux(x_ctl, x, data_word(binop(self.num, self.op, xv, yv), w)))
            return
        # mul: the operand registers hold the values (0 for a non-data token), so they and the
        # product register can sit inside the DSP block; a control token rides along the stages
        # as its low bits (level and opcode: the rest of a control word is zero) and a flag.
        # (data registers are reset-less: the clear resets the valid bits, and a DSP block's
        # registers have no synchronous reset)
        xv, yv = Signal(signed(w), reset_less=True), Signal(signed(w), reset_less=True)
        ctl = [Signal(CTL_WIDTH, name=f"ctl{k}", reset_less=True) for k in range(3)]
        is_ctl_k = [Signal(name=f"is_ctl{k}") for k in range(3)]
        with m.If(free[0]):
            m.d.sync += [valid[0].eq(both), xv.eq(xv_of), yv.eq(yv_of), ctl[0].eq(a.payload[:CTL_WIDTH]),
                         is_ctl_k[0].eq(x_ctl_of)]
        for k in (1, 2):
            with m.If(free[k]):
                m.d.sync += [ctl[k].eq(ctl[k - 1]), is_ctl_k[k].eq(is_ctl_k[k - 1])]
        if w > self.DSP_WIDTH:
            h = w // 2
            xl, yl = Signal(h), Signal(h)
            xh, yh = Signal(signed(w - h)), Signal(signed(w - h))
            m.d.comb += [xl.eq(xv[:h]), yl.eq(yv[:h]), xh.eq(xv[h:]), yh.eq(yv[h:])]
            pp = [Signal(signed(2 * w), name=f"pp_{nm}", reset_less=True) for nm in ("ll", "lh", "hl", "hh")]
            prods = [xl * yl, xl * yh, xh * yl, xh * yh]

            def total() -> Value:
                return (pp[3] << (2 * h)) + ((pp[1] + pp[2]) << h) + pp[0]
        else:
            pp = [Signal(signed(2 * w), name="pp", reset_less=True)]
            prods = [xv * yv]

            def total() -> Value:
                return pp[0]
        fixed = self.num.mode is Mode.FIXED
        rnd = (1 << (self.num.frac - 1)) if fixed and self.num.frac > 0 else 0
        prod = Signal(signed(2 * w + 2), reset_less=True)
        with m.If(free[1]):
            m.d.sync += [p_.eq(v_) for p_, v_ in zip(pp, prods)]
        with m.If(free[2]):
            m.d.sync += prod.eq(total() + rnd)
        out = _sat(prod >> self.num.frac, self.num) if fixed else prod[:w]
        ctl_word = Cat(ctl[2], Const(0, w - CTL_WIDTH), Const(1, 1))
        with m.If(free[3]):
            m.d.sync += res.eq(Mux(is_ctl_k[2], ctl_word, data_word(out, w)))


class Reduce(StreamPrimitive):
    """Reduces each innermost fiber (see sw_sim.primitives.Reduce)."""

    def __init__(self, *, op: ReduceOp, vw: int = VAL_WIDTH, numerics: Numerics | None = None, depths=None):
        self.op, self.vw = op, vw
        self.num = numerics or Numerics.integer(vw)
        super().__init__({"val": vw}, {"val": vw}, depths)

    def logic(self, m):
        w = self.vw
        inp = self.i_val
        init = 0 if self.op is ReduceOp.ADD else 1 << (w - 1)
        acc = Signal(w, init=init)
        flushed = Signal()
        tok = inp.payload
        v = Mux(is_data(tok, w), tok[:w], 0).as_signed()
        nxt = reduce_op(self.num, self.op, acc.as_signed(), v)
        with m.If(inp.valid & self.room()):
            with m.If(is_data(tok, w) | is_empty(tok, w)):
                m.d.sync += acc.eq(nxt[:w])
                self.pop(m, "val")
            with m.Elif(is_done(tok, w)):
                self.push(m, "val", done_word(w))
                self.pop(m, "val")
            with m.Elif(level(tok) == 0):
                self.push(m, "val", data_word(acc, w))
                m.d.sync += acc.eq(init)
                self.pop(m, "val")
            with m.Elif(~flushed):
                self.push(m, "val", data_word(acc, w))
                m.d.sync += [acc.eq(init), flushed.eq(1)]
            with m.Else():
                self.push(m, "val", stop_word(level(tok) - 1, w))
                m.d.sync += flushed.eq(0)
                self.pop(m, "val")


def _lowest_bit(m: Module, bits: Value, n: int, name: str) -> tuple[Signal, Signal]:
    """The index of the lowest set bit of ``bits`` (``n`` wide; 0 when none) and ``bits``
    without it: ``x & -x`` isolates the bit on a carry chain, an OR tree encodes it."""
    low = Signal(n, name=f"{name}_low")
    m.d.comb += low.eq(bits & (~bits + 1)[:n])
    index = Signal(range(max(n, 2)), name=f"{name}_index")
    for b in range(len(index)):
        m.d.comb += index[b].eq(Cat(*[low[i] for i in range(n) if (i >> b) & 1]).any())
    without = Signal(n, name=f"{name}_rest")
    m.d.comb += without.eq(bits & ~low)
    return index, without


def _lowest_bit_grouped(m: Module, bits: Value, n: int, name: str) -> tuple[Signal, Signal]:
    """:func:`_lowest_bit` without a carry chain, for 4-input LUT fabrics: the bits in groups
    of four, the first non-empty group found from the groups' any-bits, the index as (that
    group, the first bit inside it)."""
    g_n = (n + 3) // 4
    groups = [bits[4 * g:min(4 * g + 4, n)] for g in range(g_n)]
    ga = Signal(g_n, name=f"{name}_ga")
    m.d.comb += ga.eq(Cat(*[grp.any() for grp in groups]))
    first_g = Signal(g_n, name=f"{name}_fg")  # one-hot: the first non-empty group
    for g in range(g_n):
        m.d.comb += first_g[g].eq(ga[g] & ~(ga[:g].any() if g else 0))
    index = Signal(range(max(n, 2)), name=f"{name}_index")
    low = Signal(n, name=f"{name}_low")
    for g, grp in enumerate(groups):
        for j in range(len(grp)):
            m.d.comb += low[4 * g + j].eq(first_g[g] & grp[j] & ~(grp[:j].any() if j else 0))
    for b in range(len(index)):
        if b < 2:  # the bit inside the group
            terms = [first_g[g] & Cat(*[grp[j] & ~(grp[:j].any() if j else 0)
                                        for j in range(len(grp)) if (j >> b) & 1]).any()
                     for g, grp in enumerate(groups) if any((j >> b) & 1 for j in range(len(grp)))]
        else:  # the group
            terms = [first_g[g] for g in range(g_n) if (g >> (b - 2)) & 1]
        m.d.comb += index[b].eq(Cat(*terms).any() if terms else 0)
    without = Signal(n, name=f"{name}_rest")
    m.d.comb += without.eq(bits & ~low)
    return index, without


class SpAcc1(StreamPrimitive):
    """Sparse accumulator, order 1, over an inner dimension ``dim``: accumulator memory plus a
    valid bit per coordinate; the flush walks the valid bits with a priority encoder.

    ``block_ram``: the small variant, for FPGAs without distributed RAM (the iCE40, where the
    memory and its two read multiplexers would otherwise be the largest part of a GCN layer).
    The accumulator memory has synchronous read ports (block RAM): each is addressed a cycle
    early (the coordinate at the input head, the flush's next index), and a word written in
    the cycle its address is read is forwarded from a register, so the cycle behaviour is the
    same as with asynchronous reads.  It also finds the lowest set bit with one encoder (over
    ``rest`` while flushing, the valid bits otherwise) instead of two whose results are
    selected at the end: half the logic."""

    def __init__(self, *, dim: int, op: ReduceOp = ReduceOp.ADD, cw: int = CRD_WIDTH,
                 vw: int = VAL_WIDTH, numerics: Numerics | None = None, depths=None,
                 block_ram: bool = False):
        self.dim, self.op, self.cw, self.vw = dim, op, cw, vw
        self.block_ram = block_ram
        self.num = numerics or Numerics.integer(vw)
        super().__init__({"outer": cw, "inner": cw, "val": vw}, {"crd": cw, "val": vw}, depths)

    def logic(self, m):
        cw, vw, dim = self.cw, self.vw, self.dim
        outer, inner, val = self.i_outer, self.i_inner, self.i_val
        acc = memory.Memory(shape=unsigned(vw), depth=dim, init=[])
        m.submodules.acc = acc
        wp = acc.write_port()
        valid = Signal(dim)
        flushing = Signal()
        # The lowest set valid bit (``first``), whether any is set and the set bits above it
        # (``rest``), all registered.  Outside a flush they follow the valid bits one cycle late
        # (the cycle that starts a flush sets none, so they have caught up when used); a flush
        # that emits ``first`` moves to ``rest``'s lowest bit.  Both candidates come from
        # registers and are selected by ``clear`` at the end, so the output FIFOs' ready is not
        # in front of the priority encoder, and the encoder is a carry-chain isolate of the
        # lowest bit plus an OR tree.
        #
        # While flushing, ``valid`` is ``rest`` plus the bit ``first`` (when ``any_valid``), so
        # emitting ``first`` clears it by loading ``rest``: no decoder of ``first``.
        first = Signal(range(max(dim, 2)))
        any_valid = Signal()
        rest = Signal(dim)
        clear = Signal()  # the flush emits ``first`` this cycle
        first_next = Signal(range(max(dim, 2)))
        if self.block_ram:
            # One encoder, over ``rest`` while flushing (the candidate for a flush that emits)
            # and over the valid bits otherwise; a flush cycle that emits nothing holds the
            # registers, which already describe the unchanged valid bits.  ``clear`` only
            # selects at the end, so it is not in front of the encoder.
            src = Signal(dim)
            hold = Signal()
            m.d.comb += [src.eq(Mux(flushing, rest, valid)), hold.eq(flushing & ~clear)]
            src_first, src_rest = _lowest_bit_grouped(m, src, dim, "low")
            m.d.comb += first_next.eq(Mux(hold, first, src_first))
            with m.If(~hold):
                m.d.sync += [any_valid.eq(src.any()), rest.eq(src_rest)]
        else:
            keep_first, keep_rest = _lowest_bit(m, valid, dim, "keep")
            clear_first, clear_rest = _lowest_bit(m, rest, dim, "clear")
            m.d.comb += first_next.eq(Mux(clear, clear_first, keep_first))
            m.d.sync += [any_valid.eq(Mux(clear, rest.any(), valid.any())),
                         rest.eq(Mux(clear, clear_rest, keep_rest))]
        m.d.sync += first.eq(first_next)
        tok, vtok, oh = inner.payload, val.payload, outer.payload
        c = tok[:cw]
        ci = c[:len(first)]  # coordinates are below ``dim``: the index bits decode the valid bit
        v = Mux(is_data(vtok, vw), vtok[:vw], 0).as_signed()
        # A popped (crd, val) is accumulated the next cycle from registers (the valid bit is set
        # at once, and whether it was set is registered with it), so the input FIFOs are not on
        # the read-add-write path.  Back-to-back tokens need no forwarding: the memory is
        # written at the end of the cycle, before the next read.  A flush starts at least two
        # cycles after the last pop (the stop that starts it pops no data), so it reads
        # up-to-date sums.
        pend, pend_hit = Signal(), Signal()
        pend_c = Signal(range(max(dim, 2)))
        pend_v = Signal(signed(vw))
        popped = Signal()
        m.d.sync += [pend.eq(popped), pend_c.eq(ci), pend_v.eq(v), pend_hit.eq(valid.bit_select(ci, 1))]
        m.d.comb += [wp.addr.eq(pend_c), wp.en.eq(pend)]
        if self.block_ram:
            acc_word = forwarded_read(m, acc, wp, ci, "acc")  # = acc[pend_c] next cycle
            flush_word = forwarded_read(m, acc, wp, first_next, "flush", addr_q=first)  # = acc[first] next cycle
        else:
            rp = acc.read_port(domain="comb")  # read-add-write
            fp = acc.read_port(domain="comb")  # flush (its own port keeps the paths apart)
            m.d.comb += [rp.addr.eq(pend_c), fp.addr.eq(first)]
            acc_word, flush_word = rp.data, fp.data
        summed = reduce_op(self.num, self.op, acc_word.as_signed(), pend_v)
        m.d.comb += wp.data.eq(Mux(pend_hit, summed[:vw], pend_v[:vw]))
        with m.If(self.room()):
            with m.If(flushing):
                with m.If(any_valid):
                    self.push(m, "crd", data_word(first, cw))
                    self.push(m, "val", data_word(flush_word, vw))
                    m.d.comb += clear.eq(1)
                    m.d.sync += valid.eq(rest)
                with m.Else():
                    self.pop(m, "outer")
                    self.pop(m, "inner")
                    self.pop(m, "val")
                    self.push(m, "crd", oh)
                    self.push(m, "val", recast(oh, cw, vw))
                    m.d.sync += flushing.eq(0)
            with m.Elif(inner.valid & val.valid):
                with m.If(is_data(tok, cw)):
                    m.d.comb += popped.eq(1)
                    m.d.sync += valid.bit_select(ci, 1).eq(1)
                    self.pop(m, "inner")
                    self.pop(m, "val")
                with m.Elif(outer.valid):
                    with m.If(is_done(tok, cw)):
                        self.pop(m, "outer")
                        self.pop(m, "inner")
                        self.pop(m, "val")
                        self.push(m, "crd", done_word(cw))
                        self.push(m, "val", done_word(vw))
                    with m.Elif(level(tok) == 0):
                        self.pop(m, "outer")
                        self.pop(m, "inner")
                        self.pop(m, "val")
                    with m.Elif(is_data(oh, cw)):
                        self.pop(m, "outer")
                    with m.Else():
                        m.d.sync += flushing.eq(1)


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
