"""Cycle models of the sparse accumulators of order 1 and 2, and of the merge of two order-2
results (``merge2``: lanes' partial ``spacc2`` sums combined)."""

from __future__ import annotations

from typing import Any

from fuseflow.ir.numerics import INT32, Numerics
from fuseflow.ir.samml import (
    ReduceOp,
)
from fuseflow.ir.tokens import DONE, EMPTY, Control, Stop, Vec, stop

from .engine import Primitive
from .registry import Build, model


def _all_done(prim: Primitive, ins, outs) -> bool:
    """Every input at ``D``: pop them, ``D`` on every output, and the primitive is finished."""
    for c in ins:
        c.pop()
    for c in outs:
        c.push(DONE)
    prim.finish()
    return True


class SpAcc1(Primitive):
    """Sparse accumulator, order 1 (inner dimension ``dim``).

    Fires when both outputs have room.  ACC mode, by the inner head: data (with its value) ->
    ``acc[crd] op= val``, pop both; ``S0`` -> pop inner, val and the outer coordinate; ``S(k+1)``
    -> if the outer head is data pop it (wait), else it must be ``Sk``: enter FLUSH.  FLUSH:
    emit the accumulated entries in coordinate order, one per cycle, then ``Sk`` on both outputs,
    popping the three stop tokens.  ``D`` on all three -> ``D``.  Accumulation wraps /
    saturates by the ``numerics``.
    """

    def __init__(self, name, ins, outs, *, dim: int, op: ReduceOp = ReduceOp.ADD, numerics: Numerics = INT32):
        super().__init__(name, ins, outs)
        self.iouter, self.iinner, self.ival = ins["outer"], ins["inner"], ins["val"]
        self.ocrd, self.oval = outs["crd"], outs["val"]
        self.dim = dim
        self.fn = numerics.reduce_fn(op)
        self.acc: dict[int, int] = {}  # the accumulating bank
        self.flush_acc = self.acc  # the bank being flushed (one bank: the same)
        self.flush: list[int] | None = None
        self.flush_pos = 0
        self.zero = 0  # what ``N`` adds

    def _flush_step(self) -> bool:
        """FLUSH: one accumulated entry per cycle, then the fiber's stop on both outputs."""
        if self.flush_pos < len(self.flush):
            c = self.flush[self.flush_pos]
            self.flush_pos += 1
            self.ocrd.push(c)
            self.oval.push(self.flush_acc[c])
            return True
        s = self._end_flush()
        self.ocrd.push(s)
        self.oval.push(s)
        self.flush_acc.clear()
        self.flush = None
        return True

    def _end_flush(self) -> Stop:
        """The stop that ends the flushed fiber: popped from the three inputs' heads."""
        s = self.iouter.pop()
        self.iinner.pop()
        self.ival.pop()
        return s

    def _head_value(self, tok):
        """The value at the val head for inner data head ``tok`` (``N``: ``zero``), checked."""
        v = self.ival.q[0]
        if isinstance(v, Control) and v is not EMPTY:
            raise self.error(f"inner coordinate {tok} but the value stream is at {v}")
        if not 0 <= tok < self.dim:
            raise self.error(f"inner coordinate {tok} outside dimension {self.dim}")
        return self.zero if v is EMPTY else v

    def _data_step(self, tok) -> bool:
        """ACC mode, inner data head ``tok``: ``acc[tok] op= val``, pop inner and val."""
        v = self._head_value(tok)
        acc = self.acc
        acc[tok] = self.fn(acc[tok], v) if tok in acc else v
        self.flops += 1
        self.iinner.pop()
        self.ival.pop()
        return True

    def step(self) -> bool:
        if self.ocrd.isfull or self.oval.isfull:
            return False
        if self.flush is not None:
            return self._flush_step()
        return self._acc_step()

    def _may_finish(self) -> bool:
        """``D`` may pass (the single bank: always, in ACC mode with room)."""
        return True

    def _end_fiber(self, oh: Stop) -> bool:
        """The inner ``S(k+1)`` and outer ``Sk`` at the heads end the fiber: enter FLUSH (the
        stop tokens stay at the heads until the flush ends)."""
        self.flush = sorted(self.acc)
        self.flush_pos = 0
        return True

    def _acc_step(self) -> bool:
        """ACC mode: one step by the inner head (see the class docstring)."""
        inner, val, outer = self.iinner, self.ival, self.iouter
        if not inner.q or not val.q:
            return False
        tok = inner.q[0]
        if not isinstance(tok, Control):
            return self._data_step(tok)
        if val.q[0] is not tok:
            raise self.error(f"inner {tok} but the value stream is at {val.q[0]}")
        if not outer.q:
            return False
        oh = outer.q[0]
        if tok is DONE:
            if oh is not DONE:
                raise self.error(f"inner D but the outer stream is at {oh}")
            if not self._may_finish():
                return False
            outer.pop()
            inner.pop()
            val.pop()
            self.ocrd.push(DONE)
            self.oval.push(DONE)
            self.finish()
            return True
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in the inner stream")
        if tok.level == 0:
            if isinstance(oh, Control):
                raise self.error(f"inner S0 but the outer stream is at {oh}")
            outer.pop()
            inner.pop()
            val.pop()
            return True
        if not isinstance(oh, Control):
            outer.pop()
            return True
        if type(oh) is not Stop or oh.level != tok.level - 1:
            raise self.error(f"inner {tok} needs outer S{tok.level - 1}, but the outer stream is at {oh}")
        return self._end_fiber(oh)


class SpAcc1Double(SpAcc1):
    """``buffers=2``: two banks of sums.  The accumulator (ACC mode above) works on bank ``a``
    while a flusher empties the other bank; each runs one step per cycle from the start-of-cycle
    state.

    Flusher (when a bank is handed to it and both outputs have room): one entry per cycle in
    coordinate order, then the fiber's stop (``Sk``, kept from the hand-over) on both outputs;
    the bank is then free.  Accumulator (input heads only, whatever the outputs): data and
    ``S0`` as in ACC mode; the end of a fiber (inner ``S(k+1)``, outer ``Sk``) hands bank ``a``
    to the flusher and pops the three stops, if the flusher is free at the start of the cycle
    or emits its stop in this cycle; otherwise it waits there.  The flush of the handed bank
    starts the next cycle.  ``D`` on all three inputs waits for a free flusher and room.
    """

    def __init__(self, name, ins, outs, *, dim: int, op: ReduceOp = ReduceOp.ADD, numerics: Numerics = INT32):
        super().__init__(name, ins, outs, dim=dim, op=op, numerics=numerics)
        self.banks: tuple[dict[int, int], dict[int, int]] = (self.acc, {})
        self.flush_stop: Stop | None = None  # kept from the hand-over
        self._busy = self._room = False

    def step(self) -> bool:
        self._room = not (self.ocrd.isfull or self.oval.isfull)
        self._busy = self.flush is not None
        flushed = self._busy and self._room and self._flush_step()
        return self._acc_step() or flushed

    def _end_flush(self) -> Stop:
        return self.flush_stop

    def _may_finish(self) -> bool:
        return self._room and not self._busy

    def _end_fiber(self, oh: Stop) -> bool:
        if self.flush is not None:  # the flusher is busy with the previous fiber: wait
            return False
        for c in (self.iouter, self.iinner, self.ival):
            c.pop()
        self.flush = sorted(self.acc)
        self.flush_pos = 0
        self.flush_stop = oh
        self.flush_acc = self.acc
        self.acc = self.banks[1] if self.acc is self.banks[0] else self.banks[0]
        return True


class SpAcc2(Primitive):
    """Sparse accumulator, order 2: in outer ``crd`` (the reduced index ``k``) + ``inner0``
    (``i``, nested under ``k``) + ``inner1`` (``j``, nested under ``i``) + ``val`` ->
    ``crd0`` + ``crd1`` + ``val``: accumulates values by ``(i, j)``; the end of an outer fiber
    (outer ``Sm``) flushes the accumulated 2-level fiber in ``(i, j)`` order, then ``Sm`` on
    ``crd0`` and ``S(m+1)`` on ``crd1`` / ``val``.

    Fires when every output has room.  ACC mode, by the ``inner1`` head: data (with its value)
    -> load ``i`` from ``inner0`` if none is held (same cycle), ``acc[i, j] op= val``, pop both;
    ``S0`` -> end of ``i``'s fiber (an ``i`` with an empty fiber is popped now); ``S1`` -> end of
    ``k``'s ``i`` fiber: ``inner0`` must be at ``S0`` and outer at ``k``: pop all four;
    ``S(m+2)``: pop a pending ``i`` (wait), then ``inner0`` must be at ``S(m+1)``; pop a pending
    ``k`` (wait), then outer must be at ``Sm``: enter FLUSH.  Before any of the stop cases, a
    held-less ``i`` data head of ``inner0`` is popped first (an empty ``j`` fiber).  FLUSH, one
    step per cycle: next entry with a new ``i`` while a group is open -> ``S0`` on ``crd1`` /
    ``val`` (closes the group); otherwise emit (``i`` on ``crd0`` when a group opens) ``j`` and
    the value; after the last: the stops, popping the four stop tokens.  ``D`` on all -> ``D``.
    """

    def __init__(self, name, ins, outs, *, dim0: int, dim1: int, op: ReduceOp = ReduceOp.ADD,
                 numerics: Numerics = INT32):
        super().__init__(name, ins, outs)
        self.iouter, self.ii, self.ij, self.ival = ins["outer"], ins["inner0"], ins["inner1"], ins["val"]
        self.o0, self.o1, self.ov = outs["crd0"], outs["crd1"], outs["val"]
        self.dim0, self.dim1 = dim0, dim1
        self.fn = numerics.reduce_fn(op)
        self.acc: dict[tuple[int, int], Any] = {}  # the accumulating bank
        self.flush_acc = self.acc  # the bank being flushed (one bank: the same)
        self.cur_i: int | None = None
        self.flush: list[tuple[int, int]] | None = None
        self.pos = 0
        self.open = False
        self.last_i = 0
        self.flush_level = 0

    def _flush_step(self) -> bool:
        if self.pos < len(self.flush):
            i, j = self.flush[self.pos]
            if self.open and i != self.last_i:
                self.o1.push(stop(0))
                self.ov.push(stop(0))
                self.open = False
                return True
            if not self.open:
                self.o0.push(i)
                self.open, self.last_i = True, i
            self.o1.push(j)
            self.ov.push(self.flush_acc[i, j])
            self.pos += 1
            return True
        self._end_flush()
        m = self.flush_level
        self.o0.push(stop(m))
        self.o1.push(stop(m + 1))
        self.ov.push(stop(m + 1))
        self.flush_acc.clear()
        self.flush = None
        self.open = False
        return True

    def _end_flush(self) -> None:
        """The flushed fiber's stops leave the four inputs' heads."""
        for c in (self.iouter, self.ii, self.ij, self.ival):
            c.pop()

    def _data_step(self, tok, v) -> bool:
        """ACC mode, ``inner1`` data head ``tok`` with value head ``v``: load ``i`` from
        ``inner0`` if none is held (same cycle), ``acc[i, j] op= val``, pop both."""
        ij, val, ii = self.ij, self.ival, self.ii
        if isinstance(v, Control) and v is not EMPTY:
            raise self.error(f"inner1 coordinate {tok} but the value stream is at {v}")
        if self.cur_i is None:
            if not ii.q:
                return False
            if isinstance(ii.q[0], Control):
                raise self.error(f"inner1 data {tok} but inner0 is at {ii.q[0]}")
            self.cur_i = ii.pop()
            if not 0 <= self.cur_i < self.dim0:
                raise self.error(f"inner0 coordinate {self.cur_i} outside dimension {self.dim0}")
        if not 0 <= tok < self.dim1:
            raise self.error(f"inner1 coordinate {tok} outside dimension {self.dim1}")
        v = 0 if v is EMPTY else v
        key = (self.cur_i, tok)
        self.acc[key] = self.fn(self.acc[key], v) if key in self.acc else v
        self.flops += 1
        ij.pop()
        val.pop()
        return True

    def _done_step(self, ih) -> bool:
        """``inner1`` at ``D`` (``inner0`` head ``ih``): ``D`` on all inputs -> ``D`` on all outputs."""
        ij, val, ii, outer = self.ij, self.ival, self.ii, self.iouter
        if not outer.q:
            return False
        if ih is not DONE or outer.q[0] is not DONE:
            raise self.error(f"inner1 D but inner0 is at {ih} and outer at {outer.q[0]}")
        if not self._may_finish():
            return False
        return _all_done(self, (outer, ii, ij, val), (self.o0, self.o1, self.ov))

    def _stop_step(self, tok: Stop, ih) -> bool:
        """``inner1`` at stop ``tok`` (``inner0`` head ``ih``): end of an ``i`` fiber (``S0``), of
        ``k``'s ``i`` fiber (``S1``) or of the outer fiber (``S(m+2)``: enter FLUSH)."""
        ij, val, ii, outer = self.ij, self.ival, self.ii, self.iouter
        if self.cur_i is None and not isinstance(ih, Control):
            ii.pop()  # an i with an empty j fiber
            if tok.level == 0:
                ij.pop()
                val.pop()
            return True
        if tok.level == 0:
            if self.cur_i is None:
                raise self.error(f"inner1 S0 but inner0 is at {ih}")
            self.cur_i = None
            ij.pop()
            val.pop()
            return True
        if type(ih) is not Stop or ih.level != tok.level - 1:
            raise self.error(f"inner1 {tok} needs inner0 S{tok.level - 1}, but inner0 is at {ih}")
        if not outer.q:
            return False
        oh = outer.q[0]
        self.cur_i = None
        if tok.level == 1:
            if isinstance(oh, Control):
                raise self.error(f"inner1 S1 ends the fiber of an outer coordinate, but outer is at {oh}")
            for c in (outer, ii, ij, val):
                c.pop()
            return True
        if not isinstance(oh, Control):
            outer.pop()  # the last k of the outer fiber
            return True
        if type(oh) is not Stop or oh.level != tok.level - 2:
            raise self.error(f"inner1 {tok} needs outer S{tok.level - 2}, but outer is at {oh}")
        return self._end_fiber(oh)

    def _end_fiber(self, oh: Stop) -> bool:
        """The stops ending an outer fiber are at the heads (outer ``Sm``): enter FLUSH (they
        stay there until the flush ends)."""
        self.flush = sorted(self.acc)
        self.pos = 0
        self.flush_level = oh.level
        return True

    def _may_finish(self) -> bool:
        """``D`` may pass (the single bank: always, in ACC mode with room)."""
        return True

    def step(self) -> bool:
        if self.o0.full() or self.o1.full() or self.ov.full():
            return False
        if self.flush is not None:
            return self._flush_step()
        return self._acc_step()

    def _acc_step(self) -> bool:
        """ACC mode: one step by the ``inner1`` head (see the class docstring)."""
        ij, val, ii = self.ij, self.ival, self.ii
        if not ij.q or not val.q:
            return False
        tok, v = ij.q[0], val.q[0]
        if not isinstance(tok, Control):
            return self._data_step(tok, v)
        if v is not tok:
            raise self.error(f"inner1 {tok} but the value stream is at {v}")
        if not ii.q:
            return False
        ih = ii.q[0]
        if tok is DONE:
            return self._done_step(ih)
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in inner1")
        return self._stop_step(tok, ih)


class SpAcc2Double(SpAcc2):
    """``buffers=2``: two banks of sums, as :class:`SpAcc1Double`.  The accumulator (ACC mode
    above, input heads only) fills bank ``a``; the flusher (when all three outputs have room)
    empties the other bank with the flush steps above and then emits the fiber's stops (``Sm``
    on ``crd0``, ``S(m+1)`` on ``crd1`` / ``val``, kept from the hand-over).  The end of an outer
    fiber hands bank ``a`` over and pops the four stops if the flusher is free at the start of
    the cycle or emits its stops in this cycle; otherwise it waits.  ``D`` waits for a free
    flusher and room.
    """

    def __init__(self, name, ins, outs, *, dim0: int, dim1: int, op: ReduceOp = ReduceOp.ADD,
                 numerics: Numerics = INT32):
        super().__init__(name, ins, outs, dim0=dim0, dim1=dim1, op=op, numerics=numerics)
        self.banks: tuple[dict, dict] = (self.acc, {})
        self._busy = self._room = False

    def step(self) -> bool:
        self._room = not (self.o0.full() or self.o1.full() or self.ov.full())
        self._busy = self.flush is not None
        flushed = self._busy and self._room and self._flush_step()
        return self._acc_step() or flushed

    def _end_flush(self) -> None:
        """The stops were popped at the hand-over; the flushed level is ``flush_level``."""

    def _may_finish(self) -> bool:
        return self._room and not self._busy

    def _end_fiber(self, oh: Stop) -> bool:
        if self.flush is not None:  # the flusher is busy with the previous fiber: wait
            return False
        for c in (self.iouter, self.ii, self.ij, self.ival):
            c.pop()
        self.flush = sorted(self.acc)
        self.pos = 0
        self.flush_level = oh.level
        self.flush_acc = self.acc
        self.acc = self.banks[1] if self.acc is self.banks[0] else self.banks[0]
        return True



def _vec_data_step(self, tok) -> bool:
    """``_data_step`` of a vector accumulator (``lanes`` W > 1): ``acc[tok]`` is a vector of W
    sums, accumulated lane by lane (``N``: zeros)."""
    v = self._head_value(tok)
    w, fn, acc = self.lanes, self.fn, self.acc
    old = acc.get(tok)
    acc[tok] = v if old is None else Vec([fn(old[i], v[i]) for i in range(w)])
    self.flops += w
    self.iinner.pop()
    self.ival.pop()
    return True


class VecSpAcc1(SpAcc1):
    """:class:`SpAcc1` over vectors of ``lanes`` values: the same tokens and timing, each sum a
    vector added lanewise."""

    def __init__(self, name, ins, outs, *, dim: int, lanes: int, op: ReduceOp = ReduceOp.ADD,
                 numerics: Numerics = INT32):
        super().__init__(name, ins, outs, dim=dim, op=op, numerics=numerics)
        self.lanes, self.zero = lanes, Vec((0,) * lanes)

    _data_step = _vec_data_step


class VecSpAcc1Double(SpAcc1Double):
    """:class:`SpAcc1Double` over vectors of ``lanes`` values (see :class:`VecSpAcc1`)."""

    def __init__(self, name, ins, outs, *, dim: int, lanes: int, op: ReduceOp = ReduceOp.ADD,
                 numerics: Numerics = INT32):
        super().__init__(name, ins, outs, dim=dim, op=op, numerics=numerics)
        self.lanes, self.zero = lanes, Vec((0,) * lanes)

    _data_step = _vec_data_step


class Merge2(Primitive):
    """Two order-2 sparse results (each as ``spacc2`` emits one: ``crd0`` the ``i`` of each
    non-empty row with ``Sm`` after the last, ``crd1`` / ``val`` each row's ``j`` and values,
    ``S0`` between rows and ``S(m+1)`` after the last, a lone ``S(m+1)`` for an empty result)
    merged in ``(i, j)`` order: the values at the same ``(i, j)`` combined by ``op``, a
    coordinate one side lacks keeping the other side's value.

    One step per cycle, when every output has room.  ROW (no row open), by the ``crd0`` heads
    of both sides: a data head -> the smaller ``i`` (both when equal): emit it, pop it, open
    the row on that side (those sides).  Both ``Sm``: a side that had no row leaves its lone
    ``S(m+1)`` on ``crd1`` / ``val`` (wait for it, pop it); emit ``Sm`` on ``crd0``, and
    ``S(m+1)`` on ``crd1`` / ``val`` if no row was emitted; pop both.  Both ``D``: every input
    at ``D`` -> ``D`` on every output.  OPEN (a row open on one side or both), by the open
    sides' ``crd1`` heads: a data head -> the smaller ``j`` (both when equal): emit it and its
    value (combined when both), pop.  Every open side at its row's stop (``S0`` or ``S(m+1)``):
    wait for both ``crd0`` heads; emit ``S(m+1)`` on ``crd1`` / ``val`` if both are the outer
    stop ``Sm`` (the merged result's last row), else ``S0``; pop the row stops."""

    def __init__(self, name, ins, outs, *, op: ReduceOp = ReduceOp.ADD, numerics: Numerics = INT32):
        super().__init__(name, ins, outs)
        self.i0 = [ins[f"crd0_{s}"] for s in "ab"]
        self.i1 = [ins[f"crd1_{s}"] for s in "ab"]
        self.iv = [ins[f"val_{s}"] for s in "ab"]
        self.o0, self.o1, self.ov = outs["crd0"], outs["crd1"], outs["val"]
        self.fn = numerics.reduce_fn(op)
        self.open: tuple[int, ...] = ()  # the sides whose row is open (empty: ROW)
        self.had = [False, False]  # each side has emitted a row in this outer fiber
        self.any_row = False  # the merged result has

    def step(self) -> bool:
        if not self.outs_ready():
            return False
        return self._row_step() if self.open else self._outer_step()

    def _outer_step(self) -> bool:
        i0 = self.i0
        if not i0[0].q or not i0[1].q:
            return False
        heads = [i0[0].q[0], i0[1].q[0]]
        ctl = [isinstance(h, Control) for h in heads]
        if ctl[0] and ctl[1]:
            if heads[0] != heads[1]:
                raise self.error(f"the two sides end their rows with different tokens: {heads[0]}, {heads[1]}")
            return self._done() if heads[0] is DONE else self._outer_stop(heads[0])
        if DONE in heads:
            raise self.error("a side reached D while the other still has rows")
        i = min(h for h, c in zip(heads, ctl) if not c)
        self.open = tuple(s for s in (0, 1) if not ctl[s] and heads[s] == i)
        for s in self.open:
            i0[s].pop()
            self.had[s] = True
        self.o0.push(i)
        self.any_row = True
        return True

    def _outer_stop(self, tok) -> bool:
        """Both ``crd0`` heads at ``Sm``: the end of an outer fiber."""
        lone = [s for s in (0, 1) if not self.had[s]]
        for s in lone:
            if not self.i1[s].q or not self.iv[s].q:
                return False
        last = stop(tok.level + 1)
        for s in lone:
            if self.i1[s].q[0] != last or self.iv[s].q[0] != last:
                raise self.error(f"side {'ab'[s]} has no row before {tok} but its crd1 / val are at "
                                 f"{self.i1[s].q[0]} / {self.iv[s].q[0]}, not {last}")
            self.i1[s].pop()
            self.iv[s].pop()
        for c in self.i0:
            c.pop()
        self.o0.push(tok)
        if not self.any_row:
            self.o1.push(last)
            self.ov.push(last)
        self.had = [False, False]
        self.any_row = False
        return True

    def _done(self) -> bool:
        chans = [*self.i1, *self.iv]
        for c in chans:
            if not c.q:
                return False
        for c in chans:
            if c.q[0] is not DONE:
                raise self.error(f"crd0 at D but a crd1 / val input is at {c.q[0]}")
        return _all_done(self, (*self.i0, *chans), (self.o0, self.o1, self.ov))

    def _row_step(self) -> bool:
        i1, iv = self.i1, self.iv
        for s in self.open:
            if not i1[s].q or not iv[s].q:
                return False
        data = [s for s in self.open if not isinstance(i1[s].q[0], Control)]
        if data:
            j = min(i1[s].q[0] for s in data)
            vals = []
            for s in data:
                if i1[s].q[0] == j:
                    v = iv[s].q[0]
                    if isinstance(v, Control):
                        raise self.error(f"side {'ab'[s]}: crd1 at {j} but val at {v}")
                    i1[s].pop()
                    vals.append(iv[s].pop())
            self.o1.push(j)
            if len(vals) == 2:
                self.ov.push(self.fn(vals[0], vals[1]))
                self.flops += 1
            else:
                self.ov.push(vals[0])
            return True
        if not self.i0[0].q or not self.i0[1].q:
            return False  # the next crd0 heads tell whether this is the last row
        for s in self.open:
            if not isinstance(i1[s].q[0], Stop) or iv[s].q[0] != i1[s].q[0]:
                raise self.error(f"side {'ab'[s]}: a row ends with crd1 {i1[s].q[0]} and val {iv[s].q[0]}")
            i1[s].pop()
            iv[s].pop()
        nxt = [c.q[0] for c in self.i0]
        end = stop(nxt[0].level + 1) if all(isinstance(h, Stop) for h in nxt) else stop(0)
        self.o1.push(end)
        self.ov.push(end)
        self.open = ()
        return True


def _banked(b: Build, single: type[Primitive], double: type[Primitive]) -> type[Primitive]:
    """The model class for the node's ``buffers`` (1 or 2)."""
    n = b.params.get("buffers", 1)
    if n not in (1, 2):
        raise ValueError(f"node {b.name!r}: buffers={n!r} must be 1 or 2")
    return double if n == 2 else single


@model("spacc1")
def _spacc1(b: Build) -> Primitive:
    lanes = b.params.get("lanes", 1)
    if lanes > 1:
        cls = _banked(b, VecSpAcc1, VecSpAcc1Double)
        return cls(b.name, b.ins, b.outs, dim=b.params["dim"], lanes=lanes, op=b.params["op"], numerics=b.numerics)
    cls = _banked(b, SpAcc1, SpAcc1Double)
    return cls(b.name, b.ins, b.outs, dim=b.params["dim"], op=b.params["op"], numerics=b.numerics)


@model("spacc2")
def _spacc2(b: Build) -> Primitive:
    p = b.params
    cls = _banked(b, SpAcc2, SpAcc2Double)
    return cls(b.name, b.ins, b.outs, dim0=p["dim0"], dim1=p["dim1"], op=p["op"], numerics=b.numerics)


@model("merge2")
def _merge2(b: Build) -> Primitive:
    return Merge2(b.name, b.ins, b.outs, op=b.params["op"], numerics=b.numerics)
