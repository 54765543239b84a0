"""Spine kernels on 64x64 at 90% sparsity: sw_sim vs RTL cycles, and sw_sim speed.

sw_sim speed is reported as simulated node-cycles per second (graph nodes x cycles / wall
seconds), the figure SAM's Python simulator is quoted in (about 0.5 M block-cycles/s on the
same machine class: a 64x64 SpMM of about 56 k cycles in 1.8 s, README.md "Results"), computed
from the process's CPU time (median of ``--repeat`` runs) so that other load on a shared
machine does not distort it.  Run: python bench/kernels.py [--no-rtl] [--size N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from fuseflow.kernels import KERNELS, example
from fuseflow_cli.cmd_common import table
from rtl_sim import run_graph as rtl_run
from sw_sim import run_graph


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-rtl", action="store_true")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5, help="sw_sim timing repetitions (median)")
    args = ap.parse_args()
    rows = []
    for k in KERNELS:
        g, data, _, _ = example(k, args.size, seed=0)
        walls, cpus = [], []
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            res = run_graph(g, data, verify=False)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        speed = len(g.nodes) * res.cycles / cpu
        row = [k, len(g.nodes), res.cycles, f"{wall * 1e3:.1f}", f"{cpu * 1e3:.1f}", f"{speed / 1e6:.2f}"]
        if not args.no_rtl:
            rtl = rtl_run(g, data)
            row += [rtl.cycles, f"{rtl.cycles / res.cycles:.4f}"]
        rows.append(row)
        print(f"  {k}: done", file=sys.stderr, flush=True)
    header = ["kernel", "nodes", "sw_sim cycles", "wall ms", "CPU ms", "M node-cyc/s (CPU)"]
    if not args.no_rtl:
        header += ["RTL cycles", "RTL/sw ratio"]
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
