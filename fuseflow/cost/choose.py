"""``--fusion auto``: the fusion granularity the estimate predicts fastest.

Each granularity is compiled and estimated (FLOPs, bytes, cycles under the given memory; no
simulation), and the one with the fewest estimated cycles is chosen.  A granularity the
compiler cannot build (a fusion error) drops out with its reason; ties go to the less fused
one (fewer recomputations, smaller graphs).  The same record answers the other question a
user's explicit choice raises: how much slower the estimate puts it than the best.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .stats import Estimate

__all__ = ["FUSIONS", "SLOW_WARNING", "FusionChoice", "choose_fusion"]

FUSIONS = ("unfused", "partial", "full")

# an explicit granularity the estimate puts at least this many times slower than the best
# draws a warning
SLOW_WARNING = 2.0


@dataclass
class FusionChoice:
    """The estimate of each granularity and the pick (``fusion``)."""

    fusion: str
    compiled: Any  # the chosen granularity's compiled model or program
    estimates: dict[str, Estimate] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # granularity -> why it did not compile

    @property
    def cycles(self) -> dict[str, float]:
        return {f: e.cycles for f, e in self.estimates.items()}

    def slowdown(self, fusion: str) -> float | None:
        """Estimated cycles of ``fusion`` over the best's (None when it did not compile)."""
        best = self.estimates[self.fusion].cycles
        if fusion not in self.estimates:
            return None
        return self.estimates[fusion].cycles / best if best > 0 else 1.0

    def reason(self) -> str:
        """One line: the pick, its estimated cycles and how much slower the others are."""
        others = []
        for f in FUSIONS:
            if f == self.fusion:
                continue
            if f in self.failed:
                others.append(f"{f} does not compile")
            elif f in self.estimates:
                others.append(f"{f} {self.estimates[f].cycles:,.0f} ({self.slowdown(f):.2f}x)")
        rest = f"; {', '.join(others)}" if others else ""
        return f"{self.fusion}: {self.estimates[self.fusion].cycles:,.0f} estimated cycles, the fewest{rest}"

    def warning(self, explicit: str) -> str | None:
        """The one-line warning for an explicit granularity the estimate puts ≥ 2x slower."""
        s = self.slowdown(explicit)
        if s is None or s < SLOW_WARNING:
            return None
        return (f"--fusion {explicit}: the estimate puts it {s:.1f}x slower than {self.fusion} "
                f"({self.estimates[explicit].cycles:,.0f} against {self.estimates[self.fusion].cycles:,.0f} "
                f"cycles); --fusion auto picks {self.fusion}")

    def to_json(self) -> dict[str, Any]:
        """Stable field names: chosen, estimated_cycles {granularity: cycles}, failed
        {granularity: reason}."""
        return {"chosen": self.fusion, "estimated_cycles": {f: round(c) for f, c in self.cycles.items()},
                "failed": dict(self.failed)}


def choose_fusion(build: Callable[[str], Any], estimate: Callable[[Any], Estimate], *,
                  errors: tuple[type[BaseException], ...] = (),
                  keep: str | None = None) -> FusionChoice:
    """Compile (``build(fusion)``) and estimate (``estimate(compiled)``) every granularity and
    pick the fewest estimated cycles.  ``errors``: the compile errors that make a granularity
    drop out (if every one fails, the first error is raised).  ``keep``: a granularity the
    caller will use whatever the pick (its compiled result is returned in ``compiled``)."""
    built: dict[str, Any] = {}
    choice = FusionChoice(fusion="", compiled=None)
    first: BaseException | None = None
    for f in FUSIONS:
        try:
            built[f] = build(f)
        except errors as exc:
            choice.failed[f] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            first = first or exc
            if f == keep:
                raise
            continue
        choice.estimates[f] = estimate(built[f])
    if not choice.estimates:
        assert first is not None
        raise first
    # fewest cycles; ties to the less fused (FUSIONS order)
    choice.fusion = min(choice.estimates, key=lambda f: (choice.estimates[f].cycles, FUSIONS.index(f)))
    choice.compiled = built[keep or choice.fusion]
    return choice
