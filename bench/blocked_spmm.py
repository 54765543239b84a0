"""Block-sparse SpMM with vector streams against the unstructured SpMM on the same non-zeros.

For each block size B (1, 2, 4, 8, 16) a random n x n matrix A whose non-zeros are whole row
segments of B columns (each segment stored with probability ``--density``) times a dense X:

* ``bspmm``: A row-blocked, each block one vector of B lanes (``--lanes``: fewer lanes, the
  block split into B / lanes vectors), order i -> j -> K -> kk (fuseflow.kernels.bspmm);
* ``spmm_dense``: the same A in CSR times the same X (the built-in kernel: Gustavson order
  i -> k -> j with a sparse accumulator, one scalar product per cycle at best).

Both are checked against numpy; the table gives the cycles of each, their ratio (unstructured
/ blocked) and the blocked kernel's speed-up over its own B = 1 run.  ``--rtl`` also runs each
blocked graph in RTL (Verilator, native runner) and checks values and cycles equal sw_sim.
Run: python bench/blocked_spmm.py [--size N] [--density D] [--lanes W] [--rtl] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from fuseflow.kernels import bspmm, spmm
from fuseflow.ir.tensor import CSR, DENSE2, TensorData
from fuseflow_cli.cmd_common import table
from sw_sim import run_graph


def _matrix(rng: np.random.Generator, n: int, block: int, density: float) -> np.ndarray:
    keep = np.repeat(rng.random((n, n // block)) < density, block, axis=1)
    a = rng.integers(1, 10, size=(n, n)) * rng.choice([-1, 1], size=(n, n))
    return a * keep


def run(n: int, density: float, lanes: int | None, seed: int, rtl: bool) -> list[dict]:
    rows = []
    for block in (1, 2, 4, 8, 16):
        rng = np.random.default_rng(seed + block)
        a, x = _matrix(rng, n, block, density), rng.integers(-9, 10, size=(n, n))
        w = min(lanes or block, block)
        g = bspmm(n, n, n, block, w)
        data = {t: g.tensors[t].data(v) for t, v in (("A", a), ("X", x))}
        blocked = run_graph(g, data)
        flat = run_graph(spmm(n, n, n, DENSE2), {"A": TensorData.from_dense(a, CSR),
                                                 "B": TensorData.from_dense(x, DENSE2)})
        for r, name in ((blocked, "Y"), (flat, "C")):
            if not np.array_equal(r.outputs[name].to_dense(), a @ x):
                raise SystemExit(f"B={block}: {name} differs from numpy")
        row = {"block": block, "lanes": w, "nnz": int(np.count_nonzero(a)), "bspmm": blocked.cycles,
               "spmm_csr": flat.cycles, "ratio": flat.cycles / blocked.cycles}
        if rtl:
            from rtl_sim import run_graph as rtl_run

            r = rtl_run(g, data, runner="native")
            if r.cycles != blocked.cycles or not np.array_equal(r.outputs["Y"].to_dense(), a @ x):
                raise SystemExit(f"B={block}: RTL {r.cycles} cycles vs sw_sim {blocked.cycles}, or values differ")
            row["rtl"] = r.cycles
        rows.append(row)
    base = rows[0]["bspmm"]
    for r in rows:
        r["speedup_vs_b1"] = base / r["bspmm"]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--density", type=float, default=0.25, help="fraction of the B-wide row segments stored")
    ap.add_argument("--lanes", type=int, help="vector lanes (default: the block size)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtl", action="store_true", help="also run each blocked graph in RTL (native)")
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args()
    rows = run(args.size, args.density, args.lanes, args.seed, args.rtl)
    head = ["B", "lanes", "nnz", "bspmm cycles", "spmm CSR cycles", "CSR / bspmm", "bspmm B=1 / B"]
    if args.rtl:
        head.append("RTL cycles")
    body = [[r["block"], r["lanes"], r["nnz"], r["bspmm"], r["spmm_csr"], f"{r['ratio']:.2f}",
             f"{r['speedup_vs_b1']:.2f}", *([r["rtl"]] if args.rtl else [])] for r in rows]
    print(f"Y = A X, A {args.size}x{args.size} with {args.density:.0%} of its B-wide row segments stored, "
          f"X dense; sw_sim cycles")
    print(table(body, head))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"size": args.size, "density": args.density, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
