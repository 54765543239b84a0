"""A 2-layer GCN on a Cora-sized graph in sw_sim, for each fusion granularity: cycles, wall and
CPU time, simulated cycles per second and peak memory (each granularity in a process of its own,
so its peak RSS is its own), and the error against the PyTorch reference.

The graph is the named dataset (default: the synthetic Cora-shaped graph, 2 708 nodes, 1 433
features at Cora's density; ``--dataset`` takes any graph dataset name).

    python bench/cora_gcn.py [--dataset NAME] [--hidden 16] [--fusion unfused partial full] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sw_sim
from fuseflow.models.datasets import load_dataset
from fuseflow.models.frontend import trace
from fuseflow.models.plan import compile_model, run_model
from fuseflow.models.zoo import make_case
from fuseflow_cli.cmd_common import table
from sw_sim import run_graph


def one(dataset: str, fusion: str, hidden: int) -> dict:
    """Load, compile and simulate one granularity in this process."""
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    t0 = time.perf_counter()
    ds = load_dataset(dataset)
    case = make_case("gcn", ds, hidden=hidden)
    ir = trace(case.module, case.inputs, case.formats, name="gcn")
    cm = compile_model(ir, fusion)
    setup = time.perf_counter() - t0
    c0, t1 = time.process_time(), time.perf_counter()
    res = run_model(cm, simulate=run_graph, max_cycles=10**10)
    wall, cpu = time.perf_counter() - t1, time.process_time() - c0
    ref = case.reference()
    out = res.outputs[ir.outputs[0]]
    err = float(np.max(np.abs(out - ref)) / (np.max(np.abs(ref)) or 1.0))
    return {"dataset": ds.describe(), "fusion": fusion, "graphs": len(cm.graphs), "cycles": res.total_cycles,
            "setup_seconds": round(setup, 2), "sim_wall_seconds": round(wall, 2), "sim_cpu_seconds": round(cpu, 2),
            "cycles_per_second": round(res.total_cycles / max(cpu, 1e-9)), "rel_error": err,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "engine": sw_sim.ENGINE}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--fusion", nargs="+", default=["unfused", "partial", "full"])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(one(args.dataset, args.fusion[0], args.hidden)))
        return 0
    rows = []
    for fusion in args.fusion:
        proc = subprocess.run([sys.executable, __file__, "--worker", "--dataset", args.dataset, "--hidden",
                               str(args.hidden), "--fusion", fusion], capture_output=True, text=True, check=False)
        if proc.returncode:
            raise SystemExit(f"{fusion}: failed\n{proc.stderr[-3000:]}")
        rows.append(json.loads(proc.stdout))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"GCN (2 layers, hidden {args.hidden}) on {rows[0]['dataset']}; {rows[0]['engine']} cycle model")
    print(table([[r["fusion"], r["graphs"], f"{r['cycles']:,}", r["setup_seconds"], r["sim_wall_seconds"],
                  r["sim_cpu_seconds"], f"{r['cycles_per_second']:,}", r["peak_rss_mb"], f"{r['rel_error']:.1e}"]
                 for r in rows],
                ["fusion", "graphs", "cycles", "load+compile s", "sim wall s", "sim CPU s", "cycles/s",
                 "peak RSS MB", "rel error"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
