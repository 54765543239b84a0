"""Cycle models of the ML primitives: unary ALU, coordinate mask, stop-token drop, spacc2.

Each class mirrors the RTL primitive of the same name in ``hw/ml_primitives.py`` decision for
decision.  Common rule (as in :mod:`sw_sim.primitives`): a primitive acts in a cycle only when
every one of its output FIFOs has room.  Value arithmetic comes from :mod:`fuseflow.numerics`.
"""

from __future__ import annotations

from typing import Any

from fuseflow.masks import mask_keep, mask_params
from fuseflow.numerics import INT32, Numerics
from fuseflow.samml import AluOp, MaskPred, ReduceOp
from fuseflow.tokens import DONE, EMPTY, Control, Stop, stop

from .engine import Primitive

__all__ = ["CrdMask", "SpAcc2", "StknDrop", "UnaryAlu", "mask_keep", "mask_params"]


class UnaryAlu(Primitive):
    """Unary ALU (relu, neg, add/mul by ``scalar``, exp, rsqrt, sigmoid, gelu); latency 2, II 1,
    pipelined like the binary ALU.

    Two pipeline registers, operand then result; each stage advances when the next one is free
    or is being emptied this cycle.  Back: a full result register whose output has room emits.
    Middle: the operand moves into the result register as ``f(x)`` (``N`` counts as 0) or the
    control token.  Front: when the input has a token, pop it into the operand register.  In RTL
    the function's datapath sits between the two registers."""

    def __init__(self, name, ins, outs, *, op: AluOp, scalar: float = 0.0, numerics: Numerics = INT32):
        super().__init__(name, ins, outs)
        self.inp = ins["a"]
        self.out = outs["val"]
        self.fn = numerics.unop(op, scalar, where=f"node {name!r} ({op.value})")
        self.opnd: Any = None
        self.res: Any = None

    def step(self) -> bool:
        progressed = False
        res = self.res
        if res is not None and not self.out.full():
            self.out.push(res)
            self.res = None
            if res is DONE:
                self.finish()
                return True
            progressed = True
        if self.opnd is not None and self.res is None:
            x = self.opnd
            self.res = x if isinstance(x, Control) else self.fn(x)
            self.opnd = None
            progressed = True
        inp = self.inp
        if self.opnd is None and inp.q:
            tok = inp.pop()
            self.opnd = 0 if tok is EMPTY else tok
            progressed = True
        return progressed


class CrdMask(Primitive):
    """Coordinate mask: in outer ``crd`` + inner ``crd`` + ``ref`` -> inner ``crd`` + ``ref``.

    ``cur`` holds the outer coordinate whose inner fiber is being read.  Fires when both outputs
    have room and the inner crd and ref heads are present.  Inner data: load ``cur`` from the
    outer input if empty (same cycle); emit crd and ref if :func:`mask_keep` holds; pop both.
    ``S0``: end of ``cur``'s fiber (an outer coordinate with an empty fiber is popped now); emit
    ``S0``.  ``Sk`` (k>=1): if no ``cur`` and the outer head is data, pop it and wait a cycle;
    then the outer head must be ``S(k-1)``: pop the three, emit ``Sk``.  ``D``: all three ``D``.
    A fiber the mask empties keeps its stop (use :class:`StknDrop` / crd_drop to prune it).
    Latency 0, II 1.
    """

    def __init__(self, name, ins, outs, *, pred: MaskPred, before: int = 0, after: int = 0, block: int = 1,
                 pattern: tuple[tuple[int, ...], ...] = ()):
        super().__init__(name, ins, outs)
        self.iouter, self.iinner, self.iref = ins["outer"], ins["inner"], ins["ref"]
        self.ocrd, self.oref = outs["crd"], outs["ref"]
        self.kw = {"before": before, "after": after, "block": block, "pattern": pattern}
        self.pred = pred
        self.cur: int | None = None

    def step(self) -> bool:
        inner, ref, outer = self.iinner, self.iref, self.iouter
        if not inner.q or not ref.q or self.ocrd.full() or self.oref.full():
            return False
        tok, r = inner.q[0], ref.q[0]
        if not isinstance(tok, Control):
            if isinstance(r, Control) and r is not EMPTY:
                raise self.error(f"inner coordinate {tok} but the ref stream is at {r}")
            if self.cur is None:
                if not outer.q:
                    return False
                if isinstance(outer.q[0], Control):
                    raise self.error(f"inner data {tok} but the outer stream is at {outer.q[0]}")
                self.cur = outer.pop()
            if mask_keep(self.pred, self.cur, tok, **self.kw):
                self.ocrd.push(tok)
                self.oref.push(r)
            inner.pop()
            ref.pop()
            return True
        if r is not tok:
            raise self.error(f"inner {tok} but the ref stream is at {r}")
        if not outer.q:
            return False
        oh = outer.q[0]
        if tok is DONE:
            if oh is not DONE:
                raise self.error(f"inner stream ended but the outer stream is at {oh}")
            outer.pop()
            inner.pop()
            ref.pop()
            self.ocrd.push(DONE)
            self.oref.push(DONE)
            self.finish()
            return True
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in the inner stream")
        if tok.level == 0:
            if self.cur is None:
                if isinstance(oh, Control):
                    raise self.error(f"inner S0 but the outer stream is at {oh}")
                outer.pop()
            self.cur = None
        elif self.cur is None and not isinstance(oh, Control):
            outer.pop()
            return True
        elif type(oh) is not Stop or oh.level != tok.level - 1:
            raise self.error(f"inner {tok} needs outer S{tok.level - 1}, but the outer stream is at {oh}")
        else:
            outer.pop()
            self.cur = None
        inner.pop()
        ref.pop()
        self.ocrd.push(tok)
        self.oref.push(tok)
        return True


class StknDrop(Primitive):
    """Stop-token drop: prunes empty fibers from one stream (any kind).

    Definition: a run of consecutive stop tokens becomes one stop of the run's highest level; a
    run at the start of the stream is dropped, unless ``D`` follows it directly (then the whole
    stream is one empty fiber and the run's highest stop is kept).  Data and ``N`` pass.  This is
    the stream of the same fibertree with every empty fiber removed, at every level.

    One-token register ``held``.  Fires when the input has a token and the output has room:
    data -> emit ``held`` (unless it is a leading stop), hold the data; stop -> merge into a
    held stop (no output), or emit held data and hold the stop, or hold it; ``D`` -> emit
    ``held`` if any (``D`` stays), else emit ``D``.  Latency: a token leaves when its successor
    arrives; II 1.
    """

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.inp = ins["in"]
        self.out = outs["out"]
        self.held: Any = None
        self.lead = True  # no data token seen yet

    def step(self) -> bool:
        inp = self.inp
        if not inp.q or self.out.full():
            return False
        tok = inp.q[0]
        held = self.held
        if tok is DONE:
            if held is not None:
                self.out.push(held)
                self.held = None
                return True
            self.out.push(DONE)
            inp.pop()
            self.finish()
            return True
        inp.pop()
        if type(tok) is Stop:
            if type(held) is Stop:
                self.held = stop(max(held.level, tok.level))
                return True
            if held is not None:
                self.out.push(held)
            self.held = tok
            return True
        if isinstance(tok, Control) and tok is not EMPTY:
            raise self.error(f"unexpected token {tok}")
        if held is not None and not self.lead:
            self.out.push(held)
        self.held = tok
        self.lead = False
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
        self.acc: dict[tuple[int, int], Any] = {}
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
            self.ov.push(self.acc[i, j])
            self.pos += 1
            return True
        for c in (self.iouter, self.ii, self.ij, self.ival):
            c.pop()
        m = self.flush_level
        self.o0.push(stop(m))
        self.o1.push(stop(m + 1))
        self.ov.push(stop(m + 1))
        self.acc.clear()
        self.flush = None
        self.open = False
        return True

    def step(self) -> bool:
        if self.o0.full() or self.o1.full() or self.ov.full():
            return False
        if self.flush is not None:
            return self._flush_step()
        ij, val, ii, outer = self.ij, self.ival, self.ii, self.iouter
        if not ij.q or not val.q:
            return False
        tok, v = ij.q[0], val.q[0]
        if not isinstance(tok, Control):
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
            ij.pop()
            val.pop()
            return True
        if v is not tok:
            raise self.error(f"inner1 {tok} but the value stream is at {v}")
        if not ii.q:
            return False
        ih = ii.q[0]
        if tok is DONE:
            if not outer.q:
                return False
            if ih is not DONE or outer.q[0] is not DONE:
                raise self.error(f"inner1 D but inner0 is at {ih} and outer at {outer.q[0]}")
            for c in (outer, ii, ij, val):
                c.pop()
            self.o0.push(DONE)
            self.o1.push(DONE)
            self.ov.push(DONE)
            self.finish()
            return True
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in inner1")
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
        self.flush = sorted(self.acc)
        self.pos = 0
        self.flush_level = tok.level - 2
        return True
