"""The one checker of computed values against a reference (PyTorch, numpy, scipy): the error it
finds next to the bound the numerics allow (``docs/semantics.md``, "Tolerances").

The bound of every element is an :class:`~fuseflow.compiler.bounds.Enclosure` derived from the
numerics and the op chain (fixed point: the inputs' quantisation, every rounding, the tables'
interpolation, the accumulation length; float: relative rounding, so the bound is relative with
a floor near zero of the rounding of the terms; integers: exact).  On top of it comes the
reference's own float64 rounding.  A run passes when every element lies inside its bound;
:meth:`Check.text` prints the largest error, the bound there and the worst ratio.  (RTL against
sw_sim is a different check: bit-exact, with no tolerance.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["REFERENCE_ULPS", "Check", "compare"]

REFERENCE_ULPS = 16.0  # the float64 reference's own rounding: this many ulps of its magnitude


@dataclass(frozen=True)
class Check:
    """One output against its reference: ``max_error`` (largest ``|got - want|``), ``bound``
    (the bound at that element), ``worst`` (the largest error / bound ratio over the elements:
    at most 1 passes), ``where`` (the element of ``worst``), ``unbounded`` (elements whose error
    an op amplified without limit: checked only on the side the op's inputs bound)."""

    name: str
    ok: bool
    max_error: float
    bound: float
    worst: float
    where: tuple[int, ...]
    numerics: str
    unbounded: int = 0
    problem: str = ""  # a shape or finiteness failure, said in words

    def text(self) -> str:
        if self.problem:
            return f"{self.name}: {self.problem}: FAIL"
        extra = (f"; {self.unbounded} element(s) bounded on one side only (an op amplifies "
                 "their error without limit)") if self.unbounded else ""
        at = f" at {self.where}" if self.where else ""
        return (f"{self.name}: max error {self.max_error:.3g}, bound there {self.bound:.3g} "
                f"(worst error/bound {self.worst:.3g}{at}; {self.numerics}, derived from the op chain"
                f"{extra}): {'PASS' if self.ok else 'FAIL'}") if not self.numerics.startswith("int") else (
                f"{self.name}: max error {self.max_error:.3g} ({self.numerics}: exact): {'PASS' if self.ok else 'FAIL'}")

    def to_json(self) -> dict:
        return {"name": self.name, "ok": self.ok, "max_error": self.max_error, "bound": self.bound,
                "worst_ratio": self.worst, "where": list(self.where), "numerics": self.numerics,
                "unbounded": self.unbounded, "problem": self.problem or None}


def compare(name: str, got, want, lo, hi, numerics: str) -> Check:
    """``got`` against ``want``: every element must satisfy ``-lo <= got - want <= hi``
    (``lo`` / ``hi``: the enclosure's radii below and above, arrays or numbers), widened by
    :data:`REFERENCE_ULPS` of the reference's magnitude."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return Check(name, False, np.inf, 0.0, np.inf, (), numerics,
                     problem=f"shape {got.shape}, the reference's {want.shape}")
    if not np.all(np.isfinite(got)):
        at = tuple(int(i) for i in np.argwhere(~np.isfinite(got))[0])
        return Check(name, False, np.inf, 0.0, np.inf, at, numerics, problem=f"a non-finite value at {at}")
    exact = numerics.startswith("int")  # integers: exact, no float64 rounding to allow for
    slack = 0.0 if exact else REFERENCE_ULPS * np.finfo(np.float64).eps * np.abs(want)
    # a NaN end (a bound no rule could give) is no bound at all: unbounded, never a NaN verdict
    lo = np.nan_to_num(np.broadcast_to(np.asarray(lo, dtype=np.float64), want.shape), nan=np.inf) + slack
    hi = np.nan_to_num(np.broadcast_to(np.asarray(hi, dtype=np.float64), want.shape), nan=np.inf) + slack
    diff = got - want
    allowed = np.where(diff < 0, lo, hi)
    unbounded = int(np.count_nonzero(~np.isfinite(lo) | ~np.isfinite(hi)))
    if diff.size == 0:
        return Check(name, True, 0.0, 0.0, 0.0, (), numerics, unbounded)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(diff == 0, 0.0, np.abs(diff) / allowed)
    k = int(np.argmax(np.abs(diff)))
    w = int(np.argmax(ratio))
    where = tuple(int(i) for i in np.unravel_index(w, diff.shape))
    return Check(name, bool(np.all(np.abs(diff) <= allowed)), float(np.abs(diff).flat[k]),
                 float(allowed.flat[k]), float(ratio.flat[w]), where, numerics, unbounded)
