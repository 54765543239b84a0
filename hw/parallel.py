"""RTL parallel-region primitives: the stream parallelizer and serializer (split policy and
stop-token rules: :mod:`fuseflow.ir.primitives.parallel`; per-cycle rules: :mod:`sw_sim.parallel`).

Lane numbers travel on ``sel``, a coordinate stream: lane ``p`` is the data word ``p``, and
``sel`` copies the split stream's control words (re-encoded to the coordinate width)."""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Signal, Value

from fuseflow.ir.primitives.base import stream_kind
from fuseflow.ir.samml import StreamKind
from fuseflow.ir.tokens import CRD_WIDTH

from .base import StreamPrimitive, addr_bits
from .registry import HwBuild, rtl
from .word import (
    data_word,
    done_word,
    is_ctl,
    is_data,
    is_done,
    is_empty,
    is_stop,
    level,
    recast,
    stop_word,
)


class Parallelize(StreamPrimitive):
    """Round-robin split (see sw_sim.parallel.Parallelize): register ``ptr``, latency 0, II 1.
    Every lane FIFO is written the input word; only the write enables differ."""

    def __init__(self, *, n: int, width: int = CRD_WIDTH, cw: int = CRD_WIDTH, depths=None):
        self.n, self.w, self.cw = n, width, cw
        super().__init__({"in": width}, {**{f"out{i}": width for i in range(n)}, "sel": cw}, depths)

    def logic(self, m):
        n, w, cw = self.n, self.w, self.cw
        inp = self.i_in
        tok = inp.payload
        lanes = [f"out{i}" for i in range(n)]
        ptr = Signal(range(n))
        lane_room = Signal(n)
        m.d.comb += lane_room.eq(Cat(*[self._fifos[name].w_rdy for name in lanes]))
        for name in lanes:
            m.d.comb += self._fifos[name].w_data.eq(tok)
        with m.If(inp.valid & self.room("sel")):
            with m.If(is_data(tok, w) | is_empty(tok, w)), m.If(lane_room.bit_select(ptr, 1)):
                self.pop(m, "in")
                self.push(m, "sel", data_word(ptr, cw))
                for i, name in enumerate(lanes):
                    with m.If(ptr == i):
                        self.push(m, name)
                m.d.sync += ptr.eq(Mux(ptr == n - 1, 0, ptr + 1))
            with m.Elif(lane_room.all()):
                self.pop(m, "in")
                self.push(m, "sel", recast(tok, w, cw))
                for name in lanes:
                    self.push(m, name)
                with m.If(is_done(tok, w)):
                    m.d.sync += ptr.eq(0)


class Serialize(StreamPrimitive):
    """Merge of ``n`` lanes in the order of ``sel`` (see sw_sim.parallel.Serialize).  Every
    decision waits for room at the output.  ``below`` = 0: one token per ``sel`` token, II 1.
    ``below`` = d >= 1: registers ``cur`` (the ``sel`` word being served, valid flag
    ``cur_valid``) and ``had`` (one bit per lane: it had an item in the merged fiber)."""

    def __init__(self, *, n: int, below: int, width: int = CRD_WIDTH, cw: int = CRD_WIDTH, depths=None):
        self.n, self.below, self.w, self.cw = n, below, width, cw
        super().__init__({"sel": cw, **{f"in{i}": width for i in range(n)}}, {"out": width}, depths)

    def logic(self, m):
        lanes = [self.inp(f"in{i}") for i in range(self.n)]
        self._valid = Signal(self.n)  # lane i has a token
        self._words = Cat(*[lane.payload for lane in lanes])
        m.d.comb += self._valid.eq(Cat(*[lane.valid for lane in lanes]))
        with m.If(self.room()):
            if self.below == 0:
                self._merge0(m)
            else:
                self._merge_deep(m)

    def _lane(self, word: Value) -> Value:
        """The lane number a ``sel`` data word carries."""
        return word[:addr_bits(self.n)]

    def _word(self, idx: Value) -> Value:
        """The head word of lane ``idx``."""
        return self._words.word_select(idx, self.w + 1)

    def _pop_lane(self, m, idx: Value) -> None:
        for i in range(self.n):
            with m.If(idx == i):
                self.pop(m, f"in{i}")

    def _pop_all(self, m) -> None:
        for i in range(self.n):
            self.pop(m, f"in{i}")

    def _merge0(self, m) -> None:
        w, cw = self.w, self.cw
        sel = self.i_sel
        s = sel.payload
        idx = self._lane(s)
        with m.If(sel.valid):
            with m.If(is_ctl(s, cw)), m.If(self._valid.all()):
                self.pop(m, "sel")
                self._pop_all(m)
                self.push(m, "out", recast(s, cw, w))
            with m.Elif(self._valid.bit_select(idx, 1)):
                self.pop(m, "sel")
                self._pop_lane(m, idx)
                self.push(m, "out", self._word(idx))

    def _merge_deep(self, m) -> None:
        n, w, cw, d = self.n, self.w, self.cw, self.below
        sel = self.i_sel
        s = sel.payload
        cur = Signal(cw + 1)
        cur_valid = Signal()
        had = Signal(n)
        idx = self._lane(cur)
        tok = Signal(w + 1)
        m.d.comb += tok.eq(self._word(idx))
        ends = is_stop(tok, w) if d == 1 else is_stop(tok, w) & (level(tok) >= d - 1)
        # no cur: load the sel token to serve (a cycle without output)
        with m.If(~cur_valid), m.If(sel.valid):
            self.pop(m, "sel")
            m.d.sync += [cur.eq(s), cur_valid.eq(1)]
        # cur = Sm, the merged fiber ends: the lanes without an item in it give up their lone stop
        with m.Elif(is_stop(cur, cw)), m.If((self._valid | had).all()):
            for i in range(n):
                with m.If(~had[i]):
                    self.pop(m, f"in{i}")
            with m.If(had == 0):
                self.push(m, "out", stop_word(level(cur) + d, w))
            m.d.sync += had.eq(0)
            with m.If(sel.valid):
                self.pop(m, "sel")
                m.d.sync += cur.eq(s)
            with m.Else():
                m.d.sync += cur_valid.eq(0)
        with m.Elif(is_done(cur, cw)), m.If(self._valid.all()):
            self._pop_all(m)
            self.push(m, "out", done_word(w))
            m.d.sync += cur_valid.eq(0)
        # cur = lane p: copy its item's tokens up to the stop that ends the item
        with m.Elif(self._valid.bit_select(idx, 1)):
            with m.If(~ends):
                self._pop_lane(m, idx)
                self.push(m, "out", tok)
            with m.Elif(sel.valid):
                # the item ends: S(d-1) if the merged fiber goes on, else the lane's own stop
                self.pop(m, "sel")
                self._pop_lane(m, idx)
                self.push(m, "out", Mux(is_data(s, cw), stop_word(d - 1, w), tok))
                m.d.sync += [cur.eq(s), had.bit_select(idx, 1).eq(1)]


@rtl("parallelize")
def _parallelize(b: HwBuild):
    sk = stream_kind(b.params.get("stream"), StreamKind.CRD)
    return Parallelize(n=b.params["n"], width=b.width(sk), cw=b.cfg.cw, depths=b.depths), {}


@rtl("serialize")
def _serialize(b: HwBuild):
    sk = stream_kind(b.params.get("stream"), StreamKind.CRD)
    return Serialize(n=b.params["n"], below=b.params["below"], width=b.width(sk), cw=b.cfg.cw,
                     depths=b.depths), {}
