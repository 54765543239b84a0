"""Cycle models of the SAMML primitives (DESIGN §4).

Each class mirrors the micro-architecture of the RTL primitive of the same name in
``hw/primitives.py`` decision for decision; the docstrings state the per-cycle rules.  Common
rule: a primitive acts in a cycle only when every one of its output FIFOs has room
("fire"), except where a docstring says otherwise (writers have no outputs; the front stage of
the memory-reading primitives fills its pipeline register independently).
"""

from __future__ import annotations

from fuseflow.numerics import INT32, Numerics
from fuseflow.samml import PRIMITIVES, AluOp, NodeKind, ReduceOp, alu_latency
from fuseflow.tokens import DONE, EMPTY, REPEAT, Control, Stop, stop

from .engine import Channel, Primitive

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
    "Sink",
    "Source",
    "SpAcc1",
    "Union",
    "ValsWrite",
]

S0 = stop(0)
_FIBER, _END, _IDLE = 0, 1, 2


class Root(Primitive):
    """Emits ``0`` then ``D`` (one per cycle, when its output has room)."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.out = outs["ref"]
        self.sent = 0

    def step(self) -> bool:
        if self.out.isfull:
            return False
        if self.sent == 0:
            self.out.push(0)
            self.sent = 1
        else:
            self.out.push(DONE)
            self.finish()
        return True


class Scan(Primitive):
    """Level scanner, compressed (``seg``/``crd``) or dense (``dim``); latency 2, II 1.

    Front stage: when the pipeline register is free (empty, or emptied by the back stage this
    cycle) and an input token is present, pop it into the register together with its fiber
    bounds (``seg[r], seg[r+1]`` read from memory, or ``r*dim, r*dim+dim``; ``N`` gives an empty
    fiber).  Back stage (fires when both outputs have room), by mode:
    FIBER: emit ``crd[p]`` (dense: ``p - start``) and ``p``; END after the last one.
    END (fiber finished, stop pending): register ``Sk`` -> emit ``S(k+1)``, consume;
    data/N -> emit ``S0`` and load that fiber; ``D`` -> emit ``S0`` (D stays).
    IDLE: ``Sk`` -> emit ``S(k+1)``; ``D`` -> emit ``D``, finish; data/N -> load (no output).
    """

    def __init__(self, name, ins, outs, *, seg=None, crd=None, dim=None):
        super().__init__(name, ins, outs)
        self.inp = ins["ref"]
        self.ocrd = outs["crd"]
        self.oref = outs["ref"]
        self.seg = None if seg is None else [int(x) for x in seg]
        self.crd = None if crd is None else [int(x) for x in crd]
        self.dim = dim
        self.pipe = None  # token in the pipeline register
        self.pipe_lo = self.pipe_hi = 0
        self.mode = _IDLE
        self.p = self.hi = self.lo = 0

    def _bounds(self, r):
        if self.seg is not None:
            if not 0 <= r < len(self.seg) - 1:
                raise self.error(f"reference {r} outside seg array of {len(self.seg)} entries")
            return self.seg[r], self.seg[r + 1]
        return r * self.dim, r * self.dim + self.dim

    def _load(self):
        self.lo = self.p = self.pipe_lo
        self.hi = self.pipe_hi
        self.mode = _FIBER if self.p < self.hi else _END

    def step(self) -> bool:
        progressed = False
        consumed = False
        pipe = self.pipe
        if not (self.ocrd.isfull or self.oref.isfull):
            mode = self.mode
            if mode == _FIBER:
                p = self.p
                self.ocrd.push(self.crd[p] if self.crd is not None else p - self.lo)
                self.oref.push(p)
                self.p = p = p + 1
                if p == self.hi:
                    self.mode = _END
                progressed = True
            elif pipe is not None:
                if type(pipe) is Stop:
                    s = stop(pipe.level + 1)
                    self.ocrd.push(s)
                    self.oref.push(s)
                    consumed = True
                    self.mode = _IDLE
                elif pipe is DONE:
                    if mode == _END:
                        self.ocrd.push(S0)
                        self.oref.push(S0)
                        self.mode = _IDLE
                    else:
                        self.ocrd.push(DONE)
                        self.oref.push(DONE)
                        consumed = True
                        self.finish()
                else:  # data or N: start the next fiber
                    if mode == _END:
                        self.ocrd.push(S0)
                        self.oref.push(S0)
                    self._load()
                    consumed = True
                progressed = True
        if consumed:
            self.pipe = None
        if self.pipe is None and self.inp.q:
            tok = self.inp.pop()
            if tok is EMPTY:
                self.pipe_lo = self.pipe_hi = 0
            elif not isinstance(tok, Control):
                self.pipe_lo, self.pipe_hi = self._bounds(tok)
            elif tok is REPEAT:
                raise self.error("R token on a ref stream")
            self.pipe = tok
            progressed = True
        return progressed


class LevelWrite(Primitive):
    """Level writer: compressed appends ``crd`` and closes one ``seg`` fiber per stop (with
    ``skip_empty``, only per stop that follows a coordinate: under a compressed parent, empty
    fibers were dropped and their stops only close outer levels); dense counts coordinates.
    Pops one token per cycle; finishes on ``D``."""

    def __init__(self, name, ins, outs, *, compressed: bool, skip_empty: bool = False):
        super().__init__(name, ins, outs)
        self.inp = ins["crd"]
        self.compressed = compressed
        self.skip_empty = skip_empty
        self.seg = [0]
        self.crd: list[int] = []
        self.open = False  # a coordinate arrived since the last stop

    def step(self) -> bool:
        if not self.inp.q:
            return False
        tok = self.inp.pop()
        if isinstance(tok, Control):
            if tok is DONE:
                self.finish()
            elif type(tok) is Stop:
                if self.open or not self.skip_empty:
                    self.seg.append(len(self.crd))
                self.open = False
            else:
                raise self.error(f"unexpected token {tok} in a crd stream")
        else:
            self.crd.append(tok)
            self.open = True
        return True


class ValsWrite(Primitive):
    """Values writer: appends each data token to ``vals``; ignores stops; finishes on ``D``."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.inp = ins["val"]
        self.vals: list = []

    def step(self) -> bool:
        if not self.inp.q:
            return False
        tok = self.inp.pop()
        if isinstance(tok, Control):
            if tok is DONE:
                self.finish()
            elif tok is EMPTY:
                self.vals.append(0)
        else:
            self.vals.append(tok)
        return True


class RepSig(Primitive):
    """Repeat-signal generator: data -> ``R``, any stop -> ``S0``, ``D`` -> ``D``."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.inp = ins["in"]
        self.out = outs["repsig"]

    def step(self) -> bool:
        if not self.inp.q or self.out.isfull:
            return False
        tok = self.inp.pop()
        if not isinstance(tok, Control) or tok is EMPTY:
            self.out.push(REPEAT)
        elif tok is DONE:
            self.out.push(DONE)
            self.finish()
        else:
            self.out.push(S0)
        return True


class Repeat(Primitive):
    """Repeat: holds the current reference in a register.

    Fires when the output has room and a repeat signal is present.
    ``R``: emit the held ref (loading it from the ref input first, same cycle, if none is held).
    ``S`` with a held ref: look at the next ref: ``Sk`` -> pop it, emit ``S(k+1)``; other token
    -> emit ``S0``; nothing yet -> wait.  ``S`` with none held: a ref ``Sk`` at the head (an
    empty fiber of refs) -> pop it, emit ``S(k+1)``; a data ref (zero repeats) -> pop it into the
    register this cycle and handle the ``S`` next cycle.  ``D``: needs ref ``D``; emit ``D``.
    """

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.ref = ins["ref"]
        self.rs = ins["repsig"]
        self.out = outs["ref"]
        self.cur = None

    def step(self) -> bool:
        if not self.rs.q or self.out.isfull:
            return False
        sig = self.rs.q[0]
        ref = self.ref
        if sig is REPEAT:
            if self.cur is None:
                if not ref.q:
                    return False
                tok = ref.q[0]
                if type(tok) is Stop or tok is DONE:
                    raise self.error(f"repeat signal R but the ref stream is at {tok}")
                self.cur = ref.pop()
            self.out.push(self.cur)
            self.rs.pop()
            return True
        if sig is DONE:
            if not ref.q:
                return False
            if ref.q[0] is not DONE or self.cur is not None:
                raise self.error(f"repeat signal D but the ref stream is at {ref.q[0]}")
            ref.pop()
            self.rs.pop()
            self.out.push(DONE)
            self.finish()
            return True
        # S
        if self.cur is None:
            if not ref.q:
                return False
            tok = ref.pop() if ref.q[0] is not DONE else DONE
            if tok is DONE:
                raise self.error("repeat signal S but the ref stream is at D")
            if type(tok) is Stop:  # bare stop: an empty fiber of refs
                self.out.push(stop(tok.level + 1))
                self.rs.pop()
            else:
                self.cur = tok
            return True
        if not ref.q:
            return False
        nxt = ref.q[0]
        if type(nxt) is Stop:
            ref.pop()
            self.out.push(stop(nxt.level + 1))
        else:
            self.out.push(S0)
        self.cur = None
        self.rs.pop()
        return True


class _Joiner(Primitive):
    def __init__(self, name, ins, outs, *, n: int):
        super().__init__(name, ins, outs)
        self.n = n
        self.icrd = [ins[f"crd{i}"] for i in range(n)]
        self.iref = [ins[f"ref{i}"] for i in range(n)]
        self.ocrd = outs["crd"]
        self.oref = [outs[f"ref{i}"] for i in range(n)]
        self.all_in = self.icrd + self.iref

    def _heads(self):
        for c in self.all_in:
            if not c.q:
                return None
        if not self.outs_ready():
            return None
        return [c.q[0] for c in self.icrd]

    def _all_control(self, heads):
        """Handle the all-stop / all-done cases; returns True if it acted."""
        first = heads[0]
        for h in heads:
            if h is not first:
                raise self.error(
                    "inputs disagree on control tokens: " + ", ".join(str(x) for x in heads)
                )
        for i in range(self.n):
            self.icrd[i].pop()
            self.iref[i].pop()
            self.oref[i].push(first)
        self.ocrd.push(first)
        if first is DONE:
            self.finish()
        return True


class Intersect(_Joiner):
    """n-ary intersection.  Fires when every input (crd and ref) has a token and every output
    has room.  All data, equal: emit the coordinate and each ref, pop all.  All data, unequal:
    pop the inputs below the maximum.  Some data, some stops: pop the data inputs.  All control:
    they must be equal; emit and pop all."""

    def step(self) -> bool:
        heads = self._heads()
        if heads is None:
            return False
        ctl = [isinstance(h, Control) for h in heads]
        if not any(ctl):
            m = max(heads)
            if all(h == m for h in heads):
                self.ocrd.push(m)
                for i in range(self.n):
                    self.icrd[i].pop()
                    self.oref[i].push(self.iref[i].pop())
            else:
                for i in range(self.n):
                    if heads[i] < m:
                        self.icrd[i].pop()
                        self.iref[i].pop()
            return True
        if all(ctl):
            return self._all_control(heads)
        if any(h is DONE for h in heads):
            raise self.error("an input reached D while another still has data")
        for i in range(self.n):
            if not ctl[i]:
                self.icrd[i].pop()
                self.iref[i].pop()
        return True


class Union(_Joiner):
    """n-ary union.  Fires like Intersect.  Some data: emit the minimum coordinate ``m``; inputs
    at ``m`` pop and emit their ref, the others emit ``N``.  All control: equal, emit, pop all."""

    def step(self) -> bool:
        heads = self._heads()
        if heads is None:
            return False
        data = [h for h in heads if not isinstance(h, Control)]
        if not data:
            return self._all_control(heads)
        if any(h is DONE for h in heads):
            raise self.error("an input reached D while another still has data")
        m = min(data)
        self.ocrd.push(m)
        for i in range(self.n):
            if heads[i] == m and not isinstance(heads[i], Control):
                self.icrd[i].pop()
                self.oref[i].push(self.iref[i].pop())
            else:
                self.oref[i].push(EMPTY)
        return True


class _OuterInner(Primitive):
    """Shared walk of an outer crd stream against the inner stream nested under it.

    ``cur`` holds the outer coordinate whose inner fiber is being read.  Per inner token (fires
    when both outputs have room):
    data: load ``cur`` from the outer input if empty (same cycle); ``on_data``.
    ``S0``: end of ``cur``'s fiber (an outer data token with an empty fiber is popped now).
    ``Sk`` (k>=1): end of the outer fiber; if no ``cur`` and the outer head is data (a last
    coordinate with an empty fiber) pop it and wait a cycle; then the outer head must be
    ``S(k-1)``: pop both, emit the stops.  ``D``: both ``D``.
    """

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.iouter = ins["outer"]
        self.iinner = ins["inner"]
        self.oouter = outs["outer"]
        self.oinner = outs["inner"]
        self.cur = None

    def on_data(self, tok, loaded: bool) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_fiber_end(self, tok) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self) -> bool:
        inner, outer = self.iinner, self.iouter
        if not inner.q or self.oouter.isfull or self.oinner.isfull:
            return False
        tok = inner.q[0]
        if not isinstance(tok, Control) or tok is EMPTY:
            loaded = False
            if self.cur is None:
                if not outer.q:
                    return False
                if isinstance(outer.q[0], Control):
                    raise self.error(f"inner data {tok} but the outer stream is at {outer.q[0]}")
                self.cur = outer.pop()
                loaded = True
            inner.pop()
            self.on_data(tok, loaded)
            return True
        if tok is DONE:
            if not outer.q:
                return False
            if outer.q[0] is not DONE:
                raise self.error(f"inner stream ended but the outer stream is at {outer.q[0]}")
            outer.pop()
            inner.pop()
            self.oouter.push(DONE)
            self.oinner.push(DONE)
            self.finish()
            return True
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in the inner stream")
        if tok.level == 0:
            if self.cur is None:
                if not outer.q:
                    return False
                if isinstance(outer.q[0], Control):
                    raise self.error(f"inner S0 but the outer stream is at {outer.q[0]}")
                outer.pop()
            self.cur = None
            inner.pop()
            self.on_fiber_end(tok)
            return True
        if not outer.q:
            return False
        oh = outer.q[0]
        if self.cur is None and not isinstance(oh, Control):
            outer.pop()
            return True
        if type(oh) is not Stop or oh.level != tok.level - 1:
            raise self.error(f"inner {tok} needs outer S{tok.level - 1}, but the outer stream is at {oh}")
        outer.pop()
        inner.pop()
        self.cur = None
        self.oouter.push(self.held_stop(oh, tok))
        self.oinner.push(tok)
        return True

    def held_stop(self, outer_stop: Stop, inner_stop: Stop) -> Stop:  # pragma: no cover
        raise NotImplementedError


class CrdDrop(_OuterInner):
    """Coordinate drop: outer coordinates whose inner fiber is empty are dropped; the inner
    stream passes through.  An outer coordinate is emitted with its fiber's first element."""

    def on_data(self, tok, loaded):
        if loaded:
            self.oouter.push(self.cur)
        self.oinner.push(tok)

    def on_fiber_end(self, tok):
        self.oinner.push(tok)

    def held_stop(self, outer_stop, inner_stop):
        return outer_stop


class CrdHold(_OuterInner):
    """Coordinate hold: emits the current outer coordinate once per inner element; the held
    stream follows the inner stream's stops."""

    def on_data(self, tok, loaded):
        self.oouter.push(self.cur)
        self.oinner.push(tok)

    def on_fiber_end(self, tok):
        self.oouter.push(tok)
        self.oinner.push(tok)

    def held_stop(self, outer_stop, inner_stop):
        return inner_stop


class _Staged(Primitive):
    """A chain of pipeline registers ``stages`` (front first) in front of output ``out``."""

    stages: list
    out: Channel

    def leave_front(self, v):
        """What the front stage's token becomes when it moves up (default: itself)."""
        return v

    def advance(self) -> bool | None:
        """Back: a full last stage whose output has room emits.  Middle: stages move up, back
        to front, into free (or just emptied) stages.  Returns whether anything moved, or
        ``None`` once ``D`` has left (the primitive is finished)."""
        progressed = False
        st = self.stages
        last = st[-1]
        if last is not None and not self.out.isfull:
            self.out.push(last)
            st[-1] = None
            if last is DONE:
                self.finish()
                return None
            progressed = True
        for k in range(len(st) - 2, -1, -1):
            if st[k] is not None and st[k + 1] is None:
                st[k + 1], st[k] = (self.leave_front(st[k]) if k == 0 else st[k]), None
                progressed = True
        return progressed


class ArrayLoad(_Staged):
    """Value load ``vals[ref]`` (``N`` -> 0, control passes); II 1, latency 2 (the primitive
    table's): a block-RAM read stage, then a register for the word read, so the memory's slow
    clock-to-output has a cycle of its own.

    Stages advance back to front as in :class:`Alu`: a full last stage whose output has room
    emits; the read stage moves up when the last stage is free; a free read stage pops."""

    def __init__(self, name, ins, outs, *, vals):
        super().__init__(name, ins, outs)
        self.inp = ins["ref"]
        self.out = outs["val"]
        self.vals = list(vals)
        self.stages: list = [None] * PRIMITIVES[NodeKind.ARRAY_LOAD].latency

    def step(self) -> bool:
        progressed = self.advance()
        if progressed is None:
            return True
        st = self.stages
        if st[0] is None and self.inp.q:
            tok = self.inp.pop()
            if not isinstance(tok, Control):
                if not 0 <= tok < len(self.vals):
                    raise self.error(f"reference {tok} outside vals array of {len(self.vals)} entries")
                tok = self.vals[tok]
            elif tok is EMPTY:
                tok = 0
            st[0] = tok
            progressed = True
        return progressed


class Alu(_Staged):
    """Binary ALU over aligned value streams (``N`` counts as 0); II 1, latency
    :func:`fuseflow.samml.alu_latency` (2, or 4 for ``mul``).

    A chain of pipeline registers, operands first; each stage advances when the next one is
    free or is being emptied this cycle.  Back: a full last stage whose output has room emits.
    Middle: stages move up, back to front; leaving the operand stage a data pair becomes
    data op data (rounding, saturation / wrap by the ``numerics``, :mod:`fuseflow.numerics`),
    a control token stays itself.  Front: when both inputs have a token, pop both into the
    operand stage.  In RTL the operation sits in the stages between (the multiplier's partial
    products, their sum, then rounding and saturation)."""

    def __init__(self, name, ins, outs, *, op: AluOp, numerics: Numerics = INT32):
        super().__init__(name, ins, outs)
        self.a, self.b = ins["a"], ins["b"]
        self.out = outs["val"]
        self.fn = numerics.binop(op)
        self.stages: list = [None] * alu_latency(op)

    def leave_front(self, v):
        x, y = v
        return x if isinstance(x, Control) else self.fn(x, y)

    def step(self) -> bool:
        progressed = self.advance()
        if progressed is None:
            return True
        st = self.stages
        a, b = self.a, self.b
        if st[0] is None and a.q and b.q:
            x, y = a.q[0], b.q[0]
            xc, yc = isinstance(x, Control) and x is not EMPTY, isinstance(y, Control) and y is not EMPTY
            if xc or yc:
                if x is not y:
                    raise self.error(f"operands misaligned: a={x}, b={y}")
                st[0] = (x, x)
            else:
                st[0] = (0 if x is EMPTY else x, 0 if y is EMPTY else y)
            a.pop()
            b.pop()
            progressed = True
        return progressed


class Reduce(Primitive):
    """Reduce each innermost fiber (fires when the input has a token and the output has room):
    data -> accumulate; ``S0`` -> emit the result, reset; ``Sk`` (k>=1) -> emit the result this
    cycle and ``S(k-1)`` the next, popping ``Sk`` then; ``D`` -> ``D``.  The initial value is 0
    for add and the most negative value for max; add wraps / saturates by the ``numerics``."""

    def __init__(self, name, ins, outs, *, op: ReduceOp, numerics: Numerics = INT32):
        super().__init__(name, ins, outs)
        self.inp = ins["val"]
        self.out = outs["val"]
        self.op = op
        self.init = numerics.reduce_init(op)
        self.fn = numerics.reduce_fn(op)
        self.acc = self.init
        self.flushed = False  # result of the fiber closed by the head Sk already emitted

    def step(self) -> bool:
        if not self.inp.q or self.out.isfull:
            return False
        tok = self.inp.q[0]
        if not isinstance(tok, Control):
            self.acc = self.fn(self.acc, tok)
        elif tok is EMPTY:
            self.acc = self.fn(self.acc, 0)
        elif tok is DONE:
            self.out.push(DONE)
            self.finish()
        elif tok.level == 0:
            self.out.push(self.acc)
            self.acc = self.init
        elif not self.flushed:
            self.out.push(self.acc)
            self.acc = self.init
            self.flushed = True
            return True
        else:
            self.out.push(stop(tok.level - 1))
            self.flushed = False
        self.inp.pop()
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
        self.acc: dict[int, int] = {}
        self.flush: list[int] | None = None
        self.flush_pos = 0

    def step(self) -> bool:
        if self.ocrd.isfull or self.oval.isfull:
            return False
        if self.flush is not None:
            if self.flush_pos < len(self.flush):
                c = self.flush[self.flush_pos]
                self.flush_pos += 1
                self.ocrd.push(c)
                self.oval.push(self.acc[c])
                return True
            s = self.iouter.pop()
            self.iinner.pop()
            self.ival.pop()
            self.ocrd.push(s)
            self.oval.push(s)
            self.acc.clear()
            self.flush = None
            return True
        inner, val, outer = self.iinner, self.ival, self.iouter
        if not inner.q or not val.q:
            return False
        tok = inner.q[0]
        if not isinstance(tok, Control):
            v = val.q[0]
            if isinstance(v, Control) and v is not EMPTY:
                raise self.error(f"inner coordinate {tok} but the value stream is at {v}")
            if not 0 <= tok < self.dim:
                raise self.error(f"inner coordinate {tok} outside dimension {self.dim}")
            v = 0 if v is EMPTY else v
            acc = self.acc
            acc[tok] = self.fn(acc[tok], v) if tok in acc else v
            inner.pop()
            val.pop()
            return True
        if val.q[0] is not tok:
            raise self.error(f"inner {tok} but the value stream is at {val.q[0]}")
        if not outer.q:
            return False
        oh = outer.q[0]
        if tok is DONE:
            if oh is not DONE:
                raise self.error(f"inner D but the outer stream is at {oh}")
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
        self.flush = sorted(self.acc)
        self.flush_pos = 0
        return True


class Broadcast(Primitive):
    """Fan-out: when the input has a token and every output has room, copy it to all."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.inp = ins["in"]
        self.olist = list(outs.values())

    def step(self) -> bool:
        if not self.inp.q:
            return False
        for o in self.olist:
            if o.isfull:
                return False
        tok = self.inp.pop()
        for o in self.olist:
            o.push(tok)
        if tok is DONE:
            self.finish()
        return True


class Source(Primitive):
    """Test harness: pushes a token list, one per cycle when there is room."""

    def __init__(self, name, outs: dict[str, Channel], tokens):
        super().__init__(name, {}, outs)
        self.out = next(iter(outs.values()))
        self.tokens = list(tokens)
        self.pos = 0

    def step(self) -> bool:
        if self.pos >= len(self.tokens) or self.out.isfull:
            return False
        self.out.push(self.tokens[self.pos])
        self.pos += 1
        if self.pos == len(self.tokens):
            self.finish()
        return True


class Sink(Primitive):
    """Test harness: pops one token per cycle and records it; finishes on ``D``."""

    def __init__(self, name, ins: dict[str, Channel]):
        super().__init__(name, ins, {})
        self.inp = next(iter(ins.values()))
        self.tokens: list = []

    def step(self) -> bool:
        if not self.inp.q:
            return False
        tok = self.inp.pop()
        self.tokens.append(tok)
        if tok is DONE:
            self.finish()
        return True
