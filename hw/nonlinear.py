"""The unary ALU and its nonlinear functions (exp, rsqrt, sigmoid, gelu) from the tables of
:func:`fuseflow.ir.numerics.tables`; table lookups are asynchronous-read ROMs."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import memory

from fuseflow.ir.numerics import (
    EXP_INTERP_BITS,
    EXP_SEG_BITS,
    INT32,
    LOG2E_BITS,
    PWL_FUNCS,
    PWL_GUARD,
    RSQRT_SEG_BITS,
    TABLE_BITS,
    Numerics,
    log2e_fixed,
    tables,
)
from fuseflow.ir.samml import AluOp

from .arith import (
    Flags,
    _mul,
    fix,
    hw_mode,
    out_of_range,
    overflow_member,
    rhu,
    sat,
    sticky_overflow,
)
from .base import StreamPrimitive
from .word import (
    data_word,
    is_ctl,
    is_data,
    is_empty,
)


def _rom(m: Module, name: str, values: tuple[int, ...], bits: int, addr: Value) -> Value:
    mem = memory.Memory(shape=signed(bits), depth=len(values), init=list(values))
    m.submodules[name] = mem
    rp = mem.read_port(domain="comb")
    m.d.comb += rp.addr.eq(addr)
    return rp.data



def _lookup(m: Module, num: Numerics, name: str, i: Value, rem: Value, rem_bits: int) -> Value:
    """``base[i] + rhu(delta[i] * rem, rem_bits)`` from the shared table ``name``."""
    tab = tables(num)[name]
    bits = tab.bits()
    base = _rom(m, f"{name}_base", tab.base, bits, i)
    delta = _rom(m, f"{name}_delta", tab.delta, bits, i)
    return base + rhu(delta * rem, rem_bits)



def _scaled(m: Module, y: Value, s: Value, num: Numerics, flags: Flags | None = None) -> Value:
    """``num.scale(y, s)``: ``y * 2**s`` rounded half up and saturated, ``s`` clamped first."""
    w = num.width
    lo_s = -(TABLE_BITS + 2)
    sc = Signal(signed(max(len(s), (w + 1).bit_length()) + 1))
    m.d.comb += sc.eq(Mux(s > w, w, Mux(s < lo_s, lo_s, s)))
    yu = Signal(TABLE_BITS + 1)
    left = Signal(range(w + 1))
    right = Signal(range(TABLE_BITS + 3))
    out = Signal(w)
    m.d.comb += yu.eq(y)
    up = Cat(yu << left, Const(0, 1)).as_signed()
    down = Cat((yu + ((Const(1, 1) << right) >> 1)) >> right, Const(0, 1)).as_signed()
    with m.If(sc >= 0):
        m.d.comb += [left.eq(sc), out.eq(sat(up, num))]
    with m.Else():
        m.d.comb += [right.eq(-sc), out.eq(sat(down, num))]
    if flags is not None:
        flags.append(Mux(sc >= 0, out_of_range(up, num), out_of_range(down, num)))
    return out



def _exp(m: Module, num: Numerics, x: Value, flags: Flags | None = None) -> Value:
    f = num.frac
    fb = f + LOG2E_BITS
    t = Signal(signed(num.width + LOG2E_BITS + 2))
    m.d.comb += t.eq(x * Const(log2e_fixed(), LOG2E_BITS + 1))
    k = t >> fb
    i = t[fb - EXP_SEG_BITS: fb]
    rem = t[fb - EXP_SEG_BITS - EXP_INTERP_BITS: fb - EXP_SEG_BITS]
    y = _lookup(m, num, "exp", i, rem, EXP_INTERP_BITS)
    return _scaled(m, y, k + (f - TABLE_BITS), num, flags)



def _rsqrt(m: Module, num: Numerics, x: Value, flags: Flags | None = None) -> Value:
    w, f = num.width, num.frac
    p = Signal(range(w))
    for b in range(w - 1):
        with m.If(x[b]):
            m.d.comb += p.eq(b)
    a = Signal(w - 1)
    lshift = Signal(range(w))
    m.d.comb += [lshift.eq(w - 2 - p), a.eq(x.as_unsigned() << lshift)]
    e = Signal(signed(len(p) + 2))
    m.d.comb += e.eq(p - f)
    odd = e[0]
    rb = w - 2 - RSQRT_SEG_BITS
    i = Cat(a[rb: rb + RSQRT_SEG_BITS], odd)
    y = _lookup(m, num, "rsqrt", i, a[:rb], rb)
    half = (e - odd) >> 1
    sub: Flags = []
    res = _scaled(m, y, (f - TABLE_BITS) - half, num, sub)
    if flags is not None:  # x <= 0 gives the largest value: nothing brought into range
        flags.append(sub[0] & (x > 0))
    return Mux(x <= 0, Const(num.hi, w), res)[:w]



def _pwl(m: Module, num: Numerics, op: AluOp, x: Value, flags: Flags | None = None) -> Value:
    spec = PWL_FUNCS[op]
    lo, hi = spec.lo << num.frac, spec.hi << num.frac
    xc = Mux(x < lo, lo, Mux(x >= hi, hi - 1, x))
    off = Signal(range(hi - lo))
    m.d.comb += off.eq(xc - lo)
    sh = num.pwl_shift(spec)
    if sh >= 0:
        i, rem, rb = off >> sh, off[:sh] if sh else Const(0, 1), sh
    else:
        i, rem, rb = off << -sh, Const(0, 1), 0
    y = _lookup(m, num, spec.name, i[: spec.seg_bits], rem, rb)
    sub: Flags = []
    res = sat(rhu(y, PWL_GUARD), num, sub)
    if flags is not None:  # the identity above the table brings nothing into range
        flags.append(sub[0] & ~(x >= hi) if spec.identity_above else sub[0])
    if spec.identity_above:
        return Mux(x >= hi, x, res)[: num.width]
    return res



def unop(m: Module, num: Numerics, op: AluOp, x: Value, scalar: float = 0.0, where: str = "ALU",
         flags: Flags | None = None) -> Value:
    """``num.unop(op, scalar)(x)`` in logic (tables become ROMs inside ``m``); ``flags``
    collects the overflow conditions (:mod:`hw.arith`)."""
    hw_mode(num)
    num.unop(op, scalar, where)  # same checks as the model (unary op, numerics, scalar)
    if op is AluOp.RELU:
        return Mux(x > 0, x, 0)[: num.width]
    if op is AluOp.NEG:
        return fix(-x, num, flags)
    if op is AluOp.ADD_SCALAR:
        return fix(x + Const(num.scalar_raw(scalar, where), signed(num.width)), num, flags)
    if op is AluOp.MUL_SCALAR:
        return _mul(x, Const(num.scalar_raw(scalar, where), signed(num.width)), num, flags)
    if op is AluOp.EXP:
        return _exp(m, num, x, flags)
    if op is AluOp.RSQRT:
        return _rsqrt(m, num, x, flags)
    return _pwl(m, num, op, x, flags)



# ----------------------------------------------------------------------------- primitives
class UnaryAlu(StreamPrimitive):
    """Unary ALU over one value stream (see sw_sim.nonlinear.UnaryAlu), lane by lane over
    vectors (``lanes`` W > 1, sw_sim's ``VecUnaryAlu``).  Latency 2, II 1: operand register ->
    function (tables, multipliers, shifter; one datapath with its own tables per lane) ->
    result register."""

    def __init__(self, *, op: AluOp, scalar: float = 0.0, numerics: Numerics = INT32, depths=None,
                 lanes: int = 1):
        self.op, self.scalar, self.num, self.vw, self.lanes = op, scalar, numerics, numerics.width, lanes
        hw_mode(numerics)
        numerics.unop(op, scalar, f"ALU {op.value}")
        super().__init__({"a": self.vw * lanes}, {"val": self.vw * lanes}, depths, overflow_member(op))

    def logic(self, m):
        w, lanes = self.vw, self.lanes
        wo = w * lanes
        a = self.i_a
        x, res = Signal(wo + 1, name="x"), Signal(wo + 1, name="res")
        opnd_valid, res_valid = Signal(), Signal()
        emit, res_free, advance, opnd_free = Signal(), Signal(), Signal(), Signal()
        fx = Signal(wo)
        flags: Flags = []  # any lane's result brought into range
        m.d.comb += [fx.eq(Cat(*[self._lane(m, x, k, flags) for k in range(lanes)])),
                     emit.eq(res_valid & self.room()), res_free.eq(~res_valid | emit),
                     advance.eq(opnd_valid & res_free), opnd_free.eq(~opnd_valid | advance),
                     a.ready.eq(opnd_free)]
        with m.If(emit):
            self.push(m, "val", res)
        x_ctl = is_ctl(x, wo) & ~is_empty(x, wo)
        with m.If(res_free):
            m.d.sync += [res_valid.eq(opnd_valid), res.eq(Mux(x_ctl, x, data_word(fx, wo)))]
        sticky_overflow(m, self, res_free & opnd_valid & ~x_ctl, flags)
        with m.If(opnd_free):
            m.d.sync += [opnd_valid.eq(a.valid), x.eq(a.payload)]

    def _lane(self, m, x, k: int, flags: Flags) -> Value:
        """The function of lane ``k`` of the operand register ``x`` (``N``: 0); a vector's lanes
        each in a submodule of their own (their own tables)."""
        w, wo = self.vw, self.vw * self.lanes
        if self.lanes > 1:
            lane = Module()
            m.submodules[f"lane{k}"] = lane
            m = lane
        xv = Mux(is_data(x, wo), x[k * w:(k + 1) * w], 0).as_signed()
        return unop(m, self.num, self.op, xv, self.scalar, flags=flags)[:w]


class VecUnaryAlu(UnaryAlu):
    """:class:`UnaryAlu` over vectors: the name of ``UnaryAlu(lanes=W)``, ``lanes`` required."""

    def __init__(self, *, op: AluOp, lanes: int, scalar: float = 0.0, numerics: Numerics = INT32, depths=None):
        super().__init__(op=op, scalar=scalar, numerics=numerics, depths=depths, lanes=lanes)
