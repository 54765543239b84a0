"""``fuseflow-hw sweep``: run a design-space sweep (models x datasets x schedules x memory) on
local processes or Dask, with a resumable result cache, CSV/Parquet results and plots."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .argtypes import int_range
from .cmd_common import add_scheduler_arg, open_executor
from .errors import UserError
from .sweep import load_sweep, run_sweep
from .sweep_report import write_results


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run every configuration of a sweep file on Dask or local processes")
    p.add_argument("sweep", help="sweep file (TOML: [defaults] and [[grid]] tables of sim options; README 'Sweeps')")
    p.add_argument("-o", "--out", help="output directory (results.csv/.parquet, report.md, plots)")
    p.add_argument("-j", "--jobs", type=int_range(1), default=os.cpu_count(), help="local workers (default: all cores)")
    add_scheduler_arg(p, default="dask")
    p.add_argument("--cache", metavar="DIR", help="result cache (default OUT/cache): finished configurations "
                                                  "are never run again")
    p.add_argument("--rerun-errors", action="store_true", help="run configurations that failed before again")
    p.add_argument("--list", action="store_true", help="list the configurations and exit")
    p.add_argument("--json", action="store_true", help="print the summary and every row as JSON")


def run(args) -> int:
    sweep = load_sweep(args.sweep)
    if args.list:
        for i, c in enumerate(sweep.configs):
            print(f"{i:4d}  {c.label()}")
        print(f"{len(sweep.configs)} configurations" +
              (f" ({sweep.duplicates} given twice, run once)" if sweep.duplicates else ""))
        return 0
    if not args.out:
        raise UserError("give an output directory with -o DIR")
    out = Path(args.out)
    cache = Path(args.cache) if args.cache else out / "cache"
    with open_executor(args) as ex, Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                             TimeElapsedColumn(), disable=args.json) as bar:
        task = bar.add_task(f"sweep {sweep.name}", total=len(sweep.configs))

        def progress(done: int, total: int, row: dict) -> None:
            what = f"{row.get('status', '')}: {row.get('source', '')}"[:60] if row else "cached"
            bar.update(task, completed=done, description=what)

        res = run_sweep(sweep, cache, ex, progress=progress, rerun_errors=args.rerun_errors)
    failed = [r for r in res.rows if r["status"] != "ok"]
    checks = [r for r in res.rows if r.get("check") is False]
    summary = {"name": sweep.name, "sweep": str(sweep.path), "configs": len(res.rows), "ran": res.ran,
               "cached": res.cached, "failed": len(failed), "check_failed": len(checks),
               "duplicates": sweep.duplicates, "executor": res.executor,
               "wall_seconds": round(res.wall_seconds, 3)}
    files = write_results(res.rows, out, summary)
    if args.json:
        print(json.dumps({**summary, "files": files, "rows": res.rows}, indent=1))
    else:
        print(f"sweep {sweep.name}: {len(res.rows)} configurations on {res.executor}: {res.ran} run, "
              f"{res.cached} from the cache, {len(failed)} failed, in {res.wall_seconds:.1f} s")
        for r in failed:
            print(f"  config {r['config']}: {r['message'].splitlines()[0]}", file=sys.stderr)
        for r in checks:
            print(f"  config {r['config']}: result differs from the reference ({r['source']})", file=sys.stderr)
        print("results: " + ", ".join(files.values()))
    return 1 if failed or checks else 0
