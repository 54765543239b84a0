"""Parallelization scaling in sw_sim: cycles vs lanes (``par``) on BigBird attention and SpMM.

Also outer-product SpMM (k -> i -> j, A CSC, B CSR, 64x64 at 10 %), whose order-2 accumulator
runs in the lanes of k (merged by merge2 trees) or of i.

For each workload and index, the factors 1, 2, 4, … (up to ``--max-factor`` and the index's
dimension) and nested pairs; every run's values are checked against numpy.  Prints a table,
writes ``--json`` and a PNG (speedup vs factor with the ideal line).  Not a test.

    python bench/par_scaling.py --json docs/par_scaling.json --png docs/par_scaling.png
    python bench/par_scaling.py --memory hbm2 --json docs/par_scaling_hbm2.json   # off-chip tensors
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "programs"))

from fuseflow.compiler import compile_program
from fuseflow.compiler.runner import reference, run_program
from fuseflow.kernels import example
from fuseflow.compiler.passes.par import parallelize
from sw_sim import DeadlockError, run_graph


def bigbird_case():
    """BigBird attention's program and its example data (seed 0)."""
    import bigbird_attention as b
    return b.program(), b.example_data(0)


def spmm_case(kernel: str = "spmm_dense"):
    """The SpMM kernel at 64x64, A 10 % nonzeros: (graph, data, operands, expected)."""
    return example(kernel, 64, 0, 0.1)


def outer_case():
    """Outer-product SpMM 64x64, A and B 10 % nonzeros (seed 0): the program and its data."""
    from fuseflow.compiler import Program, einsum
    p = Program("spmm_outer")
    a = p.tensor("A", (64, 64), "csc", mode_order=(1, 0))
    b = p.tensor("B", (64, 64), "csr")
    p.output(p.let("C", einsum("ik,kj->ij", a, b), order="kij"))
    rng = np.random.default_rng(0)
    data = {t: rng.integers(1, 5, (64, 64)) * (rng.random((64, 64)) < 0.1) for t in ("A", "B")}
    return p, data


MEMORY = {"memory": None}  # --memory: the preset every run simulates under (None: ideal)


def bigbird(par: dict[str, int]) -> tuple[int, bool]:
    program, data = bigbird_case()
    cp = compile_program(program, par=par or None)
    res = run_program(cp, data, simulate=run_graph, memory=MEMORY["memory"])
    ok = all(np.array_equal(res.outputs[t].to_dense(), v) for t, v in reference(cp, data).items())
    return sum(res.cycles), ok


def spmm_outer(par: dict[str, int]) -> tuple[int, bool]:
    program, data = outer_case()
    cp = compile_program(program, par=par or None)
    res = run_program(cp, data, simulate=run_graph, memory=MEMORY["memory"])
    return sum(res.cycles), bool(np.array_equal(res.outputs["C"].to_dense(), data["A"] @ data["B"]))


def spmm(par: dict[str, int]) -> tuple[int, bool]:
    g, data, _, expected = spmm_case()
    parallelize(g, par)
    res = run_graph(g, data, memory=MEMORY["memory"])
    return res.cycles, bool(np.array_equal(next(iter(res.outputs.values())).to_dense(), expected))


WORKLOADS = {
    "bigbird": (bigbird, "BigBird attention core, 1 head, seq 64, head 32 (fused S = M∘QKᵀ, O = S·V)",
                {"i": 64, "j": 64, "d": 32, "e": 32},
                [{"i": 4, "j": 4}, {"i": 8, "j": 8}, {"i": 4, "e": 4}, {"i": 4, "d": 4}]),
    "spmm": (spmm, "SpMM kernel spmm_dense 64×64 (A 10 % nonzeros) × dense 64×64",
             {"i": 64, "k": 64, "j": 64}, [{"i": 4, "j": 4}]),
    "spmm_outer": (spmm_outer, "outer-product SpMM 64×64 (A CSC, B CSR, 10 % nonzeros each; k → i → j)",
                   {"k": 64, "i": 64}, [{"k": 4, "i": 4}]),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--max-factor", type=int, default=64)
    p.add_argument("--json")
    p.add_argument("--png")
    p.add_argument("--memory", help="memory preset of every run (hbm2, ddr4, ...; default ideal)")
    args = p.parse_args()
    MEMORY["memory"] = args.memory
    rows = []
    for w in args.workloads:
        fn, what, dims, nested = WORKLOADS[w]
        base, ok = fn({})
        rows.append({"workload": w, "par": {}, "cycles": base, "speedup": 1.0, "ok": ok,
                     "memory": args.memory or "ideal"})
        print(f"{w}: {what}\n  par none: {base} cycles (ok {ok})", flush=True)
        runs = [{i: f} for i, dim in dims.items() for f in (2, 4, 8, 16, 32, 64)
                if f <= min(dim, args.max_factor)] + nested
        for par in runs:
            t0 = time.perf_counter()
            try:
                cyc, ok = fn(par)
            except DeadlockError as exc:  # reported, not hidden: see the README's table
                rows.append({"workload": w, "par": par, "cycles": None, "speedup": None,
                             "ok": False, "error": str(exc).splitlines()[0]})
                print(f"  par {par}: DEADLOCK ({str(exc).splitlines()[0]})", flush=True)
                continue
            rows.append({"workload": w, "par": par, "cycles": cyc, "speedup": round(base / cyc, 3),
                         "ok": ok})
            print(f"  par {par}: {cyc} cycles, {base / cyc:.2f}x (ok {ok}; "
                  f"{time.perf_counter() - t0:.1f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.png:
        _plot(rows, args.png)
    return 0 if all(r["ok"] for r in rows) else 1


def _plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if len(r["par"]) == 1 and r["speedup"]:
            (i, f), = r["par"].items()
            series.setdefault(f"{r['workload']} par {i}", [(1, 1.0)]).append((f, r["speedup"]))
    top = 1
    for label, pts in series.items():
        xs, ys = zip(*sorted(pts))
        ax.plot(xs, ys, marker="o", label=label)
        top = max(top, max(xs))
    ax.plot([1, top], [1, top], "k--", lw=0.8, label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("lanes (par factor)")
    ax.set_ylabel("speedup over 1 lane (sw_sim cycles)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
