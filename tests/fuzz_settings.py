"""How much the fuzz tests run: a reduced, derandomised form by default (the CI suite), the
full form with ``FUSEFLOW_FUZZ=full`` (fresh random examples; the README's reliability figures
come from that run).  ``FUSEFLOW_FUZZ_SCALE=K`` multiplies the full counts."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

FULL = os.environ.get("FUSEFLOW_FUZZ") == "full"
SCALE = float(os.environ.get("FUSEFLOW_FUZZ_SCALE", "1"))


def examples(reduced: int, full: int) -> int:
    return max(1, int(full * SCALE)) if FULL else reduced


def fuzz_settings(reduced: int, full: int) -> settings:
    """Hypothesis settings with :func:`examples` examples; shrinking stays on, so a failure is
    reported as a minimal case."""
    return settings(max_examples=examples(reduced, full), derandomize=not FULL, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])
