"""``fuseflow-hw sim``: run a SAMML graph in the cycle model."""

from __future__ import annotations

import json

import sw_sim
from fuseflow.ir.memory import MemoryError, MemoryModel
from fuseflow.ir.samml import GraphError
from sw_sim import SimError, SimResult, run_graph

from .cmd_common import (
    NO_REFERENCE,
    add_graph_args,
    add_memory_args,
    add_overflow_arg,
    add_saturate_arg,
    add_save_arg,
    check_save_path,
    check_text,
    load_graph_job,
    overflow_verdict,
    resolve_memory,
    saturate_job,
    saturated_text,
    save_outputs,
)
from .errors import UserError
from .models import add_model_args, counters_text, manifest_source, run_model
from .ui import print_table


def add_parser(sub) -> None:
    p = sub.add_parser("sim", help="run a graph in sw_sim (values + cycles)")
    add_graph_args(p, manifest=True)
    p.add_argument("--stats", action="store_true",
                   help="print per-node statistics and per-array counters (words, bytes, lines)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (cycles, ok, schedule, per-node counters; README "
                        "'Machine-readable output') instead of text")
    add_memory_args(p)
    add_saturate_arg(p)
    add_overflow_arg(p)
    add_save_arg(p)
    add_model_args(p)


def node_counters(stats) -> dict[str, dict[str, int]]:
    """Per-node counters with the stable JSON field names."""
    return {n: {"tokens_in": s.tokens_in, "tokens_out": s.tokens_out, "active": s.fire_cycles,
                "stalled": s.stall_cycles, "starved": s.starve_cycles, "memory_wait": s.mem_cycles}
            for n, s in stats.items()}


def simulate_graph(args) -> tuple[dict, SimResult, MemoryModel]:
    """Run the graph or kernel of ``args`` in sw_sim: the ``sim --json`` record, the result and
    the memory model."""
    check_save_path(args)
    job = load_graph_job(args)
    model, placement = resolve_memory(args, job.schedule)
    saturated = saturate_job(args, job, job.numerics)
    try:
        res = run_graph(job.graph, job.data, memory=model, onchip=placement, numerics=job.numerics,
                        on_overflow="ignore")  # --on-overflow is applied below
    except (SimError, MemoryError, GraphError) as exc:
        raise UserError(str(exc)) from None
    check = job.check(res.outputs)
    saved = save_outputs(args, res.outputs, job.numerics)
    record = {"source": job.source, "graph": job.graph.name, "cycles": res.cycles, "numerics": str(job.numerics),
              "ok": None if check is None else check.ok,
              "error": None if check is None else check.max_error, "tolerance": None if check is None else check.bound,
              "schedule": job.schedule.to_json() if job.schedule else None,
              "wall_seconds": round(res.wall_seconds, 4), "engine": sw_sim.ENGINE,
              "memory": model.to_json(), "onchip": sorted(placement.onchip),
              "counters": res.counters, "nodes": node_counters(res.stats),
              "saturated": saturated if args.saturate else None, "overflows": res.overflows,
              "saved": str(saved) if saved else None, "par_choice": getattr(args, "par_choice", None)}
    return record, res, model


def run(args) -> int:
    if manifest_source(args) or args.model:  # a build --model manifest: its model
        return run_model(args)
    record, res, model = simulate_graph(args)
    if args.json:
        print(json.dumps(record, indent=1))
        ok = overflow_verdict(args, res.overflow_records, f"graph {record['graph']!r}", err=True)
        return 0 if ok and record["ok"] is not False else 1
    print(f"{record['source']}: {res.cycles} cycles in sw_sim ({res.wall_seconds * 1e3:.1f} ms, "
          f"{res.node_cycles / max(res.wall_seconds, 1e-9) / 1e6:.2f} M node-cycles/s, "
          f"{sw_sim.ENGINE} model)")
    print(f"memory: {model.describe()}")
    if args.saturate:
        print(saturated_text(record["saturated"], record["numerics"]))
    ok = overflow_verdict(args, res.overflow_records, f"graph {record['graph']!r}")
    print(counters_text(res.counters, stats=args.stats))
    if args.stats:
        rows = [[n, s.tokens_in, s.tokens_out, s.fire_cycles, s.stall_cycles, s.starve_cycles, s.mem_cycles]
                for n, s in res.stats.items()]
        print_table(rows, ["node", "tokens in", "tokens out", "active", "stalled", "starved", "memory wait"])
    if record["saved"]:
        print(f"outputs saved: {record['saved']}")
    if record["ok"] is not None:
        print(check_text(record["numerics"], record["ok"], record["error"], record["tolerance"]))
    else:
        print(f"check: none ({NO_REFERENCE})")
    return 0 if ok and record["ok"] is not False else 1
