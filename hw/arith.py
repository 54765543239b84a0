"""Value arithmetic generated from :mod:`fuseflow.ir.numerics`: binary ops and reductions.

The helpers build combinational Amaranth logic from a :class:`~fuseflow.ir.numerics.Numerics`,
step for step like the Python reference, so sw_sim and RTL are bit-exact.  The primitives that
use them register their operands first (see each class for latency and II).

**Overflow flags.**  Every helper takes an optional ``flags`` list; when given, it appends the
1-bit conditions under which its result was brought into range — an integer result wrapped to
the width, a fixed-point result saturated — exactly where :class:`sw_sim.overflow.CountingNumerics`
counts one (``Numerics.fix`` / ``Numerics.sat`` changed the exact value; a division by zero or
``rsqrt`` of a value ``<= 0`` returns its bound without counting).  A primitive whose operation
can overflow (:func:`can_overflow`) has a 1-bit output ``overflow`` (:func:`overflow_member`),
driven by a sticky register that :func:`sticky_overflow` sets the cycle after a data result
(``N`` counts as 0, as in sw_sim) is produced with one of its flags high; the graph top's start
clears it with every other register (``hw.elaborate``, the status registers of the host port)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib.wiring import Out

from fuseflow.ir.numerics import (
    Mode,
    Numerics,
)
from fuseflow.ir.samml import AluOp, ReduceOp

Flags = list  # 1-bit Values: a result was brought into range (see the module docstring)

# the operations that never bring a result into range (sw_sim counts none): exact ones
_EXACT_OPS = frozenset({AluOp.MAX, AluOp.MIN, AluOp.RELU})


def can_overflow(op: AluOp | ReduceOp) -> bool:
    """Whether an ALU / reduce / accumulator operation may wrap or saturate a result (add, sub,
    mul, div, neg, the scalar ops and the table functions; not max, min or relu)."""
    if isinstance(op, ReduceOp):
        return op is ReduceOp.ADD
    return op not in _EXACT_OPS


def overflow_member(op: AluOp | ReduceOp) -> dict:
    """The ``overflow`` output of a primitive doing ``op`` (none when it cannot overflow, so
    graphs without such nodes keep their Verilog)."""
    return {"overflow": Out(1)} if can_overflow(op) else {}


def sticky_overflow(m: Module, prim, when: Value, flags: Flags) -> None:
    """Drive ``prim.overflow`` (if it has one) from a sticky register, set one cycle after a
    cycle where a data result is produced (``when``) with any of ``flags`` high (the event is
    registered first, so the sticky bit's logic is not behind the arithmetic's carry chains);
    reset (the graph's start) clears both."""
    if not hasattr(prim, "overflow"):
        return
    bit = Signal(name="overflow_sticky")
    m.d.comb += prim.overflow.eq(bit)
    if flags:
        event = Signal(name="overflow_event")
        m.d.sync += event.eq(when & Cat(*flags).any())
        with m.If(event):
            m.d.sync += bit.eq(1)


def out_of_range(v: Value, num: Numerics) -> Value:
    """1 when the exact value ``v`` lies outside ``num``'s range (a signed ``v`` wider than the
    word: its bits from ``width - 1`` up are not all equal)."""
    w = num.width
    v = Value.cast(v)
    if v.shape().signed:
        if len(v) <= w:
            return Const(0, 1)
        top = v[w - 1:]
        return ~(top.all() | ~top.any())
    return v > num.hi if len(v) >= w else Const(0, 1)


# ----------------------------------------------------------------------------- arithmetic
def hw_mode(num: Numerics) -> None:
    if num.mode is Mode.FLOAT:
        raise ValueError("float numerics are sw_sim only: the RTL needs int or fixed-point (Numerics.fixed)")



def rhu(v: Value, s: int) -> Value:
    """``v / 2**s`` rounded half up (constant ``s``)."""
    return (v + (1 << (s - 1))) >> s if s > 0 else v



def sat(v: Value, num: Numerics, flags: Flags | None = None) -> Value:
    """``v`` saturated to ``num.width`` signed bits.  A signed ``v`` is in range exactly when
    its bits from ``width - 1`` up are all equal (no comparator carry chains); its sign then
    picks the bound."""
    w = num.width
    v = Value.cast(v)
    if flags is not None:
        flags.append(out_of_range(v, num))
    lo, hi = Const(num.lo, signed(w)), Const(num.hi, signed(w))
    if v.shape().signed and len(v) > w:
        top = v[w - 1:]
        return Mux(top.all() | ~top.any(), v[:w], Mux(v[-1], lo, hi))[:w]
    return Mux(v > hi, hi, Mux(v < lo, lo, v))[:w]



def fix(v: Value, num: Numerics, flags: Flags | None = None) -> Value:
    """``v`` brought into range: saturated (fixed point) or wrapped (integer)."""
    if num.mode is Mode.FIXED:
        return sat(v, num, flags)
    if flags is not None:
        flags.append(out_of_range(v, num))
    return Value.cast(v)[: num.width]



def _add_fix(a: Value, b: Value, num: Numerics, sub: bool = False, flags: Flags | None = None) -> Value:
    """``fix(a ± b)``.  For signed ``width``-bit operands the sum has one more bit and is out of
    range exactly when its top two bits differ (its top bit is then its sign), so saturation
    needs no comparators after the adder."""
    w = num.width
    a, b = Value.cast(a), Value.cast(b)
    v = (a - b) if sub else (a + b)
    narrow = all(x.shape().signed and x.shape().width <= w for x in (a, b))
    if flags is not None and all(x.shape() == signed(w) for x in (a, b)):
        # out of range = the operands' signs agree (add) or differ (sub) and the w-bit sum's
        # sign differs from a's: the same carry chain as the result's sign bit, no more
        sa, sb, sv = a[w - 1], b[w - 1], v[w - 1]
        flags.append(((sa != sb) if sub else (sa == sb)) & (sv != sa))
        flags = None
    if num.mode is not Mode.FIXED or not narrow:
        return fix(v, num, flags)
    hi, lo = Const(num.hi, signed(w)), Const(num.lo, signed(w))
    top, sign = v[w], v[w - 1]
    if flags is not None:
        flags.append(top != sign)
    return Mux(top == sign, v[:w], Mux(top, lo, hi))[:w]



def _mul(a: Value, b: Value, num: Numerics, flags: Flags | None = None) -> Value:
    if num.mode is Mode.FIXED:
        return sat(rhu(a * b, num.frac), num, flags)
    return fix(a * b, num, flags)



def _div(a: Value, b: Value, num: Numerics, flags: Flags | None = None) -> Value:
    sub: Flags = []
    if num.mode is Mode.INT:
        q = fix(a // b, num, sub)  # only lo // -1 leaves the range
    else:
        nm = (a << (num.frac + 1)) + b
        dn = b << 1
        neg = b < 0
        q = sat(Mux(neg, -nm, nm) // Mux(neg, -dn, dn), num, sub)
    if flags is not None:  # a division by zero returns its bound: nothing brought into range
        flags.append(sub[0] & (b != 0))
    lo, hi = Const(num.lo, signed(num.width)), Const(num.hi, signed(num.width))
    return Mux(b == 0, Mux(a == 0, 0, Mux(a > 0, hi, lo)), q)[: num.width]



def binop(num: Numerics, op: AluOp, a: Value, b: Value, flags: Flags | None = None) -> Value:
    """``num.binop(op)(a, b)`` in logic; ``a``, ``b`` signed ``num.width``-bit values;
    ``flags`` collects the overflow conditions (module docstring)."""
    hw_mode(num)
    if op is AluOp.ADD:
        return _add_fix(a, b, num, flags=flags)
    if op is AluOp.SUB:
        return _add_fix(a, b, num, sub=True, flags=flags)
    if op is AluOp.MUL:
        return _mul(a, b, num, flags)
    if op is AluOp.DIV:
        return _div(a, b, num, flags)
    if op is AluOp.MAX:
        return Mux(a > b, a, b)[: num.width]
    if op is AluOp.MIN:
        return Mux(a < b, a, b)[: num.width]
    raise ValueError(f"ALU op {op.value!r} is not binary")



def reduce_op(num: Numerics, op: ReduceOp, acc: Value, v: Value, flags: Flags | None = None) -> Value:
    """``num.reduce_fn(op)(acc, v)`` in logic."""
    return binop(num, AluOp.ADD if op is ReduceOp.ADD else AluOp.MAX, acc, v, flags)

