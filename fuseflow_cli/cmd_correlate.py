"""``fuseflow-hw correlate``: sw_sim vs RTL cycles over a kernel suite, with a report (under an
off-chip memory model with ``--memory`` / ``--onchip``)."""

from __future__ import annotations

import json
import os
import sys

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from fuseflow.compiler.passes.par import ParallelError
from fuseflow.suites import SUITES, suite, with_par
from rtl_sim.api import RUNNERS
from rtl_sim.correlate import MemorySetup, memory_left_out, run_suite, write_report
from sw_sim import run_graph

from .argtypes import int_range
from .cmd_common import (
    add_memory_args,
    add_schedule_args,
    add_scheduler_arg,
    open_executor,
    refuse_par_auto,
    resolve_memory,
    resolve_schedule,
)
from .errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("correlate", help="run a kernel suite in sw_sim and RTL; write JSON, Markdown and a PNG")
    p.add_argument("--suite", default="all", choices=[*SUITES, "all"],
                   help="the kernel suite: %(choices)s (default %(default)s)")
    p.add_argument("-o", "--out", help="report directory (required unless --list)")
    p.add_argument("-j", "--jobs", type=int_range(1), default=os.cpu_count(), help="local workers (default: all cores)")
    add_scheduler_arg(p)
    p.add_argument("--json", action="store_true",
                   help="print the report's summary (correlation.json's fields) as JSON instead of text")
    p.add_argument("--waves", action="store_true",
                   help="also write a VCD and a GTKWave save file per graph into OUT/waves/")
    p.add_argument("--runner", choices=RUNNERS, default="native",
                   help="how the RTL runs: %(choices)s (default %(default)s: the compiled Verilator harness; "
                        "cocotb: the cocotb testbench on Verilator; amaranth: amaranth.sim, nothing to build)")
    p.add_argument("--list", action="store_true", help="list the suite's kernels and exit (no -o needed)")
    add_schedule_args(p)  # par only: every graph of the suite that iterates the index
    add_memory_args(p)  # both simulators; --onchip names apply to the graphs that have them


def _memory(args, sched, entries: list) -> tuple[MemorySetup, list, list[str]]:
    """``--memory`` / ``--onchip``: the setup, the entries that can run under it and the reasons
    for the others (printed)."""
    model, placement = resolve_memory(args, sched)
    mem = MemorySetup(model, tuple(sorted(placement.onchip)))
    if mem.onchip:
        known = {t for e in entries for t in e.make(run_graph)[0].tensors}
        unknown = sorted(set(mem.onchip) - known)
        if unknown:
            raise UserError(f"--onchip: no tensor {', '.join(map(repr, unknown))} in any graph of suite "
                            f"{args.suite!r}")
    left: list[str] = []
    if not model.ideal:
        entries, left = memory_left_out(entries, mem)
    for why in left:
        print(f"left out under --memory {model.name}: {why}", file=sys.stderr)
    if not entries:
        raise UserError(f"--memory {model.name}: no graph of suite {args.suite!r} can run with these "
                        "tensors off chip")
    return mem, entries, left


def run(args) -> int:
    try:
        entries = suite(args.suite)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    sched = resolve_schedule(args)
    if sched.fusion or sched.orders or sched.block:
        raise UserError(f"--schedule {args.schedule}: the suites' graphs are already compiled; "
                        f"only par applies to correlate")
    refuse_par_auto(sched.par, "correlate (a suite of graphs)")
    if sched.par:
        try:
            entries, left = with_par(entries, dict(sched.par), run_graph)
        except ParallelError as exc:
            raise UserError(f"--par: {exc}") from None
        if not entries:
            raise UserError(f"--par: no graph of suite {args.suite!r} iterates "
                            f"{', '.join(sched.par)}")
        if left:
            print(f"left out (no index {', '.join(sched.par)}): {', '.join(left)}", file=sys.stderr)
    mem, entries, mem_left = _memory(args, sched, entries)
    if args.list:
        for e in entries:
            print(f"{e.name}  ({e.model})")
        return 0
    if not args.out:
        raise UserError("give a report directory with -o DIR (or --list to list the suite)")
    waves = None
    if args.waves:
        waves = os.path.join(args.out, "waves")
        os.makedirs(waves, exist_ok=True)
    with open_executor(args) as ex, Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                             TimeElapsedColumn(), disable=args.json) as bar:
        task = bar.add_task("building + simulating", total=len(entries))

        def progress(done: int, total: int, names: str) -> None:
            bar.update(task, completed=done, description=f"done: {names[:60]}")

        results = run_suite(entries if sched.par or mem_left else args.suite, waves_dir=waves,
                            progress=progress, memory=mem, executor=ex, runner=args.runner)
    summary = write_report(results, args.out)
    bad = [r.name for r in results if not r.values_equal or r.reference_ok is False or not r.overflow_equal]
    if args.json:
        print(json.dumps({"suite": args.suite, "scheduler": ex.describe(), "runner": args.runner, **summary,
                          "report": os.path.join(args.out, "report.md"),
                          "plot": os.path.join(args.out, "correlation.png")}, indent=1))
        return 1 if bad else 0
    print(f"{len(results)} kernels on {ex.describe()}: R² = {summary['r2']:.6f}, worst relative error "
          f"{summary['max_rel_error'] * 100:.3f} %, outputs identical: {summary['all_values_equal']}")
    if summary["differing"]:
        print("cycles differ for: " + ", ".join(summary["differing"]))
    print(f"report: {os.path.join(args.out, 'report.md')}, plot: {os.path.join(args.out, 'correlation.png')}")
    if bad:
        print("value or overflow-flag mismatches: " + ", ".join(bad))
        return 1
    return 0
