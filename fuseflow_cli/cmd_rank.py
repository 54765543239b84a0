"""``fuseflow-hw rank --model M``: every fusion granularity x dataflow order (x association order,
with ``--assoc auto``) the compiler allows, ranked by the heuristic's cycle estimate; ``--simulate
K`` runs the best K in sw_sim and says whether the heuristic's first choice was the fastest of
them.  ``--board B`` ranks by predicted wall time instead (cycles / the clock the resource model
predicts for the board's family, ``fpga.resource_model``), keeping only the configurations
predicted to fit with ``--margin`` to spare; ``--synthesize K`` places and routes the best K and
prints predicted against measured."""

from __future__ import annotations

import argparse
import json

from fpga.boards import BOARDS
from fuseflow.ir.memory import MemoryError, Placement
from sw_sim import SimError

from .argtypes import fraction, int_range
from .board_search import label, on_board, print_board, rank_entries
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
    p.add_argument("--board", choices=sorted(BOARDS), help="rank by predicted wall time on this board, keeping "
                   "the configurations its device is predicted to hold (docs/fpga.md, 'Resource model')")
    p.add_argument("--margin", type=fraction, default=0.1, metavar="FRACTION",
                   help="with --board: resources kept free of the device's (default 0.1)")
    p.add_argument("--lanes", type=int_range(1, 64), default=1, metavar="L",
                   help="with --board: also every split of the built graph into at most L lanes (powers of "
                        "two over up to two indices, as --par auto): more lanes, fewer cycles, more LUTs")
    p.add_argument("--max-nnz", action="append", metavar="TENSOR=N",
                   help="with --board: capacity of a sparse tensor's memories in the built graph, as for "
                        "synth (repeatable; a tensor the graph lacks is left out)")
    p.add_argument("--synthesize", type=int_range(0), default=0, metavar="K",
                   help="with --board: place and route the best K and print predicted against measured")
    p.add_argument("--json", action="store_true", help="print one JSON object (README 'Machine-readable output')")


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    args.schedule, args.par = None, []
    model, placement = resolve_memory(args)
    fusions = FUSIONS if args.fusion in (None, "auto") else (args.fusion,)  # auto: rank all three
    case, ir, cm = load_compiled(args, choose=False)
    onchip = Placement(placement.onchip, strict=False)
    try:
        placement.check({t for g in cm.graphs for t in g.tensors}, f"model {args.model}")
        entries, ranking = rank_entries(args, ir, fusions, model, onchip)
    except (MemoryError, SimError) as exc:
        raise UserError(str(exc)) from None
    board = on_board(args, entries) if args.board else None
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
            "configs": [{"rank": k + 1, "fusion": c.fusion, "assoc": assoc,
                         "orders": {g: "".join(o) for g, o in c.orders.items()},
                         "est_cycles": round(c.estimate.cycles), "flops": round(c.estimate.flops_total),
                         "bytes": round(c.estimate.bytes_read + c.estimate.bytes_written),
                         "sim_cycles": c.simulated} for k, (assoc, c) in enumerate(entries)],
            "board": board}, indent=1))
        return 0
    print(f"{case.description}; memory {model.describe()}")
    print(f"{ranking.enumerated} configurations allowed by the compiler ({ranking.pruned_by_compiler} "
          f"index orders pruned by its constraints); {len(ranking.configs)} estimated, "
          f"{ranking.not_built} combinations of per-group orders not built; {ranking.seconds:.2f} s")
    rows = [[k + 1, label(assoc, c), round(c.estimate.cycles), f"{c.estimate.flops_total:.0f}",
             f"{c.estimate.bytes_read + c.estimate.bytes_written:.0f}",
             c.simulated if c.simulated is not None else "-"] for k, (assoc, c) in enumerate(entries[:args.top])]
    print_table(rows, ["rank", "configuration", "est. cycles", "FLOPs", "bytes", "sw_sim cycles"])
    if sims:
        best = min(sims, key=lambda c: c.simulated)
        verdict = "was" if first_fastest else f"was not (fastest simulated: {best.label}, {best.simulated})"
        print(f"the heuristic's first choice {verdict} the fastest of the {len(sims)} simulated")
    if board is not None:
        print_board(board, args.top)
    return 0


def _check_args(args: argparse.Namespace) -> None:
    if not args.model:
        raise UserError("rank needs --model (gcn, graphsage, sae, gpt)")
    if getattr(args, "numerics", None) is not None and not args.board:
        raise UserError(f"--numerics {args.numerics}: rank orders configurations by estimated cycles, "
                        "which the value arithmetic does not change (with --board it sizes the hardware)")
    if args.per_group < 1 or args.simulate < 0:
        raise UserError("--per-group must be at least 1 and --simulate at least 0")
    if not args.board and (args.synthesize or args.margin != 0.1 or args.lanes != 1 or args.max_nnz):
        raise UserError("--margin / --lanes / --max-nnz / --synthesize: for --board B (they size and build "
                        "for a board)")
    if args.margin >= 1:
        raise UserError(f"--margin {args.margin}: the fraction of the device kept free must be below 1")
