"""What happens when a run's arithmetic brought a result into range: the policy on reading the
results, written once for every API and command.

The hardware's behaviour is fixed (``docs/numerics.md``): integers wrap, fixed point saturates,
a division by zero gives the bound of the dividend's sign, and a sticky flag per node records
each.  The results of such a run are not the exact results, so reading them is an error by
default: :func:`enforce` raises :class:`NumericOverflowError` naming every node, how many
results it brought into range, the largest magnitude among them and the format.  The opt-in
``on_overflow="report"`` (``--on-overflow report`` on the command line) returns the results
with the counts and a :class:`NumericOverflowWarning` instead; ``"ignore"`` returns them with
the counts and no warning, for code that compares or reports the flags itself (the correlation
suites and the RTL-against-sw_sim checks, which report every flag).  (Distinct from
``saturate``, which clamps *inputs* before a run.)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["OVERFLOW_POLICIES", "NumericOverflowError", "NumericOverflowWarning", "Overflow", "check_policy",
           "enforce"]

OVERFLOW_POLICIES = ("raise", "report", "ignore")


@dataclass(frozen=True)
class Overflow:
    """One node's results brought into range in a run.

    ``count``: how many (a hardware flag without a count: 1); ``peak``: the largest magnitude
    of an exact result outside the range, in the values' units (``math.inf``: a division by
    zero; ``None``: not known, a hardware flag); ``numerics``: the format (``int32``,
    ``q16.16``)."""

    node: str
    count: int
    peak: float | None
    numerics: str

    def describe(self) -> str:
        what = "wrapped" if self.numerics.startswith("int") else "saturated"
        if self.peak is None:
            size = "the hardware's sticky flag; run sw_sim for the count and magnitude"
        elif math.isinf(self.peak):
            what, size = "brought", "a division by zero among them"
        else:
            size = f"largest magnitude {self.peak:.6g}"
        return f"node {self.node!r} {what} {self.count} result(s) into the {self.numerics} range ({size})"


class NumericOverflowError(OverflowError):
    """A run whose arithmetic wrapped or saturated results: the outputs are not the exact
    results.  ``overflows`` lists the nodes (:class:`Overflow`)."""

    def __init__(self, where: str, overflows: list[Overflow]) -> None:
        self.where, self.overflows = where, overflows
        nodes = "; ".join(o.describe() for o in overflows)
        super().__init__(f"overflow in {where}: {nodes}. The outputs are not the exact results: use a "
                         "wider format or smaller inputs, or on_overflow='report' (--on-overflow report) "
                         "to read them anyway")


class NumericOverflowWarning(UserWarning):
    """``on_overflow="report"``: results were wrapped or saturated, and returned anyway."""


def check_policy(on_overflow: str) -> str:
    """``on_overflow`` if it is a policy (:data:`OVERFLOW_POLICIES`), else a ``ValueError``."""
    if on_overflow not in OVERFLOW_POLICIES:
        raise ValueError(f"on_overflow={on_overflow!r}: use one of {', '.join(map(repr, OVERFLOW_POLICIES))}")
    return on_overflow


def enforce(overflows: Iterable[Overflow], on_overflow: str, where: str) -> None:
    """Apply the policy to a run's overflows: nothing when there are none; ``"raise"``: a
    :class:`NumericOverflowError`; ``"report"``: a :class:`NumericOverflowWarning`;
    ``"ignore"``: nothing (the caller reports them)."""
    check_policy(on_overflow)
    found = list(overflows)
    if not found or on_overflow == "ignore":
        return
    if on_overflow == "raise":
        raise NumericOverflowError(where, found)
    warnings.warn(NumericOverflowWarning(f"overflow in {where} (on_overflow='report'): "
                                         + "; ".join(o.describe() for o in found)), stacklevel=3)
