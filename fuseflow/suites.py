"""The named correlation suites: lists of :class:`~fuseflow.simulation.SuiteEntry` (a graph, its
inputs and the expected value), plain data that ``rtl_sim.correlate`` runs in sw_sim and RTL.

* ``spine`` — the built-in kernels (SpMV, SpMM ×2, add, mul) at two sizes and two densities;
* ``compiler`` — every graph of a few compiled programs (:mod:`fuseflow.compiler.suite`);
* ``ml`` — GCN / GraphSAGE layers and BigBird pieces (:mod:`fuseflow.models.suite`);
* ``all`` — the three in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from .compiler.suite import correlation_suite as compiler_suite
from .kernels import example
from .models.suite import correlation_suite as ml_suite
from .simulation import Case, Simulator, SuiteEntry

__all__ = ["SUITES", "spine_entry", "spine_suite", "suite"]


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


SUITES: dict[str, Callable[[], list[SuiteEntry]]] = {
    "spine": spine_suite,
    "compiler": compiler_suite,
    "ml": ml_suite,
}


def suite(name: str = "all") -> list[SuiteEntry]:
    """The entries of suite ``name`` (a key of :data:`SUITES`, or ``all``)."""
    if name == "all":
        return [e for make in SUITES.values() for e in make()]
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; suites: {sorted(SUITES) + ['all']}")
    return SUITES[name]()
