"""The seeded pauses of a primitive run, shared by both primitive runners (the cocotb testbench
``rtl_sim/tb_primitive.py`` and ``rtl_sim/amaranth_sim.py``), so one run draws the same gaps and
stalls on either and their cycle counts compare.  No cocotb or amaranth import."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["run_pauses"]


def _chance(p: float, seed: int) -> Iterator[bool] | None:
    """``True`` on a cycle with probability ``p``, from its own seeded generator (``None``:
    never)."""
    if not p:
        return None
    rng = random.Random(seed)
    return (rng.random() < p for _ in itertools.count())


def run_pauses(run: Mapping[str, Any], inputs: Iterable[str],
               outputs: Iterable[str]) -> tuple[dict[str, Iterator[bool] | None], dict[str, Iterator[bool] | None]]:
    """The pause generators of one job run: per input port its gaps (``run["gap"]``), per
    output port its stalls (``run["stall"]``), each seeded from ``run["seed"]`` and the port's
    position."""
    seed = run.get("seed", 0)
    return ({p: _chance(run.get("gap", 0.0), seed + i) for i, p in enumerate(inputs)},
            {p: _chance(run.get("stall", 0.0), seed + 100 + i) for i, p in enumerate(outputs)})
