"""Cycle models of value arithmetic: the binary ALU and fiber reduction (the unary ALU is in
:mod:`sw_sim.nonlinear`)."""

from __future__ import annotations

from fuseflow.ir.numerics import INT32, Numerics
from fuseflow.ir.primitives.alu import lane_reduce_latency
from fuseflow.ir.samml import (
    UNARY_ALU_OPS,
    AluOp,
    ReduceOp,
    alu_latency,
)
from fuseflow.ir.tokens import DONE, EMPTY, Control, Vec, stop

from .engine import Primitive
from .nonlinear import UnaryAlu, VecUnaryAlu
from .registry import Build, model
from .staged import Staged


class Alu(Staged):
    """Binary ALU over aligned value streams (``N`` counts as 0, or with ``identity_empty``
    as the other operand); II 1, latency
    :func:`fuseflow.ir.samml.alu_latency` (2, or 4 for ``mul``).

    A chain of pipeline registers, operands first; each stage advances when the next one is
    free or is being emptied this cycle.  Back: a full last stage whose output has room emits.
    Middle: stages move up, back to front; leaving the operand stage a data pair becomes
    data op data (rounding, saturation / wrap by the ``numerics``, :mod:`fuseflow.ir.numerics`),
    a control token stays itself.  Front: when both inputs have a token, pop both into the
    operand stage.  In RTL the operation sits in the stages between (the multiplier's partial
    products, their sum, then rounding and saturation)."""

    def __init__(self, name, ins, outs, *, op: AluOp, numerics: Numerics = INT32, identity_empty: bool = False):
        super().__init__(name, ins, outs)
        self.a, self.b = ins["a"], ins["b"]
        self.out = outs["val"]
        self.fn = numerics.binop(op)
        self.identity_empty = identity_empty  # max / min: an N operand takes the other's value
        self.stages: list = [None] * alu_latency(op)

    def leave_front(self, v):
        x, y = v
        if isinstance(x, Control):
            return x
        self.flops += 1
        return self.fn(x, y)

    def fill(self) -> bool:
        a, b = self.a, self.b
        if not (a.q and b.q):
            return False
        x, y = a.q[0], b.q[0]
        xc, yc = isinstance(x, Control) and x is not EMPTY, isinstance(y, Control) and y is not EMPTY
        if xc or yc:
            if x is not y:
                raise self.error(f"operands misaligned: a={x}, b={y}")
            self.stages[0] = (x, x)
        else:
            if self.identity_empty:
                x, y = (y if x is EMPTY else x), (x if y is EMPTY else y)
            self.stages[0] = (0 if x is EMPTY else x, 0 if y is EMPTY else y)
        a.pop()
        b.pop()
        return True



class Reduce(Primitive):
    """Reduce each innermost fiber (fires when the input has a token and the output has room):
    data -> accumulate; ``S0`` -> emit the result, reset; ``Sk`` (k>=1) -> emit the result this
    cycle and ``S(k-1)`` the next, popping ``Sk`` then; ``D`` -> ``D``.  The initial value is 0
    for add and the most negative value for max; add wraps / saturates by the ``numerics``.
    ``nonempty``: a bare ``Sk`` (k>=1: no token since the last stop, an empty outer fibre when
    the reduced fibres are never empty) gives ``S(k-1)`` alone, no value."""

    def __init__(self, name, ins, outs, *, op: ReduceOp, numerics: Numerics = INT32, nonempty: bool = False):
        super().__init__(name, ins, outs)
        self.inp = ins["val"]
        self.out = outs["val"]
        self.op = op
        self.init = numerics.reduce_init(op)
        self.fn = numerics.reduce_fn(op)
        self.acc = self.init
        self.flushed = False  # result of the fiber closed by the head Sk already emitted
        self.nonempty = nonempty
        self.seen = False  # a token (data or N) since the last stop

    def step(self) -> bool:
        if not self.inp.q or self.out.isfull:
            return False
        tok = self.inp.q[0]
        if not isinstance(tok, Control):
            self.acc = self.fn(self.acc, tok)
            self.flops += 1
            self.seen = True
        elif tok is EMPTY:
            self.acc = self.fn(self.acc, 0)
            self.flops += 1
            self.seen = True
        elif tok is DONE:
            self.out.push(DONE)
            self.finish()
        elif tok.level == 0:
            self.out.push(self.acc)
            self.acc = self.init
            self.seen = False
        elif not self.flushed and (self.seen or not self.nonempty):
            self.out.push(self.acc)
            self.acc = self.init
            self.flushed = True
            return True
        else:
            self.out.push(stop(tok.level - 1))
            self.flushed = False
            self.seen = False
        self.inp.pop()
        return True



class VecAlu(Alu):
    """The binary ALU over vector streams (``lanes`` W > 1): the operation lane by lane, with
    the timing of :class:`Alu` (W operations per stage).  A scalar operand (``scalar_port``
    ``a`` or ``b``: one value per token) is used for every lane.  ``N`` counts as zeros."""

    def __init__(self, name, ins, outs, *, op: AluOp, lanes: int, numerics: Numerics = INT32,
                 identity_empty: bool = False):
        super().__init__(name, ins, outs, op=op, numerics=numerics, identity_empty=identity_empty)
        self.lanes = lanes

    def leave_front(self, v):
        x, y = v
        if isinstance(x, Control):
            return x
        w = self.lanes
        xs = x if isinstance(x, Vec) else (x,) * w  # a scalar operand (or N's 0) for every lane
        ys = y if isinstance(y, Vec) else (y,) * w
        self.flops += w
        fn = self.fn
        return Vec([fn(xs[i], ys[i]) for i in range(w)])


class VecReduce(Reduce):
    """Lanewise reduction of each innermost fiber of vectors (``lanes`` W > 1): as
    :class:`Reduce`, with a vector accumulator (W operations per data token)."""

    def __init__(self, name, ins, outs, *, op: ReduceOp, lanes: int, numerics: Numerics = INT32,
                 nonempty: bool = False):
        super().__init__(name, ins, outs, op=op, numerics=numerics, nonempty=nonempty)
        self.lanes = lanes
        self.init = Vec((self.init,) * lanes)
        self.acc = self.init

    def step(self) -> bool:
        if not self.inp.q or self.out.isfull:
            return False
        tok = self.inp.q[0]
        if not isinstance(tok, Control) or tok is EMPTY:
            fn, acc, w = self.fn, self.acc, self.lanes
            v = tok if tok is not EMPTY else (0,) * w
            self.acc = Vec([fn(acc[i], v[i]) for i in range(w)])
            self.flops += w
            self.seen = True
            self.inp.pop()
            return True
        return Reduce.step(self)


class LaneReduce(Staged):
    """Reduces the lanes of each vector to one value (``lanes`` W >= 2) in a pipelined tree:
    ``1 + log2(W)`` stages (the primitive table's latency), II 1.  Stage 0 holds the popped
    token; each following stage holds one level of the tree, the pairwise ``(l0 op l1) op
    (l2 op l3) ...`` of the level before (the whole tree is computed as the token leaves stage
    0: the later stages only carry it, cycle for cycle as the RTL's levels).  ``N`` -> 0 (every
    lane 0); control tokens pass through in order.  Stages advance as in :class:`Alu`."""

    def __init__(self, name, ins, outs, *, op: ReduceOp, lanes: int, numerics: Numerics = INT32):
        super().__init__(name, ins, outs)
        self.inp = ins["val"]
        self.out = outs["val"]
        self.lanes = lanes
        self.fn = numerics.reduce_fn(op)
        self.stages: list = [None] * lane_reduce_latency(self)

    def leave_front(self, v):
        if isinstance(v, Control):
            return v
        fn = self.fn
        level = list(v)
        while len(level) > 1:
            level = [fn(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        self.flops += self.lanes - 1
        return level[0]

    def fill(self) -> bool:
        if not self.inp.q:
            return False
        tok = self.inp.pop()
        self.stages[0] = (0,) * self.lanes if tok is EMPTY else tok
        return True


@model("alu")
def _alu(b: Build) -> Primitive:
    op, lanes = b.params["op"], b.params.get("lanes", 1)
    if op in UNARY_ALU_OPS:
        if lanes > 1:
            return VecUnaryAlu(b.name, b.ins, b.outs, op=op, scalar=b.params["scalar"], lanes=lanes,
                               numerics=b.numerics)
        return UnaryAlu(b.name, b.ins, b.outs, op=op, scalar=b.params["scalar"], numerics=b.numerics)
    ident = bool(b.params.get("identity_empty", False))
    if lanes > 1:
        return VecAlu(b.name, b.ins, b.outs, op=op, lanes=lanes, numerics=b.numerics, identity_empty=ident)
    return Alu(b.name, b.ins, b.outs, op=op, numerics=b.numerics, identity_empty=ident)


@model("reduce")
def _reduce(b: Build) -> Primitive:
    lanes, nonempty = b.params.get("lanes", 1), bool(b.params.get("nonempty", False))
    if lanes > 1:
        return VecReduce(b.name, b.ins, b.outs, op=b.params["op"], lanes=lanes, numerics=b.numerics,
                         nonempty=nonempty)
    return Reduce(b.name, b.ins, b.outs, op=b.params["op"], numerics=b.numerics, nonempty=nonempty)


@model("lane_reduce")
def _lane_reduce(b: Build) -> Primitive:
    return LaneReduce(b.name, b.ins, b.outs, op=b.params["op"], lanes=b.params["lanes"], numerics=b.numerics)
