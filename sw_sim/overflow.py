"""Overflow counting: every node of a run gets arithmetic that counts the results it had to
bring into range — an integer result wrapped to the value width, a fixed-point result
saturated — and the largest magnitude among them, with results equal to the plain numerics
(``fuseflow/numerics.py``) in every case.  :func:`sw_sim.run_graph` reports the counts per node
(``SimResult.overflows``) and applies the overflow policy (``fuseflow/overflow.py``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fuseflow.ir.numerics import Mode, Numerics
from fuseflow.ir.overflow import Overflow

__all__ = ["CountingNumerics", "counting", "overflow_counts", "overflow_records"]


class CountingNumerics(Numerics):
    """One node's arithmetic: :class:`Numerics` whose ``sat`` and ``fix`` (the only places a
    result is brought into range, so every operation goes through them) count what they change."""

    def __init__(self, base: Numerics) -> None:
        super().__init__(base.mode, base.width, base.frac)
        object.__setattr__(self, "_lohi", (base.lo, base.hi))
        object.__setattr__(self, "_events", [0, 0])  # count, largest raw magnitude out of range

    @property
    def events(self) -> int:
        """How many results were wrapped (integer) or saturated (fixed point) so far."""
        return self._events[0]

    @property
    def peak(self) -> float:
        """The largest magnitude of an exact result out of range, in the values' units
        (``math.inf`` after a division by zero)."""
        raw = self._events[1]
        return raw if math.isinf(raw) else float(self.from_raw(raw))

    def _out(self, v: int) -> None:
        ev = self._events
        ev[0] += 1
        ev[1] = max(ev[1], abs(v))

    def sat(self, v: int) -> int:
        lo, hi = self._lohi
        if v < lo:
            self._out(v)
            return lo
        if v > hi:
            self._out(v)
            return hi
        return v

    def div(self, a: Any, b: Any) -> Any:
        """A quotient by 0 (``docs/numerics.md``: ``0/0 = 0``, else the saturation bound) is
        counted when it saturates."""
        if b == 0 and a != 0:
            self._out(math.inf)
        return super().div(a, b)

    def fix(self, v: Any) -> Any:
        if self.mode is Mode.INT:
            if type(v) is not int:
                return v  # float tokens pass (pre-numerics behaviour)
            lo, hi = self._lohi
            if lo <= v <= hi:
                return v
            self._out(v)
            return self.wrap(v)
        return self.sat(v) if self.mode is Mode.FIXED else v


def counting(num: Numerics) -> Numerics:
    """``num`` counting the results it brings into range; float numerics have none to count
    and are returned as they are."""
    return num if num.mode is Mode.FLOAT else CountingNumerics(num)


def overflow_counts(arith: Mapping[str, Numerics]) -> dict[str, int]:
    """Per node, the results its arithmetic wrapped or saturated (nodes with none left out)."""
    return {n: a.events for n, a in arith.items() if isinstance(a, CountingNumerics) and a.events}


def overflow_records(arith: Mapping[str, Numerics], prefix: str = "") -> list[Overflow]:
    """The nodes whose arithmetic brought results into range, as :class:`Overflow` records
    (named ``prefix + node``)."""
    return [Overflow(prefix + n, a.events, a.peak, str(a)) for n, a in arith.items()
            if isinstance(a, CountingNumerics) and a.events]
