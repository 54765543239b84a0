"""Sweep throughput: one 100-configuration sweep run serially, on local processes and on a local
Dask cluster, each with an empty cache; then a sweep killed part-way and resumed.

The sweep: SpMM CSR and SpMV kernels at sizes 96–160, densities 0.1–0.3 and two seeds (100
configurations, each run in sw_sim and checked against numpy).  Each row is the wall time of the
whole ``fuseflow-hw sweep`` command (Python start-up, Dask cluster start-up and output files
included) and its speedup over the serial run, measured in the same run of this script.  The
speedup is bounded by the machine's cores (``os.cpu_count()``, printed).

    python bench/sweep_speed.py [--workers 2 4] [--sizes 96 112 128 144 160] [--json]

``--sizes`` sets the five matrix sizes: larger ones make each configuration longer (about 2 s at
384-640 against 0.2 s at 96-160), so that the speedup shows the executor's scaling rather than
the fixed start-up of Python and of the Dask cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fuseflow_cli.cmd_common import table

SWEEP = """name = "bench-100"
[[grid]]
kernel = ["spmm_csr", "spmv"]
size = {sizes}
density = [0.1, 0.15, 0.2, 0.25, 0.3]
seed = [0, 1]
"""


def _sweep(args: list[str], out: Path) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fuseflow_cli", "sweep", *args, "-o", str(out), "--json"],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sweep {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def _killed_and_resumed(sweep: Path, out: Path, workers: int) -> dict:
    """Kill a Dask sweep once about 40 configurations are done; run it again."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "fuseflow_cli", "sweep", str(sweep), "-o", str(out), "-j", str(workers),
           "--scheduler", "dask"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    log = out / "cache" / "runs.log"
    while proc.poll() is None and not (log.exists() and log.read_text().count("\n") >= 40):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Dask workers
    proc.wait()
    before = log.read_text().count("\n")
    _, summary = _sweep([str(sweep), "-j", str(workers), "--scheduler", "dask"], out)
    keys = [json.loads(line)["key"] for line in log.read_text().splitlines()]
    return {"done_before_kill": before, "ran_after": summary["ran"], "cached_after": summary["cached"],
            "runs_logged": len(keys), "distinct": len(set(keys))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--sizes", type=int, nargs=5, default=[96, 112, 128, 144, 160])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fuseflow-sweep-bench-") as tmp:
        sweep = Path(tmp) / "bench.toml"
        sweep.write_text(SWEEP.format(sizes=list(args.sizes)))
        runs = [("serial", 1)] + [(s, w) for w in args.workers for s in ("processes", "dask")]
        base = None
        cycles = None
        for sched, workers in runs:
            wall, summary = _sweep([str(sweep), "--scheduler", sched, "-j", str(workers)], Path(tmp) / f"{sched}{workers}")
            got = [r["cycles"] for r in summary["rows"]]
            if cycles is not None and got != cycles:
                raise SystemExit(f"{sched} -j {workers}: cycles differ from the serial run")
            cycles = got
            base = base or wall
            rows.append({"scheduler": sched, "workers": workers, "configs": summary["configs"],
                         "wall_s": round(wall, 2), "speedup": round(base / wall, 2),
                         "failed": summary["failed"] + summary["check_failed"]})
        resume = _killed_and_resumed(sweep, Path(tmp) / "resume", args.workers[0])
    if args.json:
        print(json.dumps({"cores": os.cpu_count(), "sizes": args.sizes, "rows": rows, "resume": resume}, indent=1))
        return
    print(f"100-configuration sweep (SpMM CSR / SpMV {args.sizes[0]}-{args.sizes[-1]}, density 0.1-0.3, 2 seeds), "
          f"{os.cpu_count()} cores:")
    print(table([[r["scheduler"], r["workers"], r["configs"], r["wall_s"], f"{r['speedup']:.2f}x", r["failed"]]
                 for r in rows], ["scheduler", "workers", "configs", "wall s", "vs serial", "failed"]))
    print(f"killed after {resume['done_before_kill']} configurations; the rerun ran {resume['ran_after']} and "
          f"took {resume['cached_after']} from the cache; {resume['runs_logged']} runs logged for "
          f"{resume['distinct']} distinct configurations")


if __name__ == "__main__":
    main()
