"""The named correlation suites: lists of :class:`~fuseflow.ir.simulator.SuiteEntry` (a graph, its
inputs and the expected value), plain data that ``rtl_sim.correlate`` runs in sw_sim and RTL.

* ``spine`` — the built-in kernels (SpMV, SpMM ×2, add, mul) at two sizes and two densities;
* ``variants`` — built-in kernels with coordinate skipping or double-buffered accumulators, and
  block-sparse SpMM with vector streams (``bspmm``, blocks of 2 to 16, lanes = block or less);
* ``compiler`` — every graph of a few compiled programs (:mod:`fuseflow.suites.compiler`);
* ``ml`` — GCN / GraphSAGE layers and BigBird pieces (:mod:`fuseflow.suites.models`);
* ``parallel`` — built-in kernels with parallel lanes (factors 2 and 4, nested, lane-local
  sparse accumulators merged by unions), and outer-product SpMM with lane-local order-2
  accumulators merged by ``merge2`` trees;
* ``all`` — all of them in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..compiler.passes.fifo import set_accumulator_buffers
from ..compiler.passes.par import parallelize
from ..compiler.passes.skip import enable_skipping
from ..ir.simulator import Simulator
from ..kernels import example
from .compiler import correlation_suite as compiler_suite
from .compiler import graph_case
from .entry import Case, SuiteEntry
from .models import correlation_suite as ml_suite

__all__ = ["SUITES", "spine_entry", "spine_suite", "suite", "with_par"]


def _spine_case(kernel: str, n: int, density: float, seed: int, simulate: Simulator) -> Case:
    g, data, _, expected = example(kernel, n, seed, density)
    return g, data, expected


def spine_entry(name: str, group: str, kernel: str, n: int, density: float, seed: int) -> SuiteEntry:
    """Built-in ``kernel`` at size ``n`` on seeded random operands of ``density``."""
    return SuiteEntry(name, group, partial(_spine_case, kernel, n, density, seed))


def spine_suite() -> list[SuiteEntry]:
    groups = {"spmv": "SpMV", "spmm_dense": "SpMM", "spmm_csr": "SpMM", "add": "elementwise",
              "mul": "elementwise"}
    return [spine_entry(f"{kernel}_{n}_d{int(density * 100)}", group, kernel, n, density, 11)
            for kernel, group in groups.items() for n in (32, 64) for density in (0.05, 0.2)]


def _variant_case(kernel: str, variant: str, n: int, density: float, seed: int,
                  simulate: Simulator) -> Case:
    g, data, expected = _spine_case(kernel, n, density, seed, simulate)
    if variant == "skip":
        enable_skipping(g, in_place=True)
    else:
        set_accumulator_buffers(g, 2)
    return g, data, expected


def _blocked_case(block: int, lanes: int, n: int, density: float, seed: int, simulate: Simulator) -> Case:
    g, data, _, expected = example("bspmm", n, seed, density, block=block, lanes=lanes)
    return g, data, expected


# (block, lanes) of the block-sparse SpMM entries: whole blocks as vectors, and blocks split
BLOCKED_CASES = ((2, 2), (4, 4), (8, 8), (16, 16), (8, 4), (16, 4))


def variant_suite() -> list[SuiteEntry]:
    """Built-in kernels with coordinate skipping (inner-product SpMSpM, element-wise multiply),
    with double-buffered accumulators (SpMM, B CSR), and block-sparse SpMM whose blocks stream
    as vectors (:func:`fuseflow.kernels.bspmm`)."""
    variants = (("spmspm_inner", "skip", "skipping"), ("mul", "skip", "skipping"),
                ("spmm_csr", "buffers2", "double-buffered"))
    return [SuiteEntry(f"{kernel}_{variant}_{n}_d{int(density * 100)}", group,
                       partial(_variant_case, kernel, variant, n, density, 11))
            for kernel, variant, group in variants for n in (16, 32) for density in (0.1, 0.3)] + [
        SuiteEntry(f"bspmm_b{block}_l{lanes}_32_d30", "blocked", partial(_blocked_case, block, lanes, 32, 0.3, 11))
        for block, lanes in BLOCKED_CASES]


def _parallel_case(kernel: str, par: tuple[tuple[str, int], ...], n: int, density: float,
                   seed: int, simulate: Simulator) -> Case:
    g, data, expected = _spine_case(kernel, n, density, seed, simulate)
    parallelize(g, dict(par))
    return g, data, expected


PARALLEL_CASES = (("spmv", (("i", 2),)), ("spmv", (("i", 4),)), ("spmm_csr", (("i", 2),)),
                  ("spmm_dense", (("i", 4),)), ("spmm_dense", (("k", 2),)), ("mul", (("i", 4),)),
                  ("spmspm_inner", (("i", 2), ("j", 2))), ("spmv", (("j", 2),)))


# outer-product SpMM (k -> i -> j, spacc2): its reduced index k (u0) split 2 and 4 ways (the
# lanes' partial matrices merged by merge2 trees), and its row index i (each lane's own rows)
PARALLEL_ORDER2 = ((("u0", 2),), (("u0", 4),), (("i", 2),))


def parallel_suite() -> list[SuiteEntry]:
    """Built-in kernels with ``par``: rows split 2 and 4 ways, a reduced index (partial sums
    combined by an adder tree, a sparse accumulator's lanes merged by a union), and a nested
    split; outer-product SpMM with lane-local order-2 accumulators."""
    return [SuiteEntry(f"{kernel}_{'_'.join(f'{i}{f}' for i, f in par)}_{n}", "parallel",
                       partial(_parallel_case, kernel, par, n, 0.15, 11))
            for kernel, par in PARALLEL_CASES for n in (16,)] + [
        SuiteEntry(f"spmm_outer_{'_'.join(f'{i}{f}' for i, f in par)}_s1", "parallel",
                   partial(graph_case, "spmm_outer", "full", 0, 1, par=par)) for par in PARALLEL_ORDER2]


SUITES: dict[str, Callable[[], list[SuiteEntry]]] = {
    "spine": spine_suite,
    "variants": variant_suite,
    "compiler": compiler_suite,
    "ml": ml_suite,
    "parallel": parallel_suite,
}


def _applicable(graph, par: dict[str, int]) -> dict[str, int]:
    """The keys of ``par`` (``INDEX`` or ``GRAPH:INDEX``) that ``graph`` iterates."""
    return {k: f for k, f in par.items()
            if k.rpartition(":")[0] in ("", graph.name) and k.rpartition(":")[2] in graph.indices}


def _par_case(make, par: tuple[tuple[str, int], ...], simulate: Simulator) -> Case:
    g, data, expected = make(simulate)
    parallelize(g, _applicable(g, dict(par)))
    return g, data, expected


def with_par(entries: list[SuiteEntry], par: dict[str, int],
             simulate: Simulator) -> tuple[list[SuiteEntry], list[str]]:
    """The entries whose graphs iterate an index of ``par``, with those lanes (names suffixed
    ``_par_<index><factor>``), and the names of the entries left out (no such index)."""
    tag = "_par_" + "_".join(f"{k.replace(':', '-')}{f}" for k, f in par.items())
    kept, left = [], []
    for e in entries:
        if _applicable(e.make(simulate)[0], par):
            kept.append(SuiteEntry(e.name + tag, e.model,
                                   partial(_par_case, e.make, tuple(par.items()))))
        else:
            left.append(e.name)
    return kept, left


def suite(name: str = "all") -> list[SuiteEntry]:
    """The entries of suite ``name`` (a key of :data:`SUITES`, or ``all``)."""
    if name == "all":
        return [e for make in SUITES.values() for e in make()]
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; suites: {sorted(SUITES) + ['all']}")
    return SUITES[name]()
