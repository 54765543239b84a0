"""Overflow counting: every node of a run gets arithmetic that counts the results it had to
bring into range — an integer result wrapped to the value width, a fixed-point result
saturated — with results equal to the plain numerics (``fuseflow/numerics.py``) in every case.
:func:`sw_sim.run_graph` reports the counts per node (``SimResult.overflows``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuseflow.numerics import Mode, Numerics

__all__ = ["CountingNumerics", "counting", "overflow_counts"]


class CountingNumerics(Numerics):
    """One node's arithmetic: :class:`Numerics` whose ``sat`` and ``fix`` (the only places a
    result is brought into range, so every operation goes through them) count what they change."""

    def __init__(self, base: Numerics) -> None:
        super().__init__(base.mode, base.width, base.frac)
        object.__setattr__(self, "_lohi", (base.lo, base.hi))
        object.__setattr__(self, "_events", [0])

    @property
    def events(self) -> int:
        """How many results were wrapped (integer) or saturated (fixed point) so far."""
        return self._events[0]

    def sat(self, v: int) -> int:
        lo, hi = self._lohi
        if v < lo:
            self._events[0] += 1
            return lo
        if v > hi:
            self._events[0] += 1
            return hi
        return v

    def div(self, a: Any, b: Any) -> Any:
        """A quotient by 0 (``docs/numerics.md``: ``0/0 = 0``, else the saturation bound) is
        counted when it saturates."""
        if b == 0 and a != 0:
            self._events[0] += 1
        return super().div(a, b)

    def fix(self, v: Any) -> Any:
        if self.mode is Mode.INT:
            if type(v) is not int:
                return v  # float tokens pass (pre-numerics behaviour)
            lo, hi = self._lohi
            if lo <= v <= hi:
                return v
            self._events[0] += 1
            return self.wrap(v)
        return self.sat(v) if self.mode is Mode.FIXED else v


def counting(num: Numerics) -> Numerics:
    """``num`` counting the results it brings into range; float numerics have none to count
    and are returned as they are."""
    return num if num.mode is Mode.FLOAT else CountingNumerics(num)


def overflow_counts(arith: Mapping[str, Numerics]) -> dict[str, int]:
    """Per node, the results its arithmetic wrapped or saturated (nodes with none left out)."""
    return {n: a.events for n, a in arith.items() if isinstance(a, CountingNumerics) and a.events}
