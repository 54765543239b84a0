"""``--par auto=L``: the parallel factors the estimate predicts fastest within a lane budget.

The candidates of one graph are every split of at most ``L`` lanes into powers of two over at
most two of the indices the graph iterates: no split (one lane), ``i=2`` … ``i=L`` on each
index, and ``i=a, j=b`` with ``a·b ≤ L`` on each pair (fewer lanes than the budget are
candidates: the best may not use them all).  Each candidate is applied to a copy of the graph
with the ``par`` pass (:func:`~fuseflow.compiler.passes.par.parallelize`); a split it refuses
drops out with its reason.  The rest are estimated (``estimate(graph) -> cycles``, e.g.
:func:`fuseflow.cost.estimate_graph` under the command's memory; no simulation) and the fewest
estimated cycles wins; ties go to fewer lanes, then to the earlier candidate.

A model's graphs run one after another, so each is searched on its own
(:func:`choose_par_graphs`): the pick of graph ``G`` is written ``G:INDEX=N``, and the totals are
the sums over the graphs.  A pure function of the graphs, the budget and the estimate: a
design-space search over boards can call it with its own estimate.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from ..compiler.passes.par import ParallelError, parallelize
from ..ir.primitives.parallel import MAX_LANES
from ..ir.samml import Graph
from ..schedule import DEFAULT_PAR_BUDGET, check_par_budget

__all__ = ["DEFAULT_BUDGET", "MAX_LANES", "GraphParChoice", "ParChoice", "candidate_pars",
           "choose_par", "choose_par_graphs", "par_text", "split_graphs"]

DEFAULT_BUDGET = DEFAULT_PAR_BUDGET  # --par auto without =L


def par_text(par: Mapping[str, int]) -> str:
    """``i=4, j=4`` (``1 lane`` for no split)."""
    return ", ".join(f"{i}={f}" for i, f in par.items()) or "1 lane"


def candidate_pars(indices: Iterable[str], budget: int) -> list[dict[str, int]]:
    """Every split of at most ``budget`` lanes into powers of two over at most two of
    ``indices``: ``{}`` first, then one index, then pairs (fewest lanes first within each)."""
    names = sorted(set(indices))
    powers = [1 << k for k in range(1, int(math.log2(budget)) + 1)] if budget > 1 else []
    out: list[dict[str, int]] = [{}]
    out += [{v: f} for f in powers for v in names]
    pairs = [{v: a, w: b} for v, w in combinations(names, 2) for a in powers for b in powers if a * b <= budget]
    out += sorted(pairs, key=_lanes)
    return out


def _lanes(par: Mapping[str, int]) -> int:
    return math.prod(par.values()) if par else 1


@dataclass
class GraphParChoice:
    """One graph's search: the estimate of every legal candidate and the pick (``chosen``)."""

    graph: str
    budget: int
    chosen: dict[str, int] = field(default_factory=dict)
    cycles: dict[str, float] = field(default_factory=dict)  # par_text(candidate) -> estimated cycles
    pars: dict[str, dict[str, int]] = field(default_factory=dict)  # par_text(candidate) -> candidate
    rejected: dict[str, str] = field(default_factory=dict)  # par_text(candidate) -> why par refused it

    @property
    def estimated_cycles(self) -> float:
        return self.cycles[par_text(self.chosen)]

    @property
    def baseline_cycles(self) -> float:
        return self.cycles[par_text({})]

    def ranked(self) -> list[str]:
        """The legal candidates' keys, fewest estimated cycles first (ties: fewer lanes)."""
        order = list(self.cycles)
        return sorted(order, key=lambda k: (self.cycles[k], _lanes(self.pars[k]), order.index(k)))


def split_graphs(graph: Graph, budget: int, *, resize: bool = True,
                 errors: tuple[type[BaseException], ...] = (ParallelError,)
                 ) -> Iterator[tuple[dict[str, int], Graph | None, BaseException | None]]:
    """Every candidate split of ``graph`` within ``budget`` lanes, built by the ``par`` pass on
    a copy: ``(par, the split graph, None)``, or ``(par, None, the refusal)`` where the pass
    refuses it (``errors``)."""
    for par in candidate_pars(graph.indices, budget):
        g = copy.deepcopy(graph)
        try:
            parallelize(g, par, resize=resize)
        except errors as exc:
            yield par, None, exc
            continue
        yield par, g, None


def choose_par(graph: Graph, budget: int, estimate: Callable[[Graph], float], *,
               errors: tuple[type[BaseException], ...] = (ParallelError,)) -> GraphParChoice:
    """Estimate every candidate split of ``graph`` within ``budget`` lanes (on copies; ``graph``
    is not changed) and pick the fewest estimated cycles.  ``errors``: what makes a candidate
    drop out (the ``par`` pass's refusals)."""
    check_par_budget(budget)
    choice = GraphParChoice(graph.name, budget)
    # FIFO depths: no part of the estimate, the slow part of the pass
    for par, g, exc in split_graphs(graph, budget, resize=False, errors=errors):
        key = par_text(par)
        if g is None:
            choice.rejected[key] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            continue
        choice.pars[key] = par
        choice.cycles[key] = float(estimate(g))
    choice.chosen = dict(choice.pars[choice.ranked()[0]])
    return choice


@dataclass
class ParChoice:
    """The pick of ``--par auto`` over one or more graphs (a model's: each on its own)."""

    budget: int
    graphs: list[GraphParChoice]
    qualified: bool = False  # the keys name the graph (GRAPH:INDEX): a model's graphs

    @property
    def chosen(self) -> dict[str, int]:
        """The ``--par`` entries the pick stands for (``GRAPH:INDEX`` keys for a model's graphs)."""
        out = {}
        for g in self.graphs:
            out.update({(f"{g.graph}:{i}" if self.qualified else i): f for i, f in g.chosen.items()})
        return out

    @property
    def estimated_cycles(self) -> float:
        return sum(g.estimated_cycles for g in self.graphs)

    @property
    def baseline_cycles(self) -> float:
        return sum(g.baseline_cycles for g in self.graphs)

    @property
    def speedup(self) -> float:
        est = self.estimated_cycles
        return self.baseline_cycles / est if est > 0 else 1.0

    def _runner_up(self) -> str:
        """``next: i=16 1,400`` for one graph (the second-fewest candidate), else ''."""
        if len(self.graphs) != 1:
            return ""
        ranked = self.graphs[0].ranked()
        if len(ranked) < 2:
            return ""
        key = ranked[1]
        return f"; next: {key} {self.graphs[0].cycles[key]:,.0f}"

    def reason(self) -> str:
        """One line: the budget, the pick, its estimated cycles against one lane, the runner-up."""
        return (f"({self.budget} lanes) -> {par_text(self.chosen)}: {self.estimated_cycles:,.0f} estimated "
                f"cycles ({self.speedup:.1f}x of 1 lane){self._runner_up()}")

    def explain(self) -> str:
        """Lines for ``--explain``: per graph the pick, its predicted speedup and the best few."""
        head = (f"par auto, {self.budget} lanes: {par_text(self.chosen)}; predicted speedup {self.speedup:.2f}x "
                f"({self.baseline_cycles:,.0f} -> {self.estimated_cycles:,.0f} estimated cycles)")
        lines = [head]
        for g in self.graphs:
            top = ", ".join(f"{k} {g.cycles[k]:,.0f}" for k in g.ranked()[:4])
            lines.append(f"  graph {g.graph}: {par_text(g.chosen)} ({len(g.cycles)} legal splits, "
                         f"{len(g.rejected)} refused by par; best: {top})")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """Stable field names: budget, chosen {index: factor}, estimated_cycles, baseline_cycles,
        candidates [{graph, par, lanes, estimated_cycles} or {graph, par, refused}]."""
        cands: list[dict[str, Any]] = []
        for g in self.graphs:
            cands += [{"graph": g.graph, "par": g.pars[k], "lanes": _lanes(g.pars[k]),
                       "estimated_cycles": round(g.cycles[k])} for k in g.ranked()]
            cands += [{"graph": g.graph, "par": k, "refused": why} for k, why in g.rejected.items()]
        return {"budget": self.budget, "chosen": self.chosen, "estimated_cycles": round(self.estimated_cycles),
                "baseline_cycles": round(self.baseline_cycles), "speedup": round(self.speedup, 3),
                "candidates": cands}


def choose_par_graphs(graphs: Iterable[Graph], budget: int, estimate: Callable[[Graph], float], *,
                      qualified: bool = True,
                      errors: tuple[type[BaseException], ...] = (ParallelError,)) -> ParChoice:
    """:func:`choose_par` on each graph (they run one after another, so each is chosen on its
    own).  ``estimate(graph)``: the parallelized copy keeps the graph's name, by which the
    estimate finds its inputs.  ``qualified``: write the pick as ``GRAPH:INDEX`` (a model)."""
    return ParChoice(budget, [choose_par(g, budget, estimate, errors=errors) for g in graphs], qualified)
