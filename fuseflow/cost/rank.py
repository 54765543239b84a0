"""Schedule ranking: enumerate fusion granularity x dataflow orders of a model, estimate each
configuration with the heuristic (:mod:`fuseflow.cost.model`) and order them by estimated
cycles.

The dataflow orders come from the compiler: for each fused group, the topological orders of its
partial order graph that the code generator can lower (``Group.lowerable_orders``; orders the
compiler rejects are counted as pruned).  A configuration picks one order per group; groups
vary one at a time from the compiler's own choice (the orders of different groups are
independent, so the best per group combine), and the combinations beyond ``limit`` are counted,
not built.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..compiler import run_pipeline
from ..models.ir import ModelIR
from ..models.plan import CompiledModel, CompilerStep, compile_model
from .graph import Estimate
from .model import estimate_model

__all__ = ["Config", "Ranking", "rank_model"]


@dataclass
class Config:
    fusion: str
    orders: dict[str, tuple[str, ...]]  # graph name -> fused order (changed ones only)
    estimate: Estimate
    model: CompiledModel = field(repr=False)
    simulated: int | None = None  # sw_sim cycles, when run

    @property
    def label(self) -> str:
        if not self.orders:
            return f"{self.fusion} (compiler's orders)"
        return f"{self.fusion}, " + ", ".join(f"{g}={''.join(o)}" for g, o in self.orders.items())


@dataclass
class Ranking:
    configs: list[Config]  # best first
    enumerated: int  # fusion x orders the compiler allows (per-group orders multiplied)
    pruned_by_compiler: int  # orders of the POGs the code generator cannot lower
    not_built: int  # allowed combinations beyond the one-group-at-a-time sweep
    seconds: float


def _variants(cm: CompiledModel, per_group: int) -> list[tuple[dict[str, tuple[str, ...]], CompiledModel]]:
    """The compiled model with one group's order changed at a time (up to ``per_group`` orders
    per group), plus the compiler's choice."""
    out = [({}, cm)]
    for k, step in enumerate(cm.steps):
        if not isinstance(step, CompilerStep) or step.options is None:
            continue
        for gi, cg in enumerate(step.compiled.groups):
            chosen = tuple(cg.group.order)
            for order in cg.group.lowerable_orders[:per_group]:
                if tuple(order) == chosen:
                    continue
                opts = replace(step.options, fused_orders={gi: order})
                try:
                    compiled = run_pipeline(step.compiled.program, opts)
                except ValueError:
                    continue
                steps = list(cm.steps)
                steps[k] = replace(step, compiled=compiled)
                out.append(({cg.graph.name: tuple(order)}, replace(cm, steps=steps)))
    return out


def _counts(cm: CompiledModel) -> tuple[int, int]:
    """(allowed combinations, orders pruned by the compiler) of ``cm``'s groups: every
    permutation of a group's indices that is not a lowerable order of its partial order graph
    is pruned."""
    allowed, pruned = 1, 0
    for step in cm.steps:
        if isinstance(step, CompilerStep):
            for cg in step.compiled.groups:
                allowed *= max(1, cg.group.lowerable_count)
                pruned += math.factorial(len(cg.group.pog.nodes)) - cg.group.lowerable_count
    return allowed, pruned


def rank_model(ir: ModelIR, *, fusions: tuple[str, ...] = ("unfused", "partial", "full"),
               per_group: int = 8, compile_kw: dict[str, Any] | None = None,
               estimate_kw: dict[str, Any] | None = None,
               simulate: Callable[[CompiledModel], int] | None = None, top: int = 0) -> Ranking:
    """Rank the configurations of ``ir`` by estimated cycles; ``simulate`` (compiled model ->
    cycles) runs the ``top`` best."""
    t0 = time.perf_counter()
    configs: list[Config] = []
    enumerated = pruned = built = 0
    for fusion in fusions:
        cm = compile_model(ir, fusion, **(compile_kw or {}))
        allowed, p = _counts(cm)
        enumerated += allowed
        pruned += p
        for orders, variant in _variants(cm, per_group):
            configs.append(Config(fusion, orders, estimate_model(variant, **(estimate_kw or {})), variant))
            built += 1
    configs.sort(key=lambda c: c.estimate.cycles)
    if simulate is not None:
        for c in configs[:top]:
            c.simulated = simulate(c.model)
    return Ranking(configs, enumerated, pruned, max(0, enumerated - built), time.perf_counter() - t0)
