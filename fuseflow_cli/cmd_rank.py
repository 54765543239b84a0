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

import tempfile

from fpga.boards import BOARDS, get_board
from fpga.resource_model import load_model, over_budget
from fpga.synth import SynthError, synthesize
from fuseflow.cost import rank_model
from fuseflow.cost.graph import estimate_graph
from fuseflow.cost.model import estimate_model
from fuseflow.cost.par_search import par_text, split_graphs
from fuseflow.cost.rank import Ranking
from fuseflow.ir.memory import MemoryError, Placement
from fuseflow.ir.numerics import Numerics
from fuseflow.models.assoc import chain_pairs, reassociate, subsets
from fuseflow.models.plan import run_model
from hw.elaborate import GraphTop, HwConfig, crd_width_needed
from sw_sim import SimError, run_graph

from .argtypes import fraction, int_range
from .cmd_common import add_memory_args, parse_max_nnz, resolve_memory
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
        entries, ranking = _rank(args, ir, fusions, model, onchip)
    except (MemoryError, SimError) as exc:
        raise UserError(str(exc)) from None
    board = _on_board(args, entries) if args.board else None
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
    rows = [[k + 1, _label(assoc, c), round(c.estimate.cycles), f"{c.estimate.flops_total:.0f}",
             f"{c.estimate.bytes_read + c.estimate.bytes_written:.0f}",
             c.simulated if c.simulated is not None else "-"] for k, (assoc, c) in enumerate(entries[:args.top])]
    print_table(rows, ["rank", "configuration", "est. cycles", "FLOPs", "bytes", "sw_sim cycles"])
    if sims:
        best = min(sims, key=lambda c: c.simulated)
        verdict = "was" if first_fastest else f"was not (fastest simulated: {best.label}, {best.simulated})"
        print(f"the heuristic's first choice {verdict} the fastest of the {len(sims)} simulated")
    if board is not None:
        _print_board(board, args.top)
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


def _label(assoc: str, c) -> str:
    return c.label if assoc == "as written" else f"{c.label}; {assoc}"


def _rank(args, ir, fusions, model, onchip):
    """Every association order (``--assoc auto``; else the one compiled) ranked and merged:
    ``([(association, config)] best first, the merged Ranking)``; sw_sim runs the best K."""
    orders = [("as written", ir)]
    if getattr(args, "assoc", None) == "auto":
        traced = args.traced_ir
        orders = [("; ".join(r.rewritten for r in sub) or "as written", reassociate(traced, list(sub)))
                  for sub in subsets(chain_pairs(traced))]
    entries, enumerated, pruned, not_built, seconds = [], 0, 0, 0, 0.0
    for assoc, cand in orders:
        r = rank_model(cand, fusions=fusions, per_group=args.per_group, compile_kw={"locate": args.locate},
                       estimate_kw={"memory": model, "placement": onchip})
        entries += [(assoc, c) for c in r.configs]
        enumerated, pruned, not_built = enumerated + r.enumerated, pruned + r.pruned_by_compiler, not_built + r.not_built
        seconds += r.seconds
    entries.sort(key=lambda e: e[1].estimate.cycles)
    for _, c in entries[:args.simulate]:
        c.simulated = run_model(c.model, simulate=run_graph, memory=model, onchip=onchip).total_cycles
    return entries, Ranking([c for _, c in entries], enumerated, pruned, not_built, seconds)


def _hw_config(args, graph, family) -> HwConfig:
    """The hardware config ``synth --model`` builds a model's graph with (``--numerics``,
    Q16.16 by default; ``--cw auto``; the ``--max-nnz`` of the graph's tensors; the family's
    block-RAM defaults)."""
    try:
        num = Numerics.parse(getattr(args, "numerics", None) or "q16.16")
    except ValueError as exc:
        raise UserError(f"--numerics {args.numerics}: {exc}") from None
    items = [i for i in (args.max_nnz or []) if i.partition("=")[0] in graph.tensors]
    max_nnz = parse_max_nnz(items, graph)
    return HwConfig(cw=crd_width_needed(graph, max_nnz)[0], vw=num.width, numerics=num, max_nnz=max_nnz,
                    ram_fifo_depth=family.ram_fifo_depth, spacc_block_ram=family.spacc_block_ram,
                    spacc_block_ram_min_dim=family.spacc_block_ram_min_dim)


def _on_board(args, entries) -> dict:
    """Predicted resources, Fmax and wall time of every configuration's largest graph (the
    one ``synth --model`` builds) on ``args.board``; the fitting ones by predicted wall time,
    the best ``--synthesize`` K placed and routed.  Nothing fits: a refusal naming the resource."""
    board = get_board(args.board)
    fam = board.family
    rm = load_model(fam.name)
    if rm is None:
        raise UserError(f"--board {board.name}: no resource model for the {fam.title} family yet "
                        f"(python bench/resource_calibration.py run --family {fam.name}, then fit)")
    rows = []
    for k, (assoc, c) in enumerate(entries):
        for par, g, cycles in _splits(args, c):
            hw = _hw_config(args, g, fam)
            pred = rm.predict(g, hw)
            wall = cycles / pred["fmax_mhz"] if pred["fmax_mhz"] > 0 else float("inf")
            rows.append({"rank": k + 1, "configuration": _label(assoc, c) + (f"; par {par}" if par else ""),
                         "graph": g.name, "par": par, "est_cycles": round(cycles),
                         "predicted": {r: round(v, 1) for r, v in pred.items()},
                         "over": over_budget(pred, board.device, args.margin), "wall_us": round(wall, 2),
                         "_graph": g, "_hw": hw})
    fitting = sorted((r for r in rows if not r["over"]), key=lambda r: r["wall_us"])
    if not fitting:
        least = min(rows, key=lambda r: len(r["over"]))
        raise UserError(f"rank --board {board.name}: no configuration is predicted to fit the {board.device} "
                        f"with a {args.margin:.0%} margin; the closest, {least['configuration']}, needs "
                        f"{'; '.join(least['over'])}")
    for r in fitting[:args.synthesize]:
        _measure(r, board)
    measured = [r for r in fitting if "measured" in r]
    verdict = None
    if measured:
        best = min(measured, key=lambda r: r["measured"]["wall_us"])
        verdict = {"pick": fitting[0]["configuration"], "best_measured": best["configuration"],
                   "pick_over_best": round(fitting[0]["measured"]["wall_us"] / best["measured"]["wall_us"], 3)}
    for r in rows:
        del r["_graph"], r["_hw"]
    return {"name": board.name, "device": board.device, "family": fam.name, "margin": args.margin,
            "model": rm.note, "fitting": len(fitting), "ranked": [r for r in fitting],
            "refused": [r for r in rows if r["over"]], "verdict": verdict}


def _splits(args, c):
    """``(par text, graph, the model's estimated cycles)`` of the configuration's built (largest)
    graph: as it is, and with ``--lanes L`` each legal split of it into at most L lanes (its own
    estimate in place of the unsplit graph's; the model's other graphs unchanged)."""
    g = c.model.largest_graph()
    yield "", g, c.estimate.cycles
    if args.lanes < 2:
        return
    model, placement = resolve_memory(args)
    onchip = Placement(placement.onchip, strict=False)
    inputs: dict = {}
    estimate_model(c.model, graph_inputs=inputs, memory=model, placement=onchip)
    base = estimate_graph(g, inputs[g.name], memory=model, placement=onchip)[0].cycles
    for par, split, _exc in split_graphs(g, args.lanes):
        if split is not None and par:
            cycles = estimate_graph(split, inputs[g.name], memory=model, placement=onchip)[0].cycles
            yield par_text(par), split, c.estimate.cycles - base + cycles


def _measure(r: dict, board) -> None:
    """Place and route one configuration's graph; its measured resources, Fmax and wall time."""
    with tempfile.TemporaryDirectory(prefix="fuseflow-rank-") as tmp:
        try:
            rep = synthesize(GraphTop(r["_graph"], r["_hw"]), board, tmp, clock_mhz=board.family.fmax_goal_mhz)
        except SynthError as exc:
            r["measured"] = {"error": str(exc).splitlines()[0], "wall_us": float("inf")}
            return
    res = {k: v.used for k, v in rep.resources.items()}
    r["measured"] = {**res, "fmax_mhz": round(rep.fmax_mhz, 1), "wall_us": round(r["est_cycles"] / rep.fmax_mhz, 2)}


def _print_board(board: dict, top: int) -> None:
    print(f"\non {board['name']} ({board['device']}), {board['fitting']} configurations predicted to fit "
          f"with a {board['margin']:.0%} margin ({board['model']}), by predicted wall time:")
    rows = []
    for r in board["ranked"][:top]:
        p, m = r["predicted"], r.get("measured", {})
        rows.append([r["rank"], r["configuration"], r["est_cycles"], f"{p['LUT']:,.0f}", f"{p['BRAM']:.0f}",
                     f"{p['DSP']:.0f}", f"{p['fmax_mhz']:.1f}", f"{r['wall_us']:,.1f}",
                     f"{m['fmax_mhz']} MHz, {m['wall_us']:,.1f} us" if "fmax_mhz" in m else m.get("error", "-")])
    print_table(rows, ["rank", "configuration", "est. cycles", "LUT", "BRAM", "DSP", "Fmax MHz", "wall us",
                       "placed and routed"])
    if board["verdict"]:
        v = board["verdict"]
        print(f"the pick {v['pick']} runs {v['pick_over_best']:.2f}x the wall time of the fastest placed and "
              f"routed ({v['best_measured']})")
