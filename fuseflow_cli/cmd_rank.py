"""``fuseflow-hw rank --model M``: every fusion granularity x dataflow order the compiler allows,
ranked by the heuristic's cycle estimate; ``--simulate K`` runs the best K in sw_sim and says
whether the heuristic's first choice was the fastest of them."""

from __future__ import annotations

import argparse
import json

from fuseflow.cost import rank_model
from fuseflow.ir.memory import MemoryError, Placement
from fuseflow.models.plan import run_model
from sw_sim import SimError, run_graph

from .argtypes import int_range
from .cmd_common import add_memory_args, resolve_memory
from .errors import UserError
from .models import FUSIONS, add_model_args, load_compiled
from .ui import print_table

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("rank", help="rank a model's fusion x dataflow-order configurations by the heuristic",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    add_memory_args(p)
    p.add_argument("--per-group", type=int_range(1), default=8, metavar="N",
                   help="orders tried per fused group, one group varied at a time (default 8)")
    p.add_argument("--simulate", type=int_range(0), default=0, metavar="K", help="run the best K in sw_sim")
    p.add_argument("--top", type=int_range(1), default=15, metavar="N", help="rows to print (default 15)")
    p.add_argument("--json", action="store_true", help="print one JSON object (README 'Machine-readable output')")


def run(args: argparse.Namespace) -> int:
    if not args.model:
        raise UserError("rank needs --model (gcn, graphsage, sae, gpt)")
    if getattr(args, "numerics", None) is not None:
        raise UserError(f"--numerics {args.numerics}: rank orders configurations by estimated cycles, "
                        "which the value arithmetic does not change (sim --model takes --numerics)")
    if args.per_group < 1 or args.simulate < 0:
        raise UserError("--per-group must be at least 1 and --simulate at least 0")
    args.schedule, args.par = None, []
    model, placement = resolve_memory(args)
    fusions = FUSIONS if args.fusion in (None, "auto") else (args.fusion,)  # auto: rank all three
    case, ir, cm = load_compiled(args, choose=False)
    onchip = Placement(placement.onchip, strict=False)
    try:
        placement.check({t for g in cm.graphs for t in g.tensors}, f"model {args.model}")
        ranking = rank_model(
            ir, fusions=fusions, per_group=args.per_group,
            compile_kw={"locate": args.locate},
            estimate_kw={"memory": model, "placement": onchip},
            simulate=lambda c: run_model(c, simulate=run_graph, memory=model, onchip=onchip).total_cycles,
            top=args.simulate)
    except (MemoryError, SimError) as exc:
        raise UserError(str(exc)) from None
    sims = [c for c in ranking.configs if c.simulated is not None]
    first_fastest = None
    if sims:
        first_fastest = sims[0].simulated == min(c.simulated for c in sims)
    if args.json:
        print(json.dumps({
            "model": args.model, "dataset": args.dataset, "memory": model.to_json(),
            "onchip": sorted(placement.onchip), "enumerated": ranking.enumerated,
            "pruned_by_compiler": ranking.pruned_by_compiler, "not_built": ranking.not_built,
            "estimated": len(ranking.configs), "seconds": round(ranking.seconds, 3),
            "first_choice_fastest": first_fastest,
            "configs": [{"rank": k + 1, "fusion": c.fusion, "orders": {g: "".join(o) for g, o in c.orders.items()},
                         "est_cycles": round(c.estimate.cycles), "flops": round(c.estimate.flops_total),
                         "bytes": round(c.estimate.bytes_read + c.estimate.bytes_written),
                         "sim_cycles": c.simulated} for k, c in enumerate(ranking.configs)]}, indent=1))
        return 0
    print(f"{case.description}; memory {model.describe()}")
    print(f"{ranking.enumerated} configurations allowed by the compiler ({ranking.pruned_by_compiler} "
          f"index orders pruned by its constraints); {len(ranking.configs)} estimated, "
          f"{ranking.not_built} combinations of per-group orders not built; {ranking.seconds:.2f} s")
    rows = [[k + 1, c.label, round(c.estimate.cycles), f"{c.estimate.flops_total:.0f}",
             f"{c.estimate.bytes_read + c.estimate.bytes_written:.0f}",
             c.simulated if c.simulated is not None else "-"] for k, c in enumerate(ranking.configs[:args.top])]
    print_table(rows, ["rank", "configuration", "est. cycles", "FLOPs", "bytes", "sw_sim cycles"])
    if sims:
        best = min(sims, key=lambda c: c.simulated)
        verdict = "was" if first_fastest else f"was not (fastest simulated: {best.label}, {best.simulated})"
        print(f"the heuristic's first choice {verdict} the fastest of the {len(sims)} simulated")
    return 0
