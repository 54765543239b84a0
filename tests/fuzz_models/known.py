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

SPARSE = ("csr", "csc", "coo", "coo_dup", "bsr", "csr_zeros", "ann:")


@dataclass(frozen=True)
class Known:
    name: str
    test: str  # the regression test in test_regressions.py
    matches: Callable[[object, object], bool]


def _sparse_input(case) -> bool:
    return any(i.layout.startswith(SPARSE) for i in case.inputs)


def _has(case, *ops: str) -> bool:
    return any(o in ops for o in case.ops)


def _coo_input(case) -> bool:
    return any(i.layout in ("coo", "coo_dup", "ann:coo") for i in case.inputs)


KNOWN = [
    Known("a fused row selection after a reduced COO intermediate sums every row",
          "test_select_row_of_relu_of_coo_matmul_fused",
          lambda c, r: r.verdict == "mismatch" and _coo_input(c) and not r.schedule.startswith("unfused")),
]


def known(case, record) -> Known | None:
    """The known failure class ``record`` of ``case`` belongs to, if any."""
    return next((k for k in KNOWN if k.matches(case, record)), None)


# program-fuzzer classes (the record's schedule and detail; test in test_regressions.py)
KNOWN_PROGRAM = [
    Known("block of a dimension an spacc2 writes: 'lanes' on spacc2", "test_block_of_an_outer_product_spmm",
          lambda c, r: "unknown parameter 'lanes'" in r.detail),
    Known("par pass builds an invalid graph", "test_par_over_the_reduced_index_of_a_fused_total_sum",
          lambda c, r: "the parallel graph is not valid" in r.detail),
    Known("par: Serialize protocol error on empty product rows", "test_par_of_a_shifted_spmm_with_an_empty_product",
          lambda c, r: "Serialize" in r.detail),
]


def known_program(case, record) -> Known | None:
    return next((k for k in KNOWN_PROGRAM if k.matches(case, record)), None)
