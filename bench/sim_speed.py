"""sw_sim speed: simulated cycles per second of the cycle model on the workloads issue 16 names.

* ``spmspm_inner``: C = B·C' inner product, B DCSR × C DCSC (64 × 64, 90 % sparse), order ijk
  (Program API, compiled by fuseflow.compiler).
* ``spmm_csr``: the built-in SpMM kernel, CSR × CSR (128 × 128, 10 % dense).
* ``gcn_full``: the zoo's 2-layer GCN on KarateClub, full fusion (float numerics).

Both cycle models run, each in a process of its own (``FUSEFLOW_SW_SIM=python`` and
``compiled``, see sw_sim/native.py), on the same graphs and data; both must give the same cycle
counts.  Each figure is the median over ``--repeat`` runs of the process's CPU time, so other
load on a shared machine distorts it little.  ``--json`` prints the rows as a list of objects.

    python bench/sim_speed.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sw_sim  # the cycle model FUSEFLOW_SW_SIM chooses
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


def one_engine(engine: str, names: list[str], repeat: int) -> list[dict]:
    """The rows of one cycle model, measured in a process of its own."""
    env = {**os.environ, "FUSEFLOW_SW_SIM": engine}
    cmd = [sys.executable, __file__, "--worker", "--repeat", str(repeat)]
    for n in names:
        cmd += ["--only", n]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main() -> int:
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=sorted(WORKLOADS), action="append")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = args.only or list(WORKLOADS)
    if args.worker:
        print(json.dumps([{**measure(n, args.repeat), "engine": sw_sim.ENGINE} for n in names]))
        return 0
    py, comp = one_engine("python", names, args.repeat), one_engine("compiled", names, args.repeat)
    rows = []
    for a, b in zip(py, comp, strict=True):
        if a["cycles"] != b["cycles"]:
            raise SystemExit(f"{a['workload']}: the two models disagree ({a['cycles']} vs {b['cycles']} cycles)")
        rows.append({"workload": a["workload"], "cycles": a["cycles"],
                     "python_cycles_per_second": a["cycles_per_second"],
                     "compiled_cycles_per_second": b["cycles_per_second"],
                     "speedup": round(b["cycles_per_second"] / a["cycles_per_second"], 2)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(table([[r["workload"], f"{r['cycles']:,}", f"{r['python_cycles_per_second'] / 1e3:.0f} k",
                  f"{r['compiled_cycles_per_second'] / 1e3:.0f} k", f"{r['speedup']:.1f}x"] for r in rows],
                ["workload", "cycles", "Python model cycles/s", "compiled cycles/s", "speedup"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
