"""Compiled programs for ``fuseflow-hw correlate --suite compiler``: every graph of a few
programs × fusion modes × datasets, run in sw_sim and RTL (``rtl_sim/correlate.py``,
registered in :mod:`fuseflow.suites`).

An entry is one graph of a compiled program with one dataset.  Its inputs are the program's
inputs plus the intermediates earlier graphs of the same program wrote (simulated by the
simulator the correlator passes in, as :func:`fuseflow.compiler.run_program` hands them on);
its expected result is the numpy value of the tensor it writes when that tensor is a statement
of the program (hoisted temporaries and graphs writing several tensors have none).  Entries of
one program and mode share a graph structure and so one Verilator build.  Matrices are 8-16
wide so builds stay cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial

import numpy as np

from ..compiler import CompiledProgram, compile_program
from ..compiler.catalog import gcn_layer, gcn_relu, gcn_two_layer, nested_matmul
from ..compiler.fusion import Fusion
from ..compiler.program import Program, einsum, maximum, minimum
from ..compiler.runner import graph_runs, reference_all
from ..ir.simulator import Simulator
from ..ir.tensor import COO, TensorData
from .entry import Case, SuiteEntry

__all__ = ["MODES", "PROGRAMS", "SuiteProgram", "compiled", "correlation_suite", "graph_case"]


@dataclass(frozen=True)
class SuiteProgram:
    build: Callable[[], Program]
    data: Callable[[int], dict[str, np.ndarray | TensorData]]
    modes: tuple[str, ...]  # names from MODES


# mode name -> (fusion, factored iteration)
# mode -> (fusion, factored iteration, locate pass); "full_scan": dense levels scanned and
# intersected instead of located (the compiler's locate=False)
MODES: dict[str, tuple[Fusion, bool, bool]] = {
    "full": (Fusion.FULL, True, True),
    "partial": (Fusion.PARTIAL, True, True),
    "unfused": (Fusion.UNFUSED, True, True),
    "full_global": (Fusion.FULL, False, True),
    "full_scan": (Fusion.FULL, True, False),
}


def _sparse(rng: np.random.Generator, shape: tuple[int, ...], density: float) -> np.ndarray:
    a = rng.integers(-3, 4, shape)
    a[rng.random(shape) >= density] = 0
    return a


def _spmm() -> Program:
    p = Program("spmm")
    A = p.tensor("A", (12, 12), "csr")
    X = p.tensor("X", (12, 6), "dense")
    p.output(p.let("T", einsum("ik,kj->ij", A, X)))
    return p


def _spmm_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"A": _sparse(rng, (12, 12), 0.25), "X": rng.integers(-3, 4, (12, 6))}


_nested = partial(nested_matmul, 12, 10, 12, 8)


def _nested_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"A": _sparse(rng, (12, 10), 0.25), "B": _sparse(rng, (10, 12), 0.25),
            "C": _sparse(rng, (12, 8), 0.3)}


_gcn = partial(gcn_layer, 12, 6, 4)


_gcn_relu = partial(gcn_relu, 12, 6, 4)


def _gcn_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"A": _sparse(rng, (12, 12), 0.25), "X": rng.integers(-3, 4, (12, 6)),
            "W": rng.integers(-3, 4, (6, 4)), "b": rng.integers(-6, 7, 4)}


_gcn2 = partial(gcn_two_layer, 10, 5, 4, 3)


def _gcn2_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = _sparse(rng, (10, 10), 0.3)
    a[3] = 0  # a node without neighbours: layer 2 sees relu(b1) recomputed nowhere for it
    return {"A": a, "X": _sparse(rng, (10, 5), 0.5), "W1": rng.integers(-3, 4, (4, 5)),
            "b1": rng.integers(-6, 7, 4), "W2": rng.integers(-3, 4, (3, 4)),
            "b2": rng.integers(-6, 7, 3)}


def _mul3() -> Program:
    p = Program("mul3")
    A = p.tensor("A", (6, 6, 6), "ccc")
    B = p.tensor("B", (6, 6, 6), "ccc")
    p.output(p.let("C", -(A * B) * 2))
    return p


def _mul3_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"A": _sparse(rng, (6, 6, 6), 0.3), "B": _sparse(rng, (6, 6, 6), 0.3)}


def _spmm_outer() -> Program:
    """Outer-product SpMM (A CSC, B CSR, order k->i->j): an order-2 accumulator (spacc2)."""
    p = Program("spmm_outer")
    A = p.tensor("A", (10, 10), "csc")
    B = p.tensor("B", (10, 8), "csr")
    p.output(p.let("C", einsum("ik,kj->ij", A, B), order="kij"))
    return p


def _spmm_outer_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = _sparse(rng, (10, 10), 0.25)
    a[:, 3] = 0  # a k without i coordinates
    return {"A": a, "B": _sparse(rng, (10, 8), 0.25)}


def _to_dense() -> Program:
    """Decompression: a DCSR matrix written dense (densified iteration over both indices)."""
    p = Program("to_dense")
    A = p.tensor("A", (8, 10), "dcsr")
    p.output(p.let("Y", A, fmt="dense"))
    return p


def _to_dense_data(seed: int) -> dict[str, np.ndarray]:
    return {"A": _sparse(np.random.default_rng(seed), (8, 10), 0.25)}


def _ops() -> Program:
    """Maximum, minimum, a scalar shift of a sparse operand (densified) and division by a
    dense tensor, in one graph."""
    p = Program("ops")
    A = p.tensor("A", (8, 10), "csr")
    B = p.tensor("B", (8, 10), "csr")
    D = p.tensor("D", (8, 10), "dense")
    p.output(p.let("Y", (maximum(A, B) + 2) / D), p.let("Z", minimum(A, B)))
    return p


def _ops_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    d = rng.integers(1, 4, (8, 10)) * rng.choice([-1, 1], (8, 10))
    return {"A": _sparse(rng, (8, 10), 0.3), "B": _sparse(rng, (8, 10), 0.3), "D": d}


def _row_max() -> Program:
    """Row maxima over every coordinate (implicit zeros included: densified) and a dot
    product of two sparse vectors (a 0-d result), one graph each."""
    p = Program("row_max")
    A = p.tensor("A", (8, 10), "csr")
    x = p.tensor("x", (10,), "compressed")
    y = p.tensor("y", (10,), "compressed")
    p.output(p.let("r", einsum("ij->i", A, reduce="max")), p.let("s", einsum("i,i->", x, y)))
    return p


def _row_max_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = _sparse(rng, (8, 10), 0.3)
    a[2] = 0
    a[5] = -np.abs(a[5])  # a row whose stored entries are all negative: its maximum is 0
    return {"A": a, "x": _sparse(rng, (10,), 0.5), "y": _sparse(rng, (10,), 0.5)}


def _coo_spmm() -> Program:
    """SpMM with A in COO (duplicates in the data: summed by the accumulator over the
    duplicate-summing index) times a dense X."""
    p = Program("coo_spmm")
    A = p.tensor("A", (10, 12), "coo")
    X = p.tensor("X", (12, 6), "dense")
    p.output(p.let("C", einsum("ik,kj->ij", A, X)))
    return p


def _coo_spmm_data(seed: int) -> dict[str, np.ndarray | TensorData]:
    rng = np.random.default_rng(seed)
    a = _sparse(rng, (10, 12), 0.25)
    a[4] = 0  # an empty row
    rows, cols = np.nonzero(a)
    vals = a[rows, cols]
    # every third entry stored as two (v - 2, 2), and two entries that cancel at (7, 0)
    split = np.arange(len(vals)) % 3 == 0
    rows = np.r_[rows, rows[split], 7, 7]
    cols = np.r_[cols, cols[split], 0, 0]
    vals = np.r_[np.where(split, vals - 2, vals), np.full(int(split.sum()), 2), 5, -5]
    order = np.lexsort((cols, rows))
    A = TensorData(a.shape, COO, [np.array([0, len(vals)], np.int64), None],
                   [rows[order].astype(np.int64), cols[order].astype(np.int64)], vals[order].astype(np.int64))
    return {"A": A, "X": rng.integers(-3, 4, (12, 6))}


PROGRAMS: dict[str, SuiteProgram] = {
    "spmm": SuiteProgram(_spmm, _spmm_data, ("full", "full_scan")),
    "nested_matmul": SuiteProgram(_nested, _nested_data, ("full", "unfused", "full_global",
                                                          "full_scan")),
    "gcn_layer": SuiteProgram(_gcn, _gcn_data, ("full", "partial", "unfused")),
    "gcn_relu": SuiteProgram(_gcn_relu, _gcn_data, ("full",)),
    "gcn_two_layer": SuiteProgram(_gcn2, _gcn2_data, ("full",)),
    "mul3": SuiteProgram(_mul3, _mul3_data, ("full",)),
    "spmm_outer": SuiteProgram(_spmm_outer, _spmm_outer_data, ("full",)),
    "to_dense": SuiteProgram(_to_dense, _to_dense_data, ("full",)),
    "ops": SuiteProgram(_ops, _ops_data, ("full",)),
    "row_max": SuiteProgram(_row_max, _row_max_data, ("full",)),
    "coo_spmm": SuiteProgram(_coo_spmm, _coo_spmm_data, ("full",)),
}
SEEDS = (1, 2)


@cache
def compiled(program: str, mode: str, par: tuple[tuple[str, int], ...] = ()) -> CompiledProgram:
    """The compiled program (cached: entries of one program, mode and lanes share it)."""
    fusion, factored, locate = MODES[mode]
    return compile_program(PROGRAMS[program].build(), fusion, factored=factored, locate=locate,
                           **({"par": dict(par)} if par else {}))


def graph_case(program: str, mode: str, graph: int, seed: int, simulate: Simulator,
               par: tuple[tuple[str, int], ...] = ()) -> Case:
    """Graph number ``graph`` of ``program`` in ``mode`` (with the parallel lanes ``par``), its
    inputs for dataset ``seed`` (the intermediates among them computed by ``simulate``) and the
    numpy value of the tensor it writes (``None`` if that is not a program statement)."""
    comp = compiled(program, mode, par)
    data = PROGRAMS[program].data(seed)
    for k, (g, inputs, _) in enumerate(graph_runs(comp, data, simulate=simulate)):
        if k == graph:
            outs = g.output_tensors()
            ref = reference_all(comp.program, data)
            expected = ref[outs[0]] if len(outs) == 1 and outs[0] in ref else None
            return g, inputs, expected
    raise IndexError(f"{program} ({mode}) has {len(comp.graphs)} graphs, not {graph + 1}")


def correlation_suite() -> list[SuiteEntry]:
    out = []
    for name, prog in PROGRAMS.items():
        for mode in prog.modes:
            for k in range(len(compiled(name, mode).graphs)):
                for seed in SEEDS:
                    out.append(SuiteEntry(f"{name}_{mode}_g{k}_s{seed}", name,
                                          partial(graph_case, name, mode, k, seed)))
    return out
