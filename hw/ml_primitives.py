"""RTL ML primitives and the value arithmetic generated from :mod:`fuseflow.numerics`.

The arithmetic helpers (:func:`binop`, :func:`reduce_op`, :func:`unop`) build Amaranth logic
from a :class:`~fuseflow.numerics.Numerics` and the tables of :func:`fuseflow.numerics.tables`,
step for step like the Python reference, so sw_sim and RTL are bit-exact.  The helpers are
combinational; table lookups are asynchronous-read ROMs.  The primitives that use them register
their operands first (see each class for latency and II).

Primitives (each mirrors the cycle model of the same name in ``sw_sim/ml_primitives.py``):
:class:`UnaryAlu`, :class:`CrdMask`, :class:`StknDrop`, :class:`SpAcc2`; plus
:class:`ValRepSig`, the repeat-signal generator on a value stream (sw_sim's ``RepSig`` is
width-agnostic).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import memory

from fuseflow.numerics import (
    EXP_INTERP_BITS,
    EXP_SEG_BITS,
    INT32,
    LOG2E_BITS,
    PWL_FUNCS,
    PWL_GUARD,
    RSQRT_SEG_BITS,
    TABLE_BITS,
    Mode,
    Numerics,
    log2e_fixed,
    tables,
)
from fuseflow.samml import AluOp, MaskPred, ReduceOp
from fuseflow.tokens import CRD_WIDTH

from .base import StreamPrimitive
from .word import (
    data_word,
    done_word,
    is_ctl,
    is_data,
    is_done,
    is_empty,
    is_stop,
    level,
    stop_word,
)

__all__ = ["CrdMask", "SpAcc2", "StknDrop", "UnaryAlu", "ValRepSig", "binop", "reduce_op", "unop"]


# ----------------------------------------------------------------------------- arithmetic
def _hw_mode(num: Numerics) -> None:
    if num.mode is Mode.FLOAT:
        raise ValueError("float numerics are sw_sim only: the RTL needs int or fixed-point (Numerics.fixed)")


def _rhu(v: Value, s: int) -> Value:
    """``v / 2**s`` rounded half up (constant ``s``)."""
    return (v + (1 << (s - 1))) >> s if s > 0 else v


def _sat(v: Value, num: Numerics) -> Value:
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


def _fix(v: Value, num: Numerics) -> Value:
    return _sat(v, num) if num.mode is Mode.FIXED else v[: num.width]


def _add_fix(a: Value, b: Value, num: Numerics, sub: bool = False) -> Value:
    """``_fix(a ± b)``.  For signed ``width``-bit operands the sum has one more bit and is out of
    range exactly when its top two bits differ (its top bit is then its sign), so saturation
    needs no comparators after the adder."""
    w = num.width
    a, b = Value.cast(a), Value.cast(b)
    v = (a - b) if sub else (a + b)
    narrow = all(x.shape().signed and x.shape().width <= w for x in (a, b))
    if num.mode is not Mode.FIXED or not narrow:
        return _fix(v, num)
    hi, lo = Const(num.hi, signed(w)), Const(num.lo, signed(w))
    top, sign = v[w], v[w - 1]
    return Mux(top == sign, v[:w], Mux(top, lo, hi))[:w]


def _mul(a: Value, b: Value, num: Numerics) -> Value:
    if num.mode is Mode.FIXED:
        return _sat(_rhu(a * b, num.frac), num)
    return (a * b)[: num.width]


def _div(a: Value, b: Value, num: Numerics) -> Value:
    if num.mode is Mode.INT:
        q = (a // b)[: num.width]
    else:
        nm = (a << (num.frac + 1)) + b
        dn = b << 1
        neg = b < 0
        q = _sat(Mux(neg, -nm, nm) // Mux(neg, -dn, dn), num)
    lo, hi = Const(num.lo, signed(num.width)), Const(num.hi, signed(num.width))
    return Mux(b == 0, Mux(a == 0, 0, Mux(a > 0, hi, lo)), q)[: num.width]


def binop(num: Numerics, op: AluOp, a: Value, b: Value) -> Value:
    """``num.binop(op)(a, b)`` in logic; ``a``, ``b`` signed ``num.width``-bit values."""
    _hw_mode(num)
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
    return base + _rhu(delta * rem, rem_bits)


def _scaled(m: Module, y: Value, s: Value, num: Numerics) -> Value:
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
        m.d.comb += [left.eq(sc), out.eq(_sat(up, num))]
    with m.Else():
        m.d.comb += [right.eq(-sc), out.eq(_sat(down, num))]
    return out


def _exp(m: Module, num: Numerics, x: Value) -> Value:
    f = num.frac
    fb = f + LOG2E_BITS
    t = Signal(signed(num.width + LOG2E_BITS + 2))
    m.d.comb += t.eq(x * Const(log2e_fixed(), LOG2E_BITS + 1))
    k = t >> fb
    i = t[fb - EXP_SEG_BITS: fb]
    rem = t[fb - EXP_SEG_BITS - EXP_INTERP_BITS: fb - EXP_SEG_BITS]
    y = _lookup(m, num, "exp", i, rem, EXP_INTERP_BITS)
    return _scaled(m, y, k + (f - TABLE_BITS), num)


def _rsqrt(m: Module, num: Numerics, x: Value) -> Value:
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
    res = _scaled(m, y, (f - TABLE_BITS) - half, num)
    return Mux(x <= 0, Const(num.hi, w), res)[:w]


def _pwl(m: Module, num: Numerics, op: AluOp, x: Value) -> Value:
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
    res = _sat(_rhu(y, PWL_GUARD), num)
    if spec.identity_above:
        return Mux(x >= hi, x, res)[: num.width]
    return res


def unop(m: Module, num: Numerics, op: AluOp, x: Value, scalar: float = 0.0, where: str = "ALU") -> Value:
    """``num.unop(op, scalar)(x)`` in logic (tables become ROMs inside ``m``)."""
    _hw_mode(num)
    num.unop(op, scalar, where)  # same checks as the model (unary op, numerics, scalar)
    if op is AluOp.RELU:
        return Mux(x > 0, x, 0)[: num.width]
    if op is AluOp.NEG:
        return _fix(-x, num)
    if op is AluOp.ADD_SCALAR:
        return _fix(x + Const(num.scalar_raw(scalar, where), signed(num.width)), num)
    if op is AluOp.MUL_SCALAR:
        return _mul(x, Const(num.scalar_raw(scalar, where), signed(num.width)), num)
    if op is AluOp.EXP:
        return _exp(m, num, x)
    if op is AluOp.RSQRT:
        return _rsqrt(m, num, x)
    return _pwl(m, num, op, x)


# ----------------------------------------------------------------------------- primitives
class UnaryAlu(StreamPrimitive):
    """Unary ALU over one value stream (see sw_sim.ml_primitives.UnaryAlu).  Latency 2, II 1:
    operand register -> function (tables, multipliers, shifter) -> result register."""

    def __init__(self, *, op: AluOp, scalar: float = 0.0, numerics: Numerics = INT32, depths=None):
        self.op, self.scalar, self.num, self.vw = op, scalar, numerics, numerics.width
        _hw_mode(numerics)
        numerics.unop(op, scalar, f"ALU {op.value}")
        super().__init__({"a": self.vw}, {"val": self.vw}, depths)

    def logic(self, m):
        w = self.vw
        a = self.i_a
        x, res = Signal(w + 1), Signal(w + 1)
        opnd_valid, res_valid = Signal(), Signal()
        emit, res_free, advance, opnd_free = Signal(), Signal(), Signal(), Signal()
        xv = Mux(is_data(x, w), x[:w], 0).as_signed()
        fx = Signal(w)
        m.d.comb += [fx.eq(unop(m, self.num, self.op, xv, self.scalar)),
                     emit.eq(res_valid & self.room()), res_free.eq(~res_valid | emit),
                     advance.eq(opnd_valid & res_free), opnd_free.eq(~opnd_valid | advance),
                     a.ready.eq(opnd_free)]
        with m.If(emit):
            self.push(m, "val", res)
        with m.If(res_free):
            m.d.sync += [res_valid.eq(opnd_valid),
                         res.eq(Mux(is_ctl(x, w) & ~is_empty(x, w), x, data_word(fx, w)))]
        with m.If(opnd_free):
            m.d.sync += [opnd_valid.eq(a.valid), x.eq(a.payload)]


class ValRepSig(StreamPrimitive):
    """Repeat-signal generator reading a value stream (``vw`` wide) and writing a ``cw``-wide
    repsig: the same decisions as :class:`hw.primitives.RepSig` (data / ``N`` -> ``R``, stop ->
    ``S``, ``D`` -> ``D``), with the input word read at the value width."""

    def __init__(self, *, vw: int, cw: int = CRD_WIDTH, depths=None):
        self.vw, self.cw = vw, cw
        super().__init__({"in": vw}, {"repsig": cw}, depths)

    def logic(self, m):
        inp = self.i_in
        tok = inp.payload
        with m.If(inp.valid & self.room()):
            self.pop(m, "in")
            with m.If(is_data(tok, self.vw) | is_empty(tok, self.vw)):
                self.push(m, "repsig", data_word(1, self.cw))
            with m.Elif(is_done(tok, self.vw)):
                self.push(m, "repsig", done_word(self.cw))
            with m.Else():
                self.push(m, "repsig", stop_word(0, self.cw))


class CrdMask(StreamPrimitive):
    """Coordinate mask (see sw_sim.ml_primitives.CrdMask); the block pattern is a ROM of bits."""

    def __init__(self, *, pred: MaskPred, before: int = 0, after: int = 0, block: int = 1,
                 pattern: tuple[tuple[int, ...], ...] = (), cw: int = CRD_WIDTH, depths=None):
        self.pred, self.before, self.after, self.block, self.pattern, self.cw = pred, before, after, block, pattern, cw
        super().__init__({"outer": cw, "inner": cw, "ref": cw}, {"crd": cw, "ref": cw}, depths)

    def _keep(self, m: Module, i: Value, j: Value) -> Value:
        if self.pred is MaskPred.CAUSAL:
            return j <= i
        if self.pred is MaskPred.BAND:
            d = j.as_signed() - i.as_signed()
            return (d >= -self.before) & (d <= self.after)
        sh = self.block.bit_length() - 1
        rows, cols = len(self.pattern), len(self.pattern[0])
        bi, bj = i >> sh, j >> sh
        bits = [int(x) for row in self.pattern for x in row]
        mem = memory.Memory(shape=1, depth=len(bits), init=bits)
        m.submodules.pattern = mem
        rp = mem.read_port(domain="comb")
        m.d.comb += rp.addr.eq(bi * cols + bj)
        return (bi < rows) & (bj < cols) & rp.data

    def logic(self, m):
        w = self.cw
        outer, inner, ref = self.i_outer, self.i_inner, self.i_ref
        cur = Signal(w)
        cur_valid = Signal()
        tok, r, oh = inner.payload, ref.payload, outer.payload
        i = Mux(cur_valid, cur, oh[:w])
        keep = Signal()
        m.d.comb += keep.eq(self._keep(m, i, tok[:w]))

        def take():
            self.pop(m, "inner")
            self.pop(m, "ref")

        with m.If(inner.valid & ref.valid & self.room()):
            with m.If(is_data(tok, w)), m.If(cur_valid | outer.valid):
                with m.If(~cur_valid):
                    self.pop(m, "outer")
                    m.d.sync += [cur.eq(oh[:w]), cur_valid.eq(1)]
                take()
                with m.If(keep):
                    self.push(m, "crd", tok)
                    self.push(m, "ref", r)
            with m.Elif(outer.valid):
                with m.If(is_done(tok, w)):
                    self.pop(m, "outer")
                    take()
                    self.push(m, "crd", done_word(w))
                    self.push(m, "ref", done_word(w))
                with m.Elif(level(tok) == 0):
                    with m.If(~cur_valid):
                        self.pop(m, "outer")
                    m.d.sync += cur_valid.eq(0)
                    take()
                    self.push(m, "crd", tok)
                    self.push(m, "ref", tok)
                with m.Elif(~cur_valid & is_data(oh, w)):
                    self.pop(m, "outer")
                with m.Else():
                    self.pop(m, "outer")
                    m.d.sync += cur_valid.eq(0)
                    take()
                    self.push(m, "crd", tok)
                    self.push(m, "ref", tok)


class StknDrop(StreamPrimitive):
    """Stop-token drop (see sw_sim.ml_primitives.StknDrop): one held token, II 1."""

    def __init__(self, *, width: int = CRD_WIDTH, depths=None):
        self.w = width
        super().__init__({"in": width}, {"out": width}, depths)

    def logic(self, m):
        w = self.w
        inp = self.i_in
        tok = inp.payload
        held = Signal(w + 1)
        held_valid = Signal()
        lead = Signal(init=1)
        held_stop = held_valid & is_stop(held, w)
        with m.If(inp.valid & self.room()):
            with m.If(is_done(tok, w)):
                with m.If(held_valid):
                    self.push(m, "out", held)
                    m.d.sync += held_valid.eq(0)
                with m.Else():
                    self.push(m, "out", done_word(w))
                    self.pop(m, "in")
            with m.Elif(is_stop(tok, w)):
                self.pop(m, "in")
                with m.If(held_stop), m.If(level(tok) > level(held)):
                    m.d.sync += held.eq(stop_word(level(tok), w))
                with m.Else():
                    with m.If(held_valid):
                        self.push(m, "out", held)
                    m.d.sync += [held.eq(tok), held_valid.eq(1)]
            with m.Else():
                self.pop(m, "in")
                with m.If(held_valid & ~lead):
                    self.push(m, "out", held)
                m.d.sync += [held.eq(tok), held_valid.eq(1), lead.eq(0)]


class SpAcc2(StreamPrimitive):
    """Sparse accumulator, order 2 (see sw_sim.ml_primitives.SpAcc2): an accumulator memory of
    ``dim0 * dim1`` entries (address ``i * dim1 + j``) with a valid bit each; the flush walks
    the valid bits in address order with a priority encoder."""

    def __init__(self, *, dim0: int, dim1: int, op: ReduceOp = ReduceOp.ADD, cw: int = CRD_WIDTH,
                 numerics: Numerics = INT32, depths=None):
        self.dim0, self.dim1, self.op, self.cw, self.num = dim0, dim1, op, cw, numerics
        self.vw = numerics.width
        super().__init__({"outer": cw, "inner0": cw, "inner1": cw, "val": self.vw},
                         {"crd0": cw, "crd1": cw, "val": self.vw}, depths)

    def logic(self, m):
        cw, vw, d1 = self.cw, self.vw, self.dim1
        size = self.dim0 * d1
        outer, ii, ij, val = self.i_outer, self.i_inner0, self.i_inner1, self.i_val
        acc = memory.Memory(shape=vw, depth=size, init=[])
        m.submodules.acc = acc
        wp = acc.write_port()
        rp = acc.read_port(domain="comb")
        valid = Signal(size)
        flushing, group_open = Signal(), Signal()
        cur_i, last_i = Signal(cw), Signal(cw)
        cur_valid = Signal()
        first = Signal(range(max(size, 2)))
        for b in reversed(range(size)):
            with m.If(valid[b]):
                m.d.comb += first.eq(b)
        fi, fj = Signal(cw), Signal(cw)
        m.d.comb += [fi.eq(first // d1), fj.eq(first % d1)]
        tok, vtok, ih, oh = ij.payload, val.payload, ii.payload, outer.payload
        i = Mux(cur_valid, cur_i, ih[:cw])
        addr = Signal(range(max(size, 2)))
        m.d.comb += addr.eq(i * d1 + tok[:cw])
        v = Mux(is_data(vtok, vw), vtok[:vw], 0).as_signed()
        hit = valid.bit_select(addr, 1)
        summed = reduce_op(self.num, self.op, rp.data.as_signed(), v)
        m.d.comb += [rp.addr.eq(Mux(flushing, first, addr)), wp.addr.eq(addr),
                     wp.data.eq(Mux(hit, summed, v[:vw]))]

        def pop_all():
            for n in ("outer", "inner0", "inner1", "val"):
                self.pop(m, n)

        with m.If(self.room()):
            with m.If(flushing):
                with m.If(valid.any()):
                    with m.If(group_open & (fi != last_i)):
                        self.push(m, "crd1", stop_word(0, cw))
                        self.push(m, "val", stop_word(0, vw))
                        m.d.sync += group_open.eq(0)
                    with m.Else():
                        with m.If(~group_open):
                            self.push(m, "crd0", data_word(fi, cw))
                            m.d.sync += [group_open.eq(1), last_i.eq(fi)]
                        self.push(m, "crd1", data_word(fj, cw))
                        self.push(m, "val", data_word(rp.data, vw))
                        m.d.sync += valid.bit_select(first, 1).eq(0)
                with m.Else():
                    pop_all()
                    self.push(m, "crd0", oh)
                    self.push(m, "crd1", stop_word(level(oh) + 1, cw))
                    self.push(m, "val", stop_word(level(oh) + 1, vw))
                    m.d.sync += [flushing.eq(0), group_open.eq(0)]
            with m.Elif(ij.valid & val.valid):
                with m.If(is_data(tok, cw)), m.If(cur_valid | ii.valid):
                    with m.If(~cur_valid):
                        self.pop(m, "inner0")
                        m.d.sync += [cur_i.eq(ih[:cw]), cur_valid.eq(1)]
                    m.d.comb += wp.en.eq(1)
                    m.d.sync += valid.bit_select(addr, 1).eq(1)
                    self.pop(m, "inner1")
                    self.pop(m, "val")
                with m.Elif(ii.valid):
                    with m.If(is_done(tok, cw)), m.If(outer.valid):
                        pop_all()
                        self.push(m, "crd0", done_word(cw))
                        self.push(m, "crd1", done_word(cw))
                        self.push(m, "val", done_word(vw))
                    with m.Elif(~cur_valid & is_data(ih, cw)):
                        self.pop(m, "inner0")
                        with m.If(level(tok) == 0):
                            self.pop(m, "inner1")
                            self.pop(m, "val")
                    with m.Elif(level(tok) == 0):
                        m.d.sync += cur_valid.eq(0)
                        self.pop(m, "inner1")
                        self.pop(m, "val")
                    with m.Elif(outer.valid):
                        m.d.sync += cur_valid.eq(0)
                        with m.If(level(tok) == 1):
                            pop_all()
                        with m.Elif(is_data(oh, cw)):
                            self.pop(m, "outer")
                        with m.Else():
                            m.d.sync += flushing.eq(1)
