"""RTL simulation speed: RTL cycles per second of the two graph runners (rtl_sim/native.py, the
compiled harness, and the cocotb testbench rtl_sim/tb_graph.py) on the same Verilated design.

Workloads, each at growing sizes (random integer data, seed 0):

* ``spmv``: the built-in SpMV kernel, B CSR (N × N, 10 % dense) times a dense vector.
* ``spmm_csr``: the built-in SpMM kernel, CSR × CSR (N × N, 10 % dense).
* ``gcn``: one GCN layer ``A·X·W + b`` (A: N × N CSR adjacency, about 8 neighbours a node plus
  the diagonal; X: N × 16, W: 16 × 8, b: 8, dense) compiled with partial fusion into one graph.

Every design is built with the crd/ref width it needs (``fuseflow-hw rtl``'s ``--cw auto``) and
the ideal memory.  Build times are reported apart (the seconds recorded when the build was made,
so a warm cache still shows them); the run figures are warm: the median wall time of
``run_graph(..., runner=...)`` over ``--repeat`` runs (cocotb: one run), from the call to the
decoded outputs, load and read-back of the arrays included.  ``cycles`` is the RTL cycle counter
(start to done); cycles/s = cycles / wall seconds.  Both runners must agree with each other and
with sw_sim on cycles and outputs, or the script stops.  ``--json`` prints the rows; ``--png``
plots seconds per run against the operands' non-zeros for sw_sim and both runners.  sw_sim (the compiled cycle model, median of ``--repeat`` runs) runs
the same graph and data, for comparison.

    python bench/rtl_speed.py [--only spmm_csr] [--sizes 64,128,256] [--runners native,cocotb]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuseflow.compiler import Program, compile_program, einsum
from fuseflow.kernels import example
from fuseflow.ir.samml import Graph
from fuseflow.ir.tensor import TensorData
from fuseflow_cli.cmd_common import table
from hw.elaborate import HwConfig, crd_width_needed
from rtl_sim.api import RUNNERS, graph_build, run_graph
from sw_sim import run_graph as sw_run_graph

WORKLOADS = ("spmv", "spmm_csr", "gcn")


def _gcn(n: int, seed: int = 0) -> tuple[Graph, dict[str, TensorData], np.ndarray]:
    rng = np.random.default_rng(seed)
    a = (rng.random((n, n)) < 8 / n).astype(np.int64) + np.eye(n, dtype=np.int64)
    a = np.minimum(a, 1)
    x = rng.integers(-3, 4, size=(n, 16))
    w = rng.integers(-2, 3, size=(16, 8))
    b = rng.integers(-2, 3, size=8)
    p = Program(f"gcn_layer_{n}")
    A, X = p.tensor("A", a.shape, "csr"), p.tensor("X", x.shape, "dense")
    W, B = p.tensor("W", w.shape, "dense"), p.tensor("b", b.shape, "dense")
    T1 = p.let("T1", einsum("ik,kj->ij", A, X))
    T2 = p.let("T2", einsum("ij,jl->il", T1, W))
    Y = p.let("Y", T2 + B)
    p.region(T1, T2, Y)
    p.output(Y)
    cp = compile_program(p, "partial")
    [g] = cp.graphs
    env = {"A": a, "X": x, "W": w, "b": b}
    data = {t: TensorData.from_dense(env[t], cp.formats[t]) for t in g.input_tensors()}
    return g, data, a @ x @ w + b


def workload(name: str, n: int) -> tuple[Graph, dict[str, TensorData], np.ndarray]:
    if name == "gcn":
        return _gcn(n)
    g, data, _, want = example(name, n, seed=0, density=0.1)
    return g, data, want


def _build_seconds(bdir: Path, measured: float) -> float:
    """The seconds the build took when it was made (recorded in its stamp), else ``measured``."""
    stamp = json.loads((bdir / "built.json").read_text())
    return stamp.get("build_seconds", measured)


def measure(name: str, n: int, runners: list[str], repeat: int) -> dict:
    g, data, want = workload(name, n)
    cfg = HwConfig(cw=crd_width_needed(g)[0])
    sw = sw_run_graph(g, data)
    [out] = sw.outputs
    assert np.array_equal(sw.outputs[out].to_dense(), want), f"{name} {n}: sw_sim differs from numpy"
    row: dict = {"workload": name, "size": n, "nnz": sum(d.nnz for d in data.values()), "cw": cfg.cw,
                 "cycles": sw.cycles}
    walls = []
    for _ in range(repeat):  # sw_sim on the same graph and data, for comparison
        t0 = time.perf_counter()
        sw_run_graph(g, data)
        walls.append(time.perf_counter() - t0)
    row["sw_sim_wall_s"] = round(statistics.median(walls), 4)
    row["sw_sim_cycles_per_s"] = round(sw.cycles / statistics.median(walls))
    for runner in runners:
        if runner == "amaranth":  # amaranth.sim builds nothing ahead (elaboration is in the run)
            row[f"{runner}_build_s"] = 0.0
        else:
            t0 = time.perf_counter()
            bdir, _ = graph_build(g, cfg, runner=runner)
            row[f"{runner}_build_s"] = round(_build_seconds(bdir, time.perf_counter() - t0), 1)
        walls = []
        for _ in range(1 if runner == "cocotb" else repeat):
            t0 = time.perf_counter()
            rtl = run_graph(g, data, cfg=cfg, runner=runner)
            walls.append(time.perf_counter() - t0)
            if rtl.cycles != sw.cycles or not np.array_equal(rtl.outputs[out].to_dense(), want):
                raise SystemExit(f"{name} {n}: {runner} RTL gives {rtl.cycles} cycles (sw_sim {sw.cycles}) "
                                 "or different outputs")
        wall = statistics.median(walls)
        row[f"{runner}_wall_s"] = round(wall, 4)
        row[f"{runner}_cycles_per_s"] = round(sw.cycles / wall)
    if {"native", "cocotb"} <= set(runners):
        row["native_over_cocotb"] = round(row["native_cycles_per_s"] / row["cocotb_cycles_per_s"], 1)
    return row


def plot(rows: list[dict], runners: list[str], path: str) -> None:
    """Wall seconds of a run against the operands' non-zeros, per workload and engine (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        pts = sorted((r for r in rows if r["workload"] == name), key=lambda r: r["nnz"])
        for eng in ["sw_sim", *runners]:
            ax.plot([r["nnz"] for r in pts], [r[f"{eng}_wall_s"] for r in pts], marker="o", label=eng)
        ax.set(xscale="log", yscale="log", title=name, xlabel="non-zeros of the operands",
               ylabel="seconds per run (warm)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _rate(v: float) -> str:
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:.1f} k"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=WORKLOADS, action="append")
    ap.add_argument("--sizes", default="64,128,256", help="comma-separated N (default 64,128,256)")
    ap.add_argument("--runners", default="native,cocotb", help="comma-separated: native, cocotb, amaranth")
    ap.add_argument("--repeat", type=int, default=3, help="native runs per design (median)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--png", help="write the seconds-vs-nonzeros plot here")
    args = ap.parse_args()
    runners = [r for r in args.runners.split(",") if r]
    bad = [r for r in runners if r not in RUNNERS]
    if bad:
        ap.error(f"--runners: unknown {bad}; use {', '.join(RUNNERS)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for name in args.only or WORKLOADS:
        for n in sizes:
            rows.append(measure(name, n, runners, args.repeat))
            if not args.json:
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.png:
        plot(rows, runners, args.png)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ["workload", "N", "nnz", "cw", "RTL cycles", "sw_sim cycles/s"]
    for r in runners:
        header += [f"{r} build s", f"{r} wall s", f"{r} cycles/s"]
    if "native_over_cocotb" in rows[0]:
        header.append("native/cocotb")
    body = []
    for row in rows:
        cells = [row["workload"], row["size"], f"{row['nnz']:,}", row["cw"], f"{row['cycles']:,}",
                 _rate(row["sw_sim_cycles_per_s"])]
        for r in runners:
            cells += [row[f"{r}_build_s"], row[f"{r}_wall_s"], _rate(row[f"{r}_cycles_per_s"])]
        if "native_over_cocotb" in row:
            cells.append(f"{row['native_over_cocotb']}x")
        body.append(cells)
    print(table(body, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
