"""Cycles vs nonzeros: does the generated hardware do work in proportion to the nonzeros?

Each kernel is compiled from its Einsum program and run in sw_sim on seeded random matrices
(uniform, or power-law row lengths) over a grid of sizes and densities, with the compiler's
``locate`` pass on ("after") and off ("before": dense levels are scanned and intersected
coordinate by coordinate).  Values are checked against scipy on every point.  Printed per
point: nonzeros, the ideal (the work the nonzeros and fibres need, below), cycles after,
cycles / ideal, cycles before and before / after, and for inner-product SpMSpM the cycles
with coordinate skipping (``skip=True``).

Kernels (n×n matrices, J = 16 dense columns):

* ``spmv``        y_i = A_ij x_j, A CSR, x dense.         ideal = nnz(A) + n
* ``spmm``        T_ij = A_ik X_kj, X dense, order ikj.   ideal = nnz(A)·J + n
* ``spmspm_ikj``  C = A·B, both CSR, Gustavson ikj.       ideal = Σ_(i,k)∈A nnz(B_k) + nnz(A) + n
* ``spmspm_ijk``  C_ij = Σ_k A_ik B_kj, B CSC, inner products.
                  ideal = Σ_i,j min(nnz(A_i), nnz(B_j)) + n²  (the shorter fibre of each pair)
* ``gcn_agg``     H'_ik = Σ_j A_ij H_jk: the GCN aggregation on a graph's adjacency (uniform:
                  Erdős–Rényi; power-law: Barabási–Albert), H dense, J = 16.  ideal as spmm.

The issue's bounds are checked with ``--check`` (exit status 1 if any point misses one):
SpMV cycles ≤ 1.2·(nnz + n) + 64; SpMM and GCN aggregation ≤ 1.2·nnz·J + n·J + 64.  The test
suite runs this benchmark in a reduced form (``tests/test_bench_nnz.py``).

Points whose work (ideal, or n²·J for "before") exceeds ``--max-work`` are left out (sw_sim is a
Python model: about 1–2 M node-cycles per second).

    python bench/nnz_scaling.py                      # default grid, table
    python bench/nnz_scaling.py --png docs/nnz_scaling.png --json nnz.json --check
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuseflow.compiler import Program, compile_program, einsum, run_program
from fuseflow.compiler import parse_format as _fmt
from fuseflow.models.datasets import power_law, uniform_random
from fuseflow.ir.tensor import TensorData
from fuseflow_cli.cmd_common import table
from sw_sim import run_graph

J = 16
KERNELS = ("spmv", "spmm", "spmspm_ikj", "spmspm_ijk", "gcn_agg")
PATTERNS = ("uniform", "powerlaw")
DEFAULT_SIZES = {"spmv": (256, 1024, 4096), "spmm": (256, 1024, 4096),
                 "spmspm_ikj": (256, 1024), "spmspm_ijk": (128, 256), "gcn_agg": (256, 1024, 4096)}
DEFAULT_DENSITIES = (0.001, 0.01, 0.05, 0.2, 0.5)


# ----------------------------------------------------------------------------- data
def random_matrix(n: int, m: int, density: float, pattern: str, seed: int) -> sp.csr_matrix:
    """Integer values 1..4.  ``uniform``: every entry non-zero with probability ``density``;
    ``powerlaw``: row lengths ∝ rank^-1 (a few long rows, many short ones; rows in random
    order; capped at ``m``), about the same number of non-zeros, columns uniform in a row."""
    rng = np.random.default_rng(seed)
    target = max(1, round(density * n * m))
    if pattern == "uniform":
        a = sp.random(n, m, density=density, format="csr", random_state=rng,
                      data_rvs=lambda k: rng.integers(1, 5, k))
    else:
        weights = 1.0 / np.arange(1, n + 1)
        lo, hi = 0.0, float(target) * n  # scale so that the capped lengths sum to the target
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.minimum(m, np.round(weights * mid)).sum() < target else (lo, mid)
        lengths = np.minimum(m, np.round(weights * hi)).astype(int)
        rng.shuffle(lengths)
        rows = np.repeat(np.arange(n), lengths)
        cols = np.concatenate([rng.choice(m, k, replace=False) for k in lengths if k]) \
            if lengths.sum() else np.zeros(0, int)
        a = sp.csr_matrix((rng.integers(1, 5, len(rows)), (rows, cols)), shape=(n, m))
    a.sort_indices()
    return a.astype(np.int64)


def graph_adjacency(n: int, density: float, pattern: str, seed: int) -> sp.csr_matrix:
    """A graph's 0/1 adjacency with about ``density·n²`` directed edges (self loops added)."""
    deg = max(1.0, density * n)
    g = (uniform_random(n, deg, features=1, seed=seed) if pattern == "uniform"
         else power_law(n, max(1, round(deg / 2)), features=1, seed=seed))
    return sp.csr_matrix(g.adjacency.astype(np.int64) + sp.eye_array(n, dtype=np.int64, format="csr"))


# ----------------------------------------------------------------------------- kernels
@dataclass(frozen=True)
class Kernel:
    program: Callable[[int], Program]
    operands: Callable[[int, float, str, int], dict[str, sp.spmatrix | np.ndarray]]
    reference: Callable[[dict], np.ndarray]
    ideal: Callable[[dict], int]
    bound: Callable[[dict], float] | None  # the cycle bound, if it sets one
    output: str


def _spmv(n: int) -> Program:
    p = Program("spmv")
    p.output(p.let("y", einsum("ij,j->i", p.tensor("A", (n, n), "csr"), p.tensor("x", (n,), "dense"))))
    return p


def _spmm(n: int) -> Program:
    p = Program("spmm")
    A, X = p.tensor("A", (n, n), "csr"), p.tensor("X", (n, J), "dense")
    p.output(p.let("T", einsum("ik,kj->ij", A, X), order="ikj"))
    return p


def _spmspm(order: str, b_format: str) -> Callable[[int], Program]:
    def build(n: int) -> Program:
        p = Program(f"spmspm_{order}")
        A, B = p.tensor("A", (n, n), "csr"), p.tensor("B", (n, n), b_format)
        p.output(p.let("C", einsum("ik,kj->ij", A, B), order=order))
        return p
    return build


def _rows_nnz(a: sp.csr_matrix) -> np.ndarray:
    return np.diff(a.indptr)


def _ikj_work(d: dict) -> int:
    a, b = d["A"], d["B"]
    return int(_rows_nnz(b)[a.indices].sum() + a.nnz + a.shape[0])


def _ijk_work(d: dict) -> int:
    ra, cb = _rows_nnz(d["A"]), np.diff(d["B"].tocsc().indptr)
    return int(np.minimum.outer(ra, cb).sum() + ra.size * cb.size)


def _dense_x(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + 1).integers(-3, 4, n)


def _dense_X(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + 1).integers(-3, 4, (n, J))


KERNEL_SPECS: dict[str, Kernel] = {
    "spmv": Kernel(_spmv, lambda n, d, p, s: {"A": random_matrix(n, n, d, p, s), "x": _dense_x(n, s)},
                   lambda d: d["A"] @ d["x"], lambda d: d["A"].nnz + d["A"].shape[0],
                   lambda d: 1.2 * (d["A"].nnz + d["A"].shape[0]) + 64, "y"),
    "spmm": Kernel(_spmm, lambda n, d, p, s: {"A": random_matrix(n, n, d, p, s), "X": _dense_X(n, s)},
                   lambda d: d["A"] @ d["X"], lambda d: d["A"].nnz * J + d["A"].shape[0],
                   lambda d: 1.2 * d["A"].nnz * J + d["A"].shape[0] * J + 64, "T"),
    "spmspm_ikj": Kernel(_spmspm("ikj", "csr"),
                         lambda n, d, p, s: {"A": random_matrix(n, n, d, p, s),
                                             "B": random_matrix(n, n, d, p, s + 7)},
                         lambda d: (d["A"] @ d["B"]).toarray(), _ikj_work, None, "C"),
    "spmspm_ijk": Kernel(_spmspm("ijk", "csc"),
                         lambda n, d, p, s: {"A": random_matrix(n, n, d, p, s),
                                             "B": random_matrix(n, n, d, p, s + 7)},
                         lambda d: (d["A"] @ d["B"]).toarray(), _ijk_work, None, "C"),
    "gcn_agg": Kernel(_spmm, lambda n, d, p, s: {"A": graph_adjacency(n, d, p, s), "X": _dense_X(n, s)},
                      lambda d: d["A"] @ d["X"], lambda d: d["A"].nnz * J + d["A"].shape[0],
                      lambda d: 1.2 * d["A"].nnz * J + d["A"].shape[0] * J + 64, "T"),
}


# ----------------------------------------------------------------------------- running
@dataclass
class Point:
    kernel: str
    pattern: str
    n: int
    density: float
    nnz: int
    ideal: int
    cycles: int
    cycles_before: int | None
    bound: float | None
    seconds: float
    cycles_skip: int | None = None  # with coordinate skipping (inner-product SpMSpM only)

    @property
    def within_bound(self) -> bool:
        return self.bound is None or self.cycles <= self.bound


def _inputs(program: Program, ops: dict) -> dict:
    out = {}
    for name, v in ops.items():
        fmt = _fmt(name, program.decls[name].fmt, len(program.decls[name].shape))
        out[name] = TensorData.from_scipy(v, fmt) if sp.issparse(v) else v
    return out


def run_point(kernel: str, n: int, density: float, pattern: str, seed: int = 0,
              before: bool = True) -> Point:
    """Compile and simulate one point (and its "before" unless ``before`` is False); raises
    AssertionError if a result differs from scipy's."""
    k = KERNEL_SPECS[kernel]
    ops = k.operands(n, density, pattern, seed)
    program = k.program(n)
    data = _inputs(program, ops)
    want = np.asarray(k.reference(ops))
    t0 = time.perf_counter()
    cycles = []
    for locate in ((True, False) if before else (True,)):
        res = run_program(compile_program(program, locate=locate), data, simulate=run_graph)
        got = res.dense(k.output)
        if not np.array_equal(got, want):
            raise AssertionError(f"{kernel} n={n} density={density} {pattern} locate={locate}: "
                                 "values differ from scipy")
        cycles.append(res.total_cycles)
    skipped = None
    if kernel == "spmspm_ijk":
        res = run_program(compile_program(program, skip=True), data, simulate=run_graph)
        if not np.array_equal(res.dense(k.output), want):
            raise AssertionError(f"{kernel} n={n} density={density} {pattern} skip: values differ")
        skipped = res.total_cycles
    a = ops["A"]
    return Point(kernel, pattern, n, density, int(a.nnz), k.ideal(ops), cycles[0],
                 cycles[1] if before else None, k.bound(ops) if k.bound else None,
                 time.perf_counter() - t0, skipped)


def _work(kernel: str, n: int, density: float) -> tuple[float, float]:
    """Predicted (after, before) work of a point, for the --max-work cut."""
    nnz = density * n * n
    if kernel in ("spmm", "gcn_agg"):
        return nnz * J, n * n * J
    if kernel == "spmv":
        return nnz + n, n * n
    if kernel == "spmspm_ikj":
        return nnz * density * n + nnz, nnz * density * n + n * n
    return n * n * (1 + 2 * density * n), n * n * (1 + 2 * density * n)


def sweep(kernels, patterns, densities, sizes: dict[str, tuple[int, ...]], max_work: float,
          seed: int = 0, log=print) -> list[Point]:
    points = []
    for kernel in kernels:
        for pattern in patterns:
            for n in sizes[kernel]:
                for d in densities:
                    after, before = _work(kernel, n, d)
                    if after > max_work or d * n * n < 1:
                        continue
                    p = run_point(kernel, n, d, pattern, seed, before=before <= max_work)
                    points.append(p)
                    log(f"  {kernel} {pattern} n={n} density={d}: {p.cycles} cycles "
                        f"({p.seconds:.1f} s)")
    return points


def render_table(points: list[Point]) -> str:
    rows = []
    for p in points:
        before = f"{p.cycles_before}" if p.cycles_before is not None else "-"
        speed = f"{p.cycles_before / p.cycles:.1f}×" if p.cycles_before else "-"
        bound = "-" if p.bound is None else ("ok" if p.within_bound else f"MISSED ({p.bound:.0f})")
        skip = f"{p.cycles_skip} ({p.cycles / p.cycles_skip:.2f}×)" if p.cycles_skip else "-"
        rows.append([p.kernel, p.pattern, p.n, f"{p.density:g}", p.nnz, p.ideal, p.cycles,
                     f"{p.cycles / p.ideal:.2f}", before, speed, skip, bound])
    return table(rows, ["kernel", "data", "n", "density", "nnz", "ideal", "cycles",
                        "cycles/ideal", "before", "before/after", "with --skip", "bound"])


def plot(points: list[Point], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kernels = list(dict.fromkeys(p.kernel for p in points))
    fig, axes = plt.subplots(1, len(kernels), figsize=(4.2 * len(kernels), 4), squeeze=False)
    for ax, kernel in zip(axes[0], kernels):
        for pattern, color in zip(PATTERNS, ("tab:blue", "tab:orange")):
            ps = sorted((p for p in points if p.kernel == kernel and p.pattern == pattern),
                        key=lambda p: p.ideal)
            if not ps:
                continue
            ax.loglog([p.ideal for p in ps], [p.cycles for p in ps], "o", color=color,
                      label=f"{pattern}: locate")
            bs = [p for p in ps if p.cycles_before]
            ax.loglog([p.ideal for p in bs], [p.cycles_before for p in bs], "x", color=color,
                      label=f"{pattern}: scan+intersect")
        lo = min(p.ideal for p in points if p.kernel == kernel)
        hi = max(max(p.ideal, p.cycles_before or 0) for p in points if p.kernel == kernel)
        ax.loglog([lo, hi], [lo, hi], "k--", lw=1, label="ideal (cycles = work)")
        ax.set_title(kernel)
        ax.set_xlabel("ideal work (nonzeros + fibres)")
        ax.set_ylabel("sw_sim cycles")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--patterns", default=",".join(PATTERNS))
    ap.add_argument("--densities", default=",".join(map(str, DEFAULT_DENSITIES)))
    ap.add_argument("--sizes", help="n for every kernel (comma-separated); default per kernel")
    ap.add_argument("--max-work", type=float, default=2e6,
                    help="leave out points (or their 'before') predicted to need more cycles")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png", help="write the cycles-vs-work plot here")
    ap.add_argument("--json", help="write the points here")
    ap.add_argument("--check", action="store_true", help="exit 1 if a point misses its bound")
    args = ap.parse_args(argv)
    kernels = [k for k in args.kernels.split(",") if k]
    unknown = [k for k in kernels if k not in KERNEL_SPECS]
    if unknown:
        ap.error(f"unknown kernel(s) {', '.join(unknown)}: choose from {', '.join(KERNELS)}")
    patterns = [p for p in args.patterns.split(",") if p]
    if any(p not in PATTERNS for p in patterns):
        ap.error(f"--patterns: choose from {', '.join(PATTERNS)}")
    densities = [float(d) for d in args.densities.split(",") if d]
    sizes = ({k: tuple(int(s) for s in args.sizes.split(",")) for k in kernels} if args.sizes
             else DEFAULT_SIZES)
    points = sweep(kernels, patterns, densities, sizes, args.max_work, args.seed,
                   log=lambda s: print(s, file=sys.stderr, flush=True))
    print(render_table(points))
    if args.png:
        plot(points, args.png)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(p) for p in points], indent=1))
    missed = [p for p in points if not p.within_bound]
    for p in missed:
        print(f"MISSED: {p.kernel} {p.pattern} n={p.n} density={p.density}: {p.cycles} cycles "
              f"> bound {p.bound:.0f}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
