"""Cycle model of the unary ALU (relu, neg, scalar ops, exp, rsqrt, sigmoid, gelu)."""

from __future__ import annotations

from typing import Any

from fuseflow.ir.numerics import INT32, Numerics
from fuseflow.ir.samml import (
    AluOp,
)
from fuseflow.ir.tokens import DONE, EMPTY, Control, Vec

from .engine import Primitive


class UnaryAlu(Primitive):
    """Unary ALU (relu, neg, add/mul by ``scalar``, exp, rsqrt, sigmoid, gelu); latency 2, II 1,
    pipelined like the binary ALU.  Over a vector stream (``lanes`` W > 1) the function goes
    lane by lane (W operations per token) and ``N`` counts as zeros.

    Two pipeline registers, operand then result; each stage advances when the next one is free
    or is being emptied this cycle.  Back: a full result register whose output has room emits.
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
            if isinstance(x, Control):
                self.res = x
            elif self.lanes == 1:
                self.res = self.fn(x)
                self.flops += 1
            else:
                fn = self.fn
                self.res = Vec([fn(v) for v in x])
                self.flops += self.lanes
            self.opnd = None
            progressed = True
        inp = self.inp
        if self.opnd is None and inp.q:
            tok = inp.pop()
            self.opnd = self.zero if tok is EMPTY else tok
            progressed = True
        return progressed


class VecUnaryAlu(UnaryAlu):
    """:class:`UnaryAlu` over a vector stream: the name of ``UnaryAlu(lanes=W)``, ``lanes``
    required."""

    def __init__(self, name, ins, outs, *, op: AluOp, lanes: int, scalar: float = 0.0, numerics: Numerics = INT32):
        super().__init__(name, ins, outs, op=op, scalar=scalar, numerics=numerics, lanes=lanes)
