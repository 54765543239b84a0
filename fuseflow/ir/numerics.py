"""Value numerics: integer, signed fixed point ``Qm.n`` and float — the rules, written once.

A :class:`Numerics` is a graph-level setting.  It reaches every primitive through
``sw_sim.run_graph(..., numerics=)`` / ``build_primitive(..., numerics=)`` and
``hw.HwConfig(numerics=)`` (see ``docs/numerics.md``).  Value tokens always carry plain Python
numbers: in ``int`` and ``fixed`` mode the *raw* two's-complement integer of the hardware word
(a fixed-point value ``v`` travels as ``round(v * 2**frac)``), in ``float`` mode a Python float
(sw_sim only).

Rules (every arithmetic function below is the reference the RTL generator in
``hw/ml_primitives.py`` mirrors bit for bit):

* **int** (``width`` bits): add / sub / mul / neg / scalar ops wrap (two's complement); div is
  floor division; max / min exact.
* **fixed** (``Qm.n``: ``m`` integer bits including the sign, ``n`` fraction bits,
  ``width = m + n``): every rounding is *round half up* — add half an LSB, then arithmetic shift
  right (floor) — and every result *saturates* to ``[-2**(width-1), 2**(width-1) - 1]``.
  ``mul``: ``sat(rhu(a*b, n))``; ``div``: ``sat(floor((a*2**(n+1) + b) / (2*b)))`` (signs folded
  so the divisor is positive), which is the quotient rounded half up.
* division by zero (int and fixed): ``0/0 = 0``, otherwise the saturation bound of the dividend's
  sign.  ``rsqrt`` of a value ``<= 0`` is the largest value.
* **float**: Python float arithmetic, exact ``math`` functions (exploration only; no RTL).

Nonlinear functions (fixed mode) use tables generated once here (:func:`tables`) and read by
both simulators: ``exp`` by range reduction ``2**k * 2**r`` with a 64-segment linear
interpolation of ``2**r``; ``rsqrt`` by normalising to ``m * 4**e`` with ``m`` in ``[1, 4)`` and
a 128-segment interpolation; ``sigmoid`` and ``gelu`` by 1024-segment uniform piecewise-linear
tables over ``[-16, 16)`` and ``[-8, 8)`` (sigmoid clamps outside, gelu is the identity above
8 and clamps below -8).
"""

from __future__ import annotations

import enum
import itertools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from .samml import UNARY_ALU_OPS, AluOp, ReduceOp

__all__ = [
    "DEFAULT_FIXED",
    "EXP_INTERP_BITS",
    "EXP_SEG_BITS",
    "FLOAT",
    "INT32",
    "LOG2E_BITS",
    "PWL_FUNCS",
    "PWL_GUARD",
    "RSQRT_SEG_BITS",
    "TABLE_BITS",
    "TABLE_OPS",
    "UNARY_OPS",
    "Mode",
    "Numerics",
    "Pwl",
    "Table",
    "log2e_fixed",
    "rshift_round",
    "tables",
]

TABLE_BITS = 30  # fraction bits of the exp / rsqrt mantissa tables (values in [0.5, 2))
LOG2E_BITS = 30  # fraction bits of the log2(e) constant of exp's range reduction
EXP_SEG_BITS = 6  # 2**6 segments of 2**r on [0, 1)
EXP_INTERP_BITS = 16  # bits of the interpolation weight inside an exp segment
RSQRT_SEG_BITS = 6  # 2**6 segments per octave of the rsqrt mantissa, two octaves
PWL_GUARD = 8  # extra fraction bits of the sigmoid / gelu tables, rounded off at the end

UNARY_OPS = UNARY_ALU_OPS
TABLE_OPS: frozenset[AluOp] = frozenset({AluOp.EXP, AluOp.RSQRT, AluOp.SIGMOID, AluOp.GELU})


class Mode(str, enum.Enum):
    INT = "int"
    FIXED = "fixed"
    FLOAT = "float"


def rshift_round(v: int, s: int) -> int:
    """``v / 2**s`` rounded half up (``s >= 0``): add half an LSB, then floor."""
    return (v + (1 << (s - 1))) >> s if s > 0 else v


@dataclass(frozen=True)
class Pwl:
    """A uniform piecewise-linear approximation over ``[lo, hi)`` with ``2**seg_bits`` segments.

    Below ``lo`` the input clamps to ``lo``; at or above ``hi`` it clamps to the last point
    (``identity_above=False``) or the function returns its input (``True``)."""

    name: str
    fn: Callable[[float], float]
    lo: int
    hi: int
    seg_bits: int
    identity_above: bool


def _gelu(x: float) -> float:
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)  # no overflow for a large negative x (float: 0 below about -745, as in PyTorch)
    return e / (1.0 + e)


def _exp(x: float) -> float:
    """``exp``, infinite where a float overflows (as in PyTorch and numpy), not an error."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


PWL_FUNCS: dict[AluOp, Pwl] = {
    AluOp.SIGMOID: Pwl("sigmoid", _sigmoid, -16, 16, 10, False),
    AluOp.GELU: Pwl("gelu", _gelu, -8, 8, 10, True),
}

EXACT: dict[AluOp, Callable[[float], float]] = {
    AluOp.EXP: _exp,
    AluOp.RSQRT: lambda x: 1.0 / math.sqrt(x) if x > 0 else math.inf,
    AluOp.SIGMOID: _sigmoid,
    AluOp.GELU: _gelu,
}


@dataclass(frozen=True)
class Table:
    """Segment start values ``base[i]`` and slopes ``delta[i] = f(i+1) - f(i)`` (raw integers)."""

    base: tuple[int, ...]
    delta: tuple[int, ...]

    @classmethod
    def from_points(cls, pts: list[int]) -> Table:
        return cls(tuple(pts[:-1]), tuple(b - a for a, b in itertools.pairwise(pts)))

    def bits(self) -> int:
        """Signed width that holds every entry."""
        m = max(max(abs(v) for v in self.base), max(abs(v) for v in self.delta), 1)
        return m.bit_length() + 1


@dataclass(frozen=True)
class Numerics:
    """How value tokens are computed: ``Numerics.integer(32)``, ``Numerics.fixed(16, 16)``, ``FLOAT``."""

    mode: Mode = Mode.INT
    width: int = 32
    frac: int = 0

    def __post_init__(self) -> None:
        if self.mode is Mode.FLOAT:
            return
        if not 11 <= self.width <= 64:
            raise ValueError(f"numerics {self}: width {self.width} must be 11..64 (control words use bits 9..8)")
        if self.mode is Mode.INT and self.frac:
            raise ValueError(f"integer numerics have no fraction bits (got frac={self.frac}); use Numerics.fixed")
        if self.mode is Mode.FIXED and not 1 <= self.frac <= self.width - 2:
            raise ValueError(f"fixed point Q{self.width - self.frac}.{self.frac}: need 1..{self.width - 2} "
                             "fraction bits and at least 2 integer bits (sign included)")

    # ------------------------------------------------------------------ construction / text
    @classmethod
    def integer(cls, width: int = 32) -> Numerics:
        return cls(Mode.INT, width, 0)

    @classmethod
    def fixed(cls, int_bits: int = 16, frac_bits: int = 16) -> Numerics:
        """``Q{int_bits}.{frac_bits}``; ``int_bits`` counts the sign bit."""
        return cls(Mode.FIXED, int_bits + frac_bits, frac_bits)

    @classmethod
    def parse(cls, text: str | Numerics) -> Numerics:
        """``"int32"``, ``"q16.16"`` (``Qm.n``), ``"float"``."""
        if isinstance(text, Numerics):
            return text
        t = text.strip().lower()
        try:
            if t == "float":
                return FLOAT
            if t.startswith("int"):
                return cls.integer(int(t[3:] or 32))
            if t.startswith("q"):
                m, n = t[1:].split(".")
                return cls.fixed(int(m), int(n))
        except ValueError as exc:
            raise ValueError(f"numerics {text!r}: {exc} (expected 'int<width>', 'q<m>.<n>' or "
                             "'float')") from None
        raise ValueError(f"numerics {text!r}: expected 'int<width>', 'q<m>.<n>' or 'float'")

    def __str__(self) -> str:
        if self.mode is Mode.FLOAT:
            return "float"
        if self.mode is Mode.INT:
            return f"int{self.width}"
        return f"q{self.width - self.frac}.{self.frac}"

    @property
    def lo(self) -> int:
        return -(1 << (self.width - 1))

    @property
    def hi(self) -> int:
        return (1 << (self.width - 1)) - 1

    # ------------------------------------------------------------------ conversions
    def to_raw(self, x: float) -> Any:
        """The token value of the real number ``x`` (rounded half up, saturated)."""
        if self.mode is Mode.FLOAT:
            return float(x)
        if self.mode is Mode.INT:
            if x != int(x):
                raise ValueError(f"{x!r} is not an integer, but the numerics are {self}")
            return self.fix(int(x))
        return self.sat(math.floor(x * (1 << self.frac) + 0.5))

    def from_raw(self, v: Any) -> float:
        """The real number a token value stands for."""
        if self.mode is Mode.FIXED:
            return v / (1 << self.frac)
        return float(v)

    def quantize(self, values: Any) -> Any:
        """``to_raw`` over a numpy array (int64 result unless float mode)."""
        a = np.asarray(values, dtype=np.float64)
        if self.mode is Mode.FLOAT:
            return a
        if self.mode is Mode.INT:
            return np.asarray([self.to_raw(x) for x in a.ravel()], dtype=np.int64).reshape(a.shape)
        return np.clip(np.floor(a * (1 << self.frac) + 0.5), self.lo, self.hi).astype(np.int64)

    def dequantize(self, values: Any) -> Any:
        a = np.asarray(values)
        return a / (1 << self.frac) if self.mode is Mode.FIXED else a.astype(np.float64)

    # ------------------------------------------------------------------ basic rules
    def sat(self, v: int) -> int:
        return self.lo if v < self.lo else min(v, self.hi)

    def wrap(self, v: int) -> int:
        half = 1 << (self.width - 1)
        return ((v + half) & ((1 << self.width) - 1)) - half

    def fix(self, v: Any) -> Any:
        """Bring an exact result into range: wrap (int), saturate (fixed), as is (float)."""
        if self.mode is Mode.INT:
            return self.wrap(v) if type(v) is int else v  # float tokens pass (pre-numerics behaviour)
        if self.mode is Mode.FIXED:
            return self.sat(v)
        return v

    def reduce_init(self, op: ReduceOp) -> Any:
        if op is ReduceOp.ADD:
            return 0.0 if self.mode is Mode.FLOAT else 0
        return -math.inf if self.mode is Mode.FLOAT else self.lo

    # ------------------------------------------------------------------ binary ops
    def add(self, a: Any, b: Any) -> Any:
        return self.fix(a + b)

    def sub(self, a: Any, b: Any) -> Any:
        return self.fix(a - b)

    def mul(self, a: Any, b: Any) -> Any:
        if self.mode is Mode.FIXED:
            return self.sat(rshift_round(a * b, self.frac))
        return self.fix(a * b)

    def div(self, a: Any, b: Any) -> Any:
        if self.mode is Mode.FLOAT:
            if b == 0:
                return 0.0 if a == 0 else math.copysign(math.inf, a)
            return a / b
        if b == 0:
            return 0 if a == 0 else self.hi if a > 0 else self.lo
        if self.mode is Mode.INT:
            return self.fix(a // b)
        num, den = (a << (self.frac + 1)) + b, 2 * b
        if den < 0:
            num, den = -num, -den
        return self.sat(num // den)

    def binop(self, op: AluOp) -> Callable[[Any, Any], Any]:
        fns: dict[AluOp, Callable[[Any, Any], Any]] = {
            AluOp.ADD: self.add, AluOp.SUB: self.sub, AluOp.MUL: self.mul, AluOp.DIV: self.div,
            AluOp.MAX: max, AluOp.MIN: min,
        }
        if self.mode is Mode.FLOAT:  # fix() is the identity: the plain operators (faster)
            fns.update({AluOp.ADD: operator.add, AluOp.SUB: operator.sub, AluOp.MUL: operator.mul})
        if op not in fns:
            raise ValueError(f"ALU op {op.value!r} is not binary")
        return fns[op]

    def reduce_fn(self, op: ReduceOp) -> Callable[[Any, Any], Any]:
        if op is not ReduceOp.ADD:
            return max
        return operator.add if self.mode is Mode.FLOAT else self.add

    # ------------------------------------------------------------------ unary ops
    def scalar_raw(self, scalar: float, where: str = "scalar") -> Any:
        """The token value of a node's ``scalar`` parameter.  A scalar outside the format's range
        is an error (it would be wrapped or saturated before any data arrives: a wrong constant
        that no overflow flag of the datapath reports)."""
        try:
            if self.mode is not Mode.FLOAT:
                exact = int(scalar) if self.mode is Mode.INT else math.floor(scalar * (1 << self.frac) + 0.5)
                if not self.lo <= exact <= self.hi:
                    raise ValueError(f"scalar {scalar!r} lies outside the {self} range "
                                     f"[{self.from_raw(self.lo):g}, {self.from_raw(self.hi):g}]")
            return self.to_raw(scalar)
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"{where}: {exc}") from None

    def unop(self, op: AluOp, scalar: float = 0.0, where: str = "ALU") -> Callable[[Any], Any]:
        """The function a unary ALU applies to each value (``scalar`` for add/mul by a constant)."""
        if op not in UNARY_OPS:
            raise ValueError(f"{where}: ALU op {op.value!r} is not unary")
        if op is AluOp.RELU:
            return lambda x: x if x > 0 else (0.0 if self.mode is Mode.FLOAT else 0)
        if op is AluOp.NEG:
            return lambda x: self.fix(-x)
        if op is AluOp.ADD_SCALAR:
            s = self.scalar_raw(scalar, where)
            return lambda x: self.fix(x + s)
        if op is AluOp.MUL_SCALAR:
            s = self.scalar_raw(scalar, where)
            return lambda x: self.mul(x, s)
        if self.mode is Mode.FLOAT:
            f = EXACT[op]
            return lambda x: f(x)
        if self.mode is Mode.INT:
            raise ValueError(f"{where}: {op.value} needs fixed-point or float numerics, not {self}")
        if op is AluOp.EXP:
            return self.exp
        if op is AluOp.RSQRT:
            return self.rsqrt
        return lambda x: self.pwl(op, x)

    def scale(self, y: int, s: int) -> int:
        """``y * 2**s`` rounded half up and saturated, for ``0 <= y < 2**(TABLE_BITS+1)``.

        ``s`` is clamped to ``[-(TABLE_BITS+2), width]`` first (no result changes: beyond the
        bounds the result is already 0 or saturated)."""
        s = max(min(s, self.width), -(TABLE_BITS + 2))
        return self.sat(y << s) if s >= 0 else self.sat(rshift_round(y, -s))

    def exp(self, x: int) -> int:
        t = x * log2e_fixed()
        fb = self.frac + LOG2E_BITS
        k = t >> fb
        r = t & ((1 << fb) - 1)
        i = r >> (fb - EXP_SEG_BITS)
        rem = (r >> (fb - EXP_SEG_BITS - EXP_INTERP_BITS)) & ((1 << EXP_INTERP_BITS) - 1)
        tab = tables(self)["exp"]
        y = tab.base[i] + rshift_round(tab.delta[i] * rem, EXP_INTERP_BITS)
        return self.scale(y, k + self.frac - TABLE_BITS)

    def rsqrt(self, x: int) -> int:
        if x <= 0:
            return self.hi
        w, f = self.width, self.frac
        p = x.bit_length() - 1
        e = p - f
        odd = e & 1
        a = x << (w - 2 - p)  # MSB at bit w-2
        rb = w - 2 - RSQRT_SEG_BITS
        i = (odd << RSQRT_SEG_BITS) | ((a >> rb) & ((1 << RSQRT_SEG_BITS) - 1))
        rem = a & ((1 << rb) - 1)
        tab = tables(self)["rsqrt"]
        y = tab.base[i] + rshift_round(tab.delta[i] * rem, rb)
        return self.scale(y, f - (e - odd) // 2 - TABLE_BITS)

    def pwl_shift(self, spec: Pwl) -> int:
        """log2 of the raw input step per segment (may be negative for few fraction bits)."""
        return self.frac + (spec.hi - spec.lo).bit_length() - 1 - spec.seg_bits

    def pwl(self, op: AluOp, x: int) -> int:
        spec = PWL_FUNCS[op]
        lo, hi = spec.lo << self.frac, spec.hi << self.frac
        if spec.identity_above and x >= hi:
            return x
        off = min(max(x, lo), hi - 1) - lo
        sh = self.pwl_shift(spec)
        if sh >= 0:
            i, rem = off >> sh, off & ((1 << sh) - 1)
        else:
            i, rem, sh = off << -sh, 0, 0
        tab = tables(self)[spec.name]
        y = tab.base[i] + rshift_round(tab.delta[i] * rem, sh)
        return self.sat(rshift_round(y, PWL_GUARD))


FLOAT = Numerics(Mode.FLOAT, 0, 0)
INT32 = Numerics.integer(32)
DEFAULT_FIXED = Numerics.fixed(16, 16)


@cache
def log2e_fixed() -> int:
    """log2(e) with ``LOG2E_BITS`` fraction bits (the constant of exp's range reduction)."""
    return round(math.log2(math.e) * (1 << LOG2E_BITS))


@cache
def tables(num: Numerics) -> dict[str, Table]:
    """The interpolation tables of the fixed-point nonlinear functions (shared by sw_sim and hw)."""
    if num.mode is not Mode.FIXED:
        raise ValueError(f"tables exist only for fixed-point numerics, not {num}")
    one = 1 << TABLE_BITS
    n = 1 << EXP_SEG_BITS
    out = {"exp": Table.from_points([round(2 ** (i / n) * one) for i in range(n + 1)])}
    n = 1 << RSQRT_SEG_BITS
    pts = [round(one / math.sqrt(1 + i / n)) for i in range(n)]
    pts += [round(one / math.sqrt(2 * (1 + i / n))) for i in range(n + 1)]
    out["rsqrt"] = Table.from_points(pts)
    for spec in PWL_FUNCS.values():
        segs = 1 << spec.seg_bits
        step = (spec.hi - spec.lo) / segs
        scale = 1 << (num.frac + PWL_GUARD)
        out[spec.name] = Table.from_points([round(spec.fn(spec.lo + i * step) * scale) for i in range(segs + 1)])
    return out
