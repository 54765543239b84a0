"""Wall time of one RTL run of a graph top under amaranth.sim (``rtl --sim amaranth``,
rtl_sim/amaranth_sim.py) against the native Verilator runner (rtl_sim/native.py), cold and warm.

Each figure is the wall time of ``rtl_sim.run_graph(g, data, runner=...)`` from the call to the
decoded outputs (load and read-back included), on the built-in kernels with seeded random data
(``fuseflow.kernels.example``, seed 0, 10 % dense) and the crd/ref width each needs:

* ``amaranth``: elaboration of the top, the simulator's compilation of it and the run (nothing is
  cached between runs; median of ``--repeat``);
* ``native cold``: an empty build cache (``FUSEFLOW_CACHE`` set to a fresh directory), so the
  Verilator + C++ build is in the figure (one run);
* ``native warm``: the build cached, the harness run only (median of ``--repeat``).

Every run must give sw_sim's cycles and numpy's values, or the script stops.

    python bench/amaranth_sim.py [--cases spmv:16,spmv:64,spmm_csr:16,spmm_csr:32] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuseflow.kernels import example
from fuseflow_cli.cmd_common import table
from hw.elaborate import HwConfig, crd_width_needed
from rtl_sim import run_graph
from sw_sim import run_graph as sw_run_graph


def _timed(g, data, cfg, runner: str, want: np.ndarray, cycles: int) -> float:
    t0 = time.perf_counter()
    res = run_graph(g, data, cfg=cfg, runner=runner)
    wall = time.perf_counter() - t0
    [out] = res.outputs
    if res.cycles != cycles or not np.array_equal(res.outputs[out].to_dense(), want):
        raise SystemExit(f"{g.name}: the {runner} runner gives {res.cycles} cycles (sw_sim {cycles}) "
                         "or values that differ from numpy")
    return wall


def measure(kernel: str, n: int, repeat: int) -> dict:
    g, data, _, want = example(kernel, n, seed=0, density=0.1)
    cfg = HwConfig(cw=crd_width_needed(g)[0])
    cycles = sw_run_graph(g, data).cycles
    row = {"graph": kernel, "size": n, "nnz": sum(d.nnz for d in data.values()), "cycles": cycles}
    row["amaranth_s"] = statistics.median(_timed(g, data, cfg, "amaranth", want, cycles) for _ in range(repeat))
    old = os.environ.get("FUSEFLOW_CACHE")
    with tempfile.TemporaryDirectory(prefix="fuseflow-cold-") as cold:
        os.environ["FUSEFLOW_CACHE"] = cold
        try:
            row["native_cold_s"] = _timed(g, data, cfg, "native", want, cycles)
            row["native_warm_s"] = statistics.median(_timed(g, data, cfg, "native", want, cycles)
                                                     for _ in range(repeat))
        finally:
            if old is None:
                os.environ.pop("FUSEFLOW_CACHE")
            else:
                os.environ["FUSEFLOW_CACHE"] = old
    for k in ("amaranth_s", "native_cold_s", "native_warm_s"):
        row[k] = round(row[k], 3)
    row["amaranth_cycles_per_s"] = round(cycles / row["amaranth_s"])
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="spmv:16,spmv:64,spmm_csr:16,spmm_csr:32",
                    help="comma-separated KERNEL:N")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for case in args.cases.split(","):
        kernel, n = case.split(":")
        rows.append(measure(kernel, int(n), args.repeat))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(table([[r["graph"], r["size"], r["nnz"], f"{r['cycles']:,}", r["amaranth_s"], r["native_cold_s"],
                  r["native_warm_s"], f"{r['amaranth_cycles_per_s']:,}"] for r in rows],
                ["graph", "N", "nnz", "cycles", "amaranth s", "native cold s", "native warm s",
                 "amaranth cycles/s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
