"""sw_sim speed: simulated cycles per second of the cycle model on the workloads issue 16 names.

* ``spmspm_inner``: C = B·C' inner product, B DCSR × C DCSC (64 × 64, 90 % sparse), order ijk
  (Program API, compiled by fuseflow.compiler).
* ``spmm_csr``: the built-in SpMM kernel, CSR × CSR (128 × 128, 10 % dense).
* ``gcn_full``: the zoo's 2-layer GCN on KarateClub, full fusion (float numerics).

Each figure is the median over ``--repeat`` runs of the process's CPU time, so other load on a
shared machine distorts it little.  ``--json`` prints the rows as a list of objects.

    python bench/sim_speed.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuseflow.compiler import Program, compile_program, einsum, run_program
from fuseflow.kernels import example
from fuseflow.models.frontend import trace
from fuseflow.models.plan import compile_model, run_model
from fuseflow.models.zoo import make_case
from fuseflow_cli.cmd_common import table
from sw_sim import run_graph


def _inner() -> Callable[[], int]:
    p = Program("spmspm_inner")
    b = p.tensor("B", (64, 64), "dcsr")
    c = p.tensor("C", (64, 64), "dcsc")
    p.output(p.let("X", einsum("ik,kj->ij", b, c)))
    cp = compile_program(p, orders={"X": "ijk"})
    rng = np.random.default_rng(0)
    data = {}
    for name in ("B", "C"):
        a = rng.integers(-8, 9, (64, 64))
        a[rng.random((64, 64)) > 0.1] = 0
        data[name] = a
    want = data["B"] @ data["C"]

    def run() -> int:
        res = run_program(cp, data, simulate=run_graph)
        assert np.array_equal(res.outputs["X"].to_dense(), want)
        return sum(res.cycles)
    return run


def _spmm() -> Callable[[], int]:
    g, data, _, want = example("spmm_csr", 128, seed=0, density=0.1)

    def run() -> int:
        res = run_graph(g, data, verify=False)
        assert np.array_equal(res.outputs["C"].to_dense(), want)
        return res.cycles
    return run


def _gcn() -> Callable[[], int]:
    case = make_case("gcn", "karate")
    ir = trace(case.module, case.inputs, case.formats, name=case.name)
    cm = compile_model(ir, "full")
    with np.errstate(all="ignore"):
        ref = case.reference()

    def run() -> int:
        res = run_model(cm, simulate=run_graph)
        out = res.outputs[ir.outputs[0]]
        assert np.allclose(out, ref, rtol=1e-3, atol=1e-3 * np.max(np.abs(ref)))
        return res.total_cycles
    return run


WORKLOADS = {"spmspm_inner": _inner, "spmm_csr": _spmm, "gcn_full": _gcn}


def measure(name: str, repeat: int) -> dict:
    run = WORKLOADS[name]()
    cpus, walls = [], []
    cycles = 0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        cycles = run()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    cpu = statistics.median(cpus)
    return {"workload": name, "cycles": cycles, "cpu_seconds": round(cpu, 4),
            "wall_seconds": round(statistics.median(walls), 4),
            "cycles_per_second": round(cycles / cpu)}


def main() -> int:
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=sorted(WORKLOADS), action="append")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [measure(n, args.repeat) for n in (args.only or WORKLOADS)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(table([[r["workload"], f"{r['cycles']:,}", f"{r['cpu_seconds']:.3f}",
                  f"{r['cycles_per_second'] / 1e3:.0f} k"] for r in rows],
                ["workload", "cycles", "CPU s (median)", "cycles/s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
