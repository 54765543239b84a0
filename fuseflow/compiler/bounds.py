"""Error enclosures: how far a run's values may lie from the exact ones, derived from the
numerics and the op chain (``docs/semantics.md``, "Tolerances").

An :class:`Enclosure` holds, per element, the exact value ``x`` (float64, on the inputs as
given) and how far below (``lo``) and above (``hi``) it the value the hardware computes may lie.
:class:`EnclosureArithmetic` carries enclosures through the ops of a program with the rules of
``docs/numerics.md``:

* inputs: the exact quantisation error of every value (``Numerics.quantize``);
* fixed point: every product, quotient, scaled value and table function rounds (half an LSB,
  :data:`TABLE_ERROR` for the tables' interpolation); additions and reductions are exact;
  products widen their operands' errors (``|a|·eb + |b|·ea + ea·eb``), monotone functions map
  the ends of the interval, a quotient divides the intervals;
* float: every operation rounds relatively (``2**-52`` of the result, a sum ``K·2**-52`` of its
  terms' magnitudes); fixed point adds the same for the float64 evaluation of the exact values;
* integers: exact.

Where an op amplifies error without limit (``rsqrt`` of a value within its error of 0, a
quotient whose divisor's interval holds 0), the enclosure says so: its end is the format's
bound (fixed point: what the hardware returns there) or infinite, so the check is made on what
the op's inputs allow (a one-sided check), and :meth:`Enclosure.unbounded` counts the elements.
Wrapping and saturation are not enclosed: a run that wrapped or saturated raises
(:mod:`fuseflow.ir.overflow`) before its values are checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.check import Check, compare
from ..ir.numerics import Mode, Numerics
from ..ir.tensor import TensorData
from .evaluate import dense_of, evaluate, expand_axes
from .program import BinOp, Op, Program, Unary, UnOp
from .runner import reference_all

__all__ = ["TABLE_ERROR", "Enclosure", "EnclosureArithmetic", "check_program", "program_enclosures"]

ULP = 2.0**-52  # float: one rounding, relative (twice the unit roundoff: a margin for libm)
BIG = 1e300  # an infinite error inside a product (0 · inf would be nan; 0 · BIG is 0)

# table functions (fixed point), docs/numerics.md: (LSBs, relative, absolute) error beyond the
# exact function of the rounded input, twice the measured bounds
TABLE_ERROR: dict[str, tuple[float, float, float]] = {
    "exp": (3.0, 3e-5, 0.0),
    "rsqrt": (2.0, 5e-5, 0.0),
    "sigmoid": (3.0, 0.0, 2.5e-5),
    "gelu": (5.0, 0.0, 5e-5),
}


def _gelu(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf, otypes=[float])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


GELU_ARGMIN = -0.7517915246935645  # gelu's minimum (value -0.16997...)
FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "gelu": _gelu,
    "rsqrt": lambda x: 1.0 / np.sqrt(np.where(x > 0, x, np.nan)),
}


@dataclass
class Enclosure:
    """Per element: the exact value ``x``; the computed value lies in ``[x - lo, x + hi]``."""

    x: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def exact(cls, x: np.ndarray) -> Enclosure:
        x = np.asarray(x, dtype=np.float64)
        return cls(x, np.zeros_like(x), np.zeros_like(x))

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> Enclosure:
        return Enclosure(fn(self.x), fn(self.lo), fn(self.hi))

    @property
    def radius(self) -> np.ndarray:
        return np.maximum(self.lo, self.hi)

    @property
    def low(self) -> np.ndarray:
        return self.x - self.lo

    @property
    def high(self) -> np.ndarray:
        return self.x + self.hi

    def unbounded(self) -> int:
        """Elements whose error an op amplified without limit (an infinite end)."""
        return int(np.count_nonzero(~np.isfinite(self.lo) | ~np.isfinite(self.hi)))


def _from_ends(x: np.ndarray, low: np.ndarray, high: np.ndarray, extra: np.ndarray | float = 0.0) -> Enclosure:
    """The enclosure of ``x`` whose computed value lies in ``[low, high]`` widened by ``extra``."""
    lo = np.maximum(x - low, 0.0) + extra
    hi = np.maximum(high - x, 0.0) + extra
    return Enclosure(x, np.nan_to_num(lo, nan=np.inf), np.nan_to_num(hi, nan=np.inf))


class EnclosureArithmetic:
    """Enclosures through the ops of a program (the module docstring); an
    :class:`~fuseflow.compiler.evaluate.Arithmetic`."""

    def __init__(self, numerics: Numerics | str) -> None:
        self.num = Numerics.parse(numerics)
        fixed = self.num.mode is Mode.FIXED
        self.half = 0.5 * 2.0 ** -self.num.frac if fixed else 0.0  # one rounding, fixed point
        # float numerics: the run's own rounding; fixed point: the float64 rounding of the exact
        # values x themselves (a chain x + 1 - 1 drifts by an ulp of 1); integers are exact
        self.ulp = 0.0 if self.num.mode is Mode.INT else ULP
        self.top = self.num.from_raw(self.num.hi) if self.num.mode is not Mode.FLOAT else np.inf

    # ------------------------------------------------------------------ rounding
    def rounding(self, magnitude: np.ndarray | float) -> np.ndarray | float:
        """What one rounded operation adds to a result of this ``magnitude``."""
        return self.half + self.ulp * np.abs(magnitude)

    def constant(self, c: float) -> float:
        """The value the hardware holds for the constant ``c``."""
        if self.num.mode is Mode.FLOAT:
            return float(c)
        return float(self.num.from_raw(self.num.to_raw(c)))

    # ------------------------------------------------------------------ the Arithmetic protocol
    def leaf(self, name: str, value: Any) -> Enclosure:
        if isinstance(value, Enclosure):
            return value
        x = np.asarray(dense_of(value), dtype=np.float64)
        if self.num.mode is not Mode.FIXED:
            return Enclosure.exact(x)
        dev = np.asarray(self.num.dequantize(self.num.quantize(x)), dtype=np.float64) - x
        return Enclosure(x, np.maximum(-dev, 0.0), np.maximum(dev, 0.0))

    def pattern(self, value: Any) -> Any:
        return value.x if isinstance(value, Enclosure) else value

    def unary(self, e: Unary, a: Enclosure) -> Enclosure:
        if e.op is UnOp.SCALE:
            return self.scale(a, float(e.scalar))
        if e.op is UnOp.SHIFT:
            return self.shift(a, float(e.scalar))
        return self.function(e.op.value, a)

    def row(self, e: Unary, a: Enclosure, axis: int, visited: np.ndarray | None) -> Enclosure:
        if e.op is UnOp.SOFTMAX:
            return self.softmax(a, axis, visited)
        return self.layernorm(a, axis, float(e.scalar))

    def reduce(self, op: Op, a: Enclosure, ids: list[str], keep: list[str]) -> Enclosure:
        axes = tuple(k for k, i in enumerate(ids) if i not in keep)
        if op is Op.ADD:
            return self.sum(a, axes)
        return self.extreme(a, axes, np.max if op is Op.MAX else np.min)

    def contract(self, a: Enclosure, ia: list[str], b: Enclosure, ib: list[str], keep: list[str]) -> Enclosure:
        syms = {i: k for k, i in enumerate(dict.fromkeys(ia + ib))}
        sa, sb, out = [syms[i] for i in ia], [syms[i] for i in ib], [syms[i] for i in keep]

        def ein(p: np.ndarray, q: np.ndarray) -> np.ndarray:
            return np.einsum(p, sa, q, sb, out)

        return self._product(ein(a.x, b.x), a, b, ein, terms=len(syms) > len(keep))

    def binop(self, e: BinOp, a: Enclosure, b: Enclosure) -> Enclosure:
        if e.op is Op.ADD:
            return self.add(a, b)
        if e.op is Op.SUB:
            return self.add(a, self.negate(b))
        if e.op is Op.MUL:
            return self._product(a.x * b.x, a, b, np.multiply, terms=False)
        if e.op is Op.DIV:
            return self.divide(a, b)
        pick = np.maximum if e.op is Op.MAX else np.minimum
        return _from_ends(pick(a.x, b.x), pick(a.low, b.low), pick(a.high, b.high))

    def expand(self, a: Enclosure, ids: list[str], target: list[str]) -> Enclosure:
        return a.map(lambda v: expand_axes(v, ids, target))

    def store(self, a: Enclosure, shape: tuple[int, ...]) -> Enclosure:
        return a.map(lambda v: np.broadcast_to(v, shape).copy())

    # ------------------------------------------------------------------ the rules
    def add(self, a: Enclosure, b: Enclosure) -> Enclosure:
        x = a.x + b.x
        r = self.ulp * np.abs(x)
        return Enclosure(x, a.lo + b.lo + r, a.hi + b.hi + r)

    def negate(self, a: Enclosure) -> Enclosure:
        return Enclosure(-a.x, a.hi, a.lo)

    def _product(self, x: np.ndarray, a: Enclosure, b: Enclosure, ein, terms: bool) -> Enclosure:
        """``Σ a·b`` (``ein``: the product or contraction): each product rounds once, a sum of
        products ``K·ulp`` of the magnitudes (float)."""
        ra, rb = np.minimum(a.radius, BIG), np.minimum(b.radius, BIG)
        ax, bx = np.abs(a.x), np.abs(b.x)
        r = ein(ax, rb) + ein(ra, bx) + ein(ra, rb)
        if self.half:  # one rounding per product the dataflow computes (both operands may be nonzero)
            r = r + self.half * ein(((ax > 0) | (ra > 0)).astype(np.float64), ((bx > 0) | (rb > 0)).astype(np.float64))
        if self.ulp:
            k = max(1, ax.size * bx.size // max(1, x.size)) if terms else 1
            r = r + self.ulp * (k + 1) * ein(ax, bx)
        r = np.where(r >= BIG, np.inf, r)
        return Enclosure(x, r, r.copy())

    def scale(self, a: Enclosure, c: float) -> Enclosure:
        cq = self.constant(c)
        x = a.x * c
        d = a.x * (cq - c)  # the constant's own rounding
        low = d + np.minimum(-cq * a.lo, cq * a.hi)
        high = d + np.maximum(-cq * a.lo, cq * a.hi)
        r = self.rounding(x)
        return Enclosure(x, np.maximum(-low, 0.0) + r, np.maximum(high, 0.0) + r)

    def shift(self, a: Enclosure, c: float) -> Enclosure:
        d = self.constant(c) - c
        x = a.x + c
        r = self.ulp * np.abs(x)
        return Enclosure(x, np.maximum(a.lo - d, 0.0) + r, np.maximum(a.hi + d, 0.0) + r)

    def function(self, name: str, a: Enclosure) -> Enclosure:
        """An elementwise function: the exact function over the interval, plus its rounding."""
        if name == "relu":
            return _from_ends(np.maximum(a.x, 0.0), np.maximum(a.low, 0.0), np.maximum(a.high, 0.0))
        if name == "neg":
            return self.negate(a)
        f = FUNCTIONS[name]
        x = f(a.x)
        if name == "rsqrt":  # decreasing; at or below 0 the hardware returns its largest value
            low, high = f(a.high), np.where(a.low > 0, f(np.maximum(a.low, 1e-300)), self.top)
        elif name == "gelu":  # not monotone: its minimum inside the interval
            ends = np.stack([f(a.low), f(a.high)])
            low = np.where((a.low <= GELU_ARGMIN) & (GELU_ARGMIN <= a.high), f(np.array(GELU_ARGMIN)),
                           ends.min(axis=0))
            high = ends.max(axis=0)
        else:
            low, high = f(a.low), f(a.high)
        lsbs, rel, absolute = TABLE_ERROR[name]
        if self.num.mode is Mode.FIXED:
            extra = lsbs * 2 * self.half + rel * np.abs(np.nan_to_num(high, posinf=0.0)) + absolute
        else:
            extra = 4 * self.ulp * np.abs(np.nan_to_num(high, posinf=0.0))
        return _from_ends(x, low, high, extra)

    def divide(self, a: Enclosure, b: Enclosure) -> Enclosure:
        """Interval quotient, rounded once; a divisor whose interval holds 0 is unbounded."""
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(b.x != 0, a.x / np.where(b.x != 0, b.x, 1.0), 0.0)
            corners = np.stack([a.low / b.low, a.low / b.high, a.high / b.low, a.high / b.high])
        safe = (b.low > 0) | (b.high < 0)
        low = np.where(safe, np.nanmin(corners, axis=0), -np.inf)
        high = np.where(safe, np.nanmax(corners, axis=0), np.inf)
        return _from_ends(x, low, high, self.rounding(x))

    def sum(self, a: Enclosure, axes: tuple[int, ...], keepdims: bool = False) -> Enclosure:
        x = np.sum(a.x, axis=axes, keepdims=keepdims)
        k = max(1, a.x.size // max(1, x.size))
        r = self.ulp * k * np.sum(np.abs(a.x), axis=axes, keepdims=keepdims)
        return Enclosure(x, np.sum(a.lo, axis=axes, keepdims=keepdims) + r,
                         np.sum(a.hi, axis=axes, keepdims=keepdims) + r)

    def extreme(self, a: Enclosure, axes: tuple[int, ...], pick, keepdims: bool = False) -> Enclosure:
        """max / min over ``axes``: exact (the extreme of the ends bounds the computed one)."""
        return _from_ends(pick(a.x, axis=axes, keepdims=keepdims), pick(a.low, axis=axes, keepdims=keepdims),
                          pick(a.high, axis=axes, keepdims=keepdims))

    def softmax(self, a: Enclosure, axis: int, visited: np.ndarray | None) -> Enclosure:
        """As the row subgraph computes it (``fuseflow.compiler.lowering.row_softmax``): the maximum, the
        shift, exp, the sum, the quotient; over the visited entries (0 elsewhere)."""
        keep = np.ones(a.x.shape, bool) if visited is None else np.broadcast_to(visited, a.x.shape)
        masked = Enclosure(np.where(keep, a.x, -np.inf), np.where(keep, a.lo, 0.0), np.where(keep, a.hi, 0.0))
        top = self.extreme(masked, (axis,), np.max, keepdims=True)
        top = top.map(lambda v: np.where(np.isfinite(v), v, 0.0))
        e = self.function("exp", self.add(a, self.negate(top)))
        e = e.map(lambda v: np.where(keep, v, 0.0))
        y = self.divide(e, self.sum(e, (axis,), keepdims=True))
        return y.map(lambda v: np.where(keep, v, 0.0))

    def layernorm(self, a: Enclosure, axis: int, eps: float) -> Enclosure:
        """As ``fuseflow.compiler.lowering.row_layernorm`` computes it: mean = Σx·(1/n), the centred
        row, var = Σxc²·(1/n), rsqrt(var + eps), the product."""
        n = a.x.shape[axis]
        mean = self.scale(self.sum(a, (axis,), keepdims=True), 1.0 / n)
        xc = self.add(a, self.negate(mean))
        var = self.scale(self.sum(self._product(xc.x * xc.x, xc, xc, np.multiply, False), (axis,),
                                  keepdims=True), 1.0 / n)
        inv = self.function("rsqrt", self.shift(var, eps))
        return self._product(xc.x * inv.x, xc, inv, np.multiply, False)


def program_enclosures(program: Program, data: Mapping[str, np.ndarray | TensorData | Enclosure],
                       numerics: Numerics | str) -> dict[str, Enclosure]:
    """Every tensor of ``program`` (inputs and computed) as an :class:`Enclosure` under
    ``numerics``, on ``data`` (real values, or enclosures already)."""
    return evaluate(program, data, EnclosureArithmetic(numerics))


def check_program(program: Program, data: Mapping[str, np.ndarray | TensorData], got: Mapping[str, np.ndarray],
                  numerics: Numerics | str) -> list[Check]:
    """Each result of ``program`` in ``got`` (dense values, dequantised) against the numpy
    reference on ``data`` (real values), within the bound ``numerics`` derives for it."""
    num = Numerics.parse(numerics)
    enc = program_enclosures(program, data, num)
    want = reference_all(program, data, np.float64)
    return [compare(n, got[n], want[n], enc[n].lo, enc[n].hi, str(num)) for n in program.result_names()]
