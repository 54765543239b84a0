"""Failure classes the fuzzers found that are written up as xfail regression tests
(``test_regressions.py``) and wait for the lead's fix: the default fuzz run reports a failure
that matches one as an event, not as a test failure, so the suite stays green while the bug is
open.  When a bug is fixed, delete its entry here together with the xfail mark of its test.

Each entry matches a (case, record) pair: by the record's detail (crashes name the file and
line they come from) or by what the case contains (mismatches)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KNOWN", "known"]

@dataclass(frozen=True)
class Known:
    name: str
    test: str  # the regression test in test_regressions.py
    matches: Callable[[object, object], bool]


KNOWN: list[Known] = []  # every class found so far is fixed (tests in test_regressions.py)


def known(case, record) -> Known | None:
    """The known failure class ``record`` of ``case`` belongs to, if any."""
    return next((k for k in KNOWN if k.matches(case, record)), None)


# program-fuzzer classes (the record's schedule and detail; test in test_regressions.py)
KNOWN_PROGRAM: list[Known] = []


def known_program(case, record) -> Known | None:
    return next((k for k in KNOWN_PROGRAM if k.matches(case, record)), None)
