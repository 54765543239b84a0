"""One interface for the generators' random choices, backed by hypothesis (``HypDraw``: the
pytest fuzz tests, which shrink a failure) or by a seeded ``random.Random`` (``RngDraw``: the
sharded large run of ``run_large.py``, one deterministic case per seed)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

__all__ = ["HypDraw", "RngDraw"]


class RngDraw:
    """Choices from ``random.Random(seed)``."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.r.choice(list(seq))

    def integer(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def boolean(self, p: float = 0.5) -> bool:
        return self.r.random() < p

    def weighted(self, table: Sequence[tuple[Any, int]]) -> Any:
        return self.r.choices([v for v, _ in table], weights=[w for _, w in table])[0]


class HypDraw:
    """Choices drawn from hypothesis strategies (``draw`` of an ``st.composite``); the first
    option of a choice is what a failing case shrinks towards."""

    def __init__(self, draw) -> None:
        self.draw = draw

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(seq)))

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def boolean(self, p: float = 0.5) -> bool:
        k = max(1, min(9, round(10 * p)))
        return self.draw(st.sampled_from([False] * (10 - k) + [True] * k))

    def weighted(self, table: Sequence[tuple[Any, int]]) -> Any:
        return self.draw(st.sampled_from([v for v, w in table for _ in range(w)]))
