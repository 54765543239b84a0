"""Cycle model of the unary ALU (relu, neg, scalar ops, exp, rsqrt, sigmoid, gelu)."""

from __future__ import annotations

from fuseflow.ir.numerics import INT32, Numerics
from fuseflow.ir.samml import (
    AluOp,
)
from fuseflow.ir.tokens import EMPTY, Control, Vec

from .staged import Staged


class UnaryAlu(Staged):
    """Unary ALU (relu, neg, add/mul by ``scalar``, exp, rsqrt, sigmoid, gelu); latency 2, II 1,
    pipelined like the binary ALU.  Over a vector stream (``lanes`` W > 1) the function goes
    lane by lane (W operations per token) and ``N`` counts as zeros.

    Two pipeline registers (:class:`~sw_sim.staged.Staged`), operand then result; each stage
    advances when the next one is free or is being emptied this cycle.  Back: a full result register whose output has room emits.
    Middle: the operand moves into the result register as ``f(x)`` (``N`` counts as 0) or the
    control token.  Front: when the input has a token, pop it into the operand register.  In RTL
    the function's datapath sits between the two registers."""

    def __init__(self, name, ins, outs, *, op: AluOp, scalar: float = 0.0, numerics: Numerics = INT32,
                 lanes: int = 1):
        super().__init__(name, ins, outs)
        self.inp = ins["a"]
        self.out = outs["val"]
        self.fn = numerics.unop(op, scalar, where=f"node {name!r} ({op.value})")
        self.lanes = lanes
        self.zero = 0 if lanes == 1 else (0,) * lanes  # what ``N`` counts as
        self.stages: list = [None, None]  # operand, result

    def leave_front(self, v):
        if isinstance(v, Control):
            return v
        if self.lanes == 1:
            self.flops += 1
            return self.fn(v)
        fn = self.fn
        self.flops += self.lanes
        return Vec([fn(x) for x in v])

    def fill(self) -> bool:
        inp = self.inp
        if not inp.q:
            return False
        tok = inp.pop()
        self.stages[0] = self.zero if tok is EMPTY else tok
        return True


class VecUnaryAlu(UnaryAlu):
    """:class:`UnaryAlu` over a vector stream: the name of ``UnaryAlu(lanes=W)``, ``lanes``
    required."""

    def __init__(self, name, ins, outs, *, op: AluOp, lanes: int, scalar: float = 0.0, numerics: Numerics = INT32):
        super().__init__(name, ins, outs, op=op, scalar=scalar, numerics=numerics, lanes=lanes)
