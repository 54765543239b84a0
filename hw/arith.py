"""Value arithmetic generated from :mod:`fuseflow.numerics`: binary ops and reductions.

The helpers build combinational Amaranth logic from a :class:`~fuseflow.numerics.Numerics`,
step for step like the Python reference, so sw_sim and RTL are bit-exact.  The primitives that
use them register their operands first (see each class for latency and II)."""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Value, signed

from fuseflow.numerics import (
    Mode,
    Numerics,
)
from fuseflow.samml import AluOp, ReduceOp


# ----------------------------------------------------------------------------- arithmetic
def hw_mode(num: Numerics) -> None:
    if num.mode is Mode.FLOAT:
        raise ValueError("float numerics are sw_sim only: the RTL needs int or fixed-point (Numerics.fixed)")



def rhu(v: Value, s: int) -> Value:
    """``v / 2**s`` rounded half up (constant ``s``)."""
    return (v + (1 << (s - 1))) >> s if s > 0 else v



def sat(v: Value, num: Numerics) -> Value:
    """``v`` saturated to ``num.width`` signed bits.  A signed ``v`` is in range exactly when
    its bits from ``width - 1`` up are all equal (no comparator carry chains); its sign then
    picks the bound."""
    w = num.width
    v = Value.cast(v)
    lo, hi = Const(num.lo, signed(w)), Const(num.hi, signed(w))
    if v.shape().signed and len(v) > w:
        top = v[w - 1:]
        return Mux(top.all() | ~top.any(), v[:w], Mux(v[-1], lo, hi))[:w]
    return Mux(v > hi, hi, Mux(v < lo, lo, v))[:w]



def fix(v: Value, num: Numerics) -> Value:
    return sat(v, num) if num.mode is Mode.FIXED else v[: num.width]



def _add_fix(a: Value, b: Value, num: Numerics, sub: bool = False) -> Value:
    """``fix(a ± b)``.  For signed ``width``-bit operands the sum has one more bit and is out of
    range exactly when its top two bits differ (its top bit is then its sign), so saturation
    needs no comparators after the adder."""
    w = num.width
    a, b = Value.cast(a), Value.cast(b)
    v = (a - b) if sub else (a + b)
    narrow = all(x.shape().signed and x.shape().width <= w for x in (a, b))
    if num.mode is not Mode.FIXED or not narrow:
        return fix(v, num)
    hi, lo = Const(num.hi, signed(w)), Const(num.lo, signed(w))
    top, sign = v[w], v[w - 1]
    return Mux(top == sign, v[:w], Mux(top, lo, hi))[:w]



def _mul(a: Value, b: Value, num: Numerics) -> Value:
    if num.mode is Mode.FIXED:
        return sat(rhu(a * b, num.frac), num)
    return (a * b)[: num.width]



def _div(a: Value, b: Value, num: Numerics) -> Value:
    if num.mode is Mode.INT:
        q = (a // b)[: num.width]
    else:
        nm = (a << (num.frac + 1)) + b
        dn = b << 1
        neg = b < 0
        q = sat(Mux(neg, -nm, nm) // Mux(neg, -dn, dn), num)
    lo, hi = Const(num.lo, signed(num.width)), Const(num.hi, signed(num.width))
    return Mux(b == 0, Mux(a == 0, 0, Mux(a > 0, hi, lo)), q)[: num.width]



def binop(num: Numerics, op: AluOp, a: Value, b: Value) -> Value:
    """``num.binop(op)(a, b)`` in logic; ``a``, ``b`` signed ``num.width``-bit values."""
    hw_mode(num)
    if op is AluOp.ADD:
        return _add_fix(a, b, num)
    if op is AluOp.SUB:
        return _add_fix(a, b, num, sub=True)
    if op is AluOp.MUL:
        return _mul(a, b, num)
    if op is AluOp.DIV:
        return _div(a, b, num)
    if op is AluOp.MAX:
        return Mux(a > b, a, b)[: num.width]
    if op is AluOp.MIN:
        return Mux(a < b, a, b)[: num.width]
    raise ValueError(f"ALU op {op.value!r} is not binary")



def reduce_op(num: Numerics, op: ReduceOp, acc: Value, v: Value) -> Value:
    """``num.reduce_fn(op)(acc, v)`` in logic."""
    return binop(num, AluOp.ADD if op is ReduceOp.ADD else AluOp.MAX, acc, v)

