"""``fuseflow-hw estimate``: FLOPs, bytes and a cycle estimate without simulating (the heuristic).

Targets: a graph JSON or ``--kernel`` (one configuration), a PROGRAM.py with ``example_data``
(each fusion granularity, or the schedule's), or ``--model`` (each fusion granularity, or the
schedule's).  ``--check`` also runs sw_sim and prints the heuristic's error per configuration.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from fuseflow.compiler import ProgramError, compile_program, run_program
from fuseflow.cost import Estimate, estimate_graph, estimate_model, estimate_program
from fuseflow.ir.memory import MemoryError, Placement
from fuseflow.ir.samml import GraphError
from fuseflow.models.plan import run_model
from fuseflow.schedule import FUSIONS
from sw_sim import SimError, run_graph
from sw_sim.counters import merge_counters

from .cmd_common import (
    add_graph_args,
    add_memory_args,
    load_graph_job,
    refuse_par_auto,
    resolve_memory,
    resolve_schedule,
)
from .cmd_compile import load_program_module
from .errors import UserError
from .models import add_model_args, load_compiled
from .ui import print_table

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("estimate", help="FLOPs, bytes and cycles of each fusion configuration without "
                                        "simulating (the heuristic)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_graph_args(p)
    add_memory_args(p)
    p.add_argument("--rate", action="append", default=[], metavar="INDEX=R",
                   help="intersection rate of index INDEX (fraction of its coordinates that "
                        "survive), instead of the independence assumption; repeatable")
    p.add_argument("--check", action="store_true", help="also simulate in sw_sim and print the errors")
    p.add_argument("--json", action="store_true", help="print one JSON object (README 'Machine-readable output')")
    add_model_args(p)


def _rates(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        k, eq, v = item.partition("=")
        try:
            r = float(v)
        except ValueError:
            r = -1.0
        if not eq or not k or not 0.0 <= r <= 1.0:
            raise UserError(f"--rate {item!r}: expected INDEX=R with R between 0 and 1")
        if k in out:
            raise UserError(f"--rate {item}: index {k} is given twice (--rate {k}={out[k]:g} too); give it once")
        out[k] = r
    return out


def _check_rates(rates: dict[str, float], graphs, where: str) -> None:
    """An error for a ``--rate`` index that no intersection of ``graphs`` joins (the rate would
    change nothing)."""
    joined = {index for g in graphs for index, refs in g.indices.items()
              if any(g.nodes[r.node].kind.value == "intersect" for r in refs if r.node in g.nodes)}
    for index, r in rates.items():
        if index not in joined:
            raise UserError(f"--rate {index}={r:g}: no intersection of {where} joins index {index!r} "
                            f"(intersected indices: {', '.join(sorted(joined)) or 'none'})")


def _row(label: str, e: Estimate, sim: dict[str, Any] | None) -> dict[str, Any]:
    d = {"config": label, **e.to_json()}
    if sim is not None:
        moved = sim["bytes_read"] + sim["bytes_written"]
        est_moved = e.bytes_read + e.bytes_written

        def pct(a: float, b: float) -> float | None:
            return round(100 * abs(a - b) / b, 2) if b else None
        d["simulated"] = {**sim, "error_pct": {"flops": pct(e.flops_total, sim["flops_total"]),
                                                "bytes": pct(est_moved, moved),
                                                "cycles": pct(e.cycles, sim["cycles"])}}
    return d


def _sim_summary(counters: list[dict], cycles: int) -> dict[str, Any]:
    c = merge_counters(counters)
    return {"cycles": cycles, "flops_total": c["flops_total"], "bytes_read": c["bytes_read"],
            "bytes_written": c["bytes_written"], "bytes_offchip": c["bytes_offchip"]}


def run(args: argparse.Namespace) -> int:
    if getattr(args, "numerics", None) is not None:
        raise UserError(f"--numerics {args.numerics}: estimate counts FLOPs, bytes and cycles, which the "
                        "value arithmetic does not change (sim and run take --numerics)")
    sched = resolve_schedule(args)
    model, placement = resolve_memory(args, sched)
    kw = {"memory": model, "placement": Placement(placement.onchip, strict=False), "rates": _rates(args.rate)}
    kw["check_names"] = placement
    try:
        source, rows = _estimate(args, sched, kw)
    except (MemoryError, ProgramError, GraphError, SimError) as exc:
        raise UserError(str(exc)) from None
    if args.json:
        print(json.dumps({"source": source, "memory": model.to_json(), "onchip": sorted(placement.onchip),
                          "configs": rows, "par_choice": getattr(args, "par_choice", None)}, indent=1))
        return 0
    print(f"{source}; memory {model.describe()}")
    head = ["config", "graphs", "FLOPs", "bytes", "off-chip B", "FLOP/B", "est. cycles", "ms"]
    body = []
    for r in rows:
        line = [r["config"], len(r["graphs"]), f"{r['flops_total']:.0f}", f"{r['bytes_read'] + r['bytes_written']:.0f}",
                f"{r['bytes_offchip']:.0f}", f"{r['intensity']:.3f}" if r["intensity"] is not None else "-",
                r["cycles"], f"{r['seconds'] * 1e3:.1f}"]
        if "simulated" in r:
            s, err = r["simulated"], r["simulated"]["error_pct"]
            line += [s["cycles"], f"{err['flops']}/{err['bytes']}/{err['cycles']}"]
        body.append(line)
    if any("simulated" in r for r in rows):
        head += ["sw_sim cycles", "error % F/B/C"]
    print_table(body, head)
    best = min(rows, key=lambda r: r["cycles"])
    print(f"fastest by estimate: {best['config']}")
    return 0


def _estimate(args: argparse.Namespace, sched, kw: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    names = kw.pop("check_names")
    explicit = sched.fusion or (args.fusion if args.fusion != "auto" else None)
    fusions = (explicit,) if explicit else FUSIONS  # auto (the default): all three, the pick marked
    if args.model:
        rows = []
        for fusion in fusions:
            args.fusion = fusion
            args.schedule = None  # the fusion is set here; the rest of the schedule was read above
            _, _ir, cm = load_compiled(args, choose=False)
            names.check({t for g in cm.graphs for t in g.tensors}, f"model {args.model}")
            _check_rates(kw["rates"], cm.graphs, f"model {args.model}")
            e = estimate_model(cm, **kw)
            sim = None
            if args.check:
                r = run_model(cm, simulate=run_graph, memory=kw["memory"], onchip=kw["placement"])
                sim = _sim_summary([c for _, c in r.counters], r.total_cycles)
            rows.append(_row(fusion, e, sim))
        return f"model {args.model}", rows
    if args.graph and args.graph.endswith(".py"):
        return _program(args, sched, fusions, kw, names)
    job = load_graph_job(args)
    names.check(job.graph.tensors, f"graph {job.graph.name!r}")
    _check_rates(kw["rates"], [job.graph], job.source)
    e, _ = estimate_graph(job.graph, job.data, **kw)
    sim = None
    if args.check:
        r = run_graph(job.graph, job.data, memory=kw["memory"], onchip=kw["placement"])
        sim = _sim_summary([r.counters], r.cycles)
    return job.source, [_row(job.graph.name, e, sim)]


def _program(args, sched, fusions, kw, names) -> tuple[str, list[dict[str, Any]]]:
    module = load_program_module(args.graph)
    make = getattr(module, "example_data", None)
    if not callable(make):
        raise UserError(f"estimate needs {args.graph} to define example_data(seed) (the tensors' "
                        "statistics come from it)")
    refuse_par_auto(sched.par, f"estimate {args.graph}")
    program = module.program()
    data = make(args.seed)
    rows = []
    for fusion in fusions:
        compiled = compile_program(program, fusion, dict(sched.orders) or None, par=dict(sched.par) or None,
                                   block=dict(sched.block) or None, lanes=sched.lanes)
        names.check({t for g in compiled.graphs for t in g.tensors}, f"program {args.graph}")
        _check_rates(kw["rates"], compiled.graphs, f"program {args.graph}")
        e = estimate_program(compiled, data, **kw)
        sim = None
        if args.check:
            r = run_program(compiled, data, simulate=run_graph, memory=kw["memory"], onchip=kw["placement"])
            sim = _sim_summary(r.counters, r.total_cycles)
        rows.append(_row(fusion, e, sim))
    return f"program {args.graph}", rows
