"""The board search shared by ``rank --board`` and the board builds (``build --board``, ``synth``,
``--model``): every configuration of a model (fusion x dataflow order x association order, and
splits of the built graph into lanes) costed by the estimate, its built graph's resources and
clock predicted by the family's resource model (``fpga.resource_model``), the ones predicted to
fit the device with a margin ranked by predicted wall time (cycles / predicted Fmax)."""

from __future__ import annotations

import argparse
import json
import tempfile

from fpga.boards import Board, get_board
from fpga.resource_model import load_model, measured, over_budget
from fpga.synth import SynthError, synthesize
from fuseflow.cost import rank_model
from fuseflow.cost.choose import FUSIONS
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

from .board_args import dram_name
from .cmd_common import parse_max_nnz, resolve_memory
from .errors import UserError
from .ui import print_table

__all__ = ["board_pick", "label", "on_board", "pick_text", "print_board", "rank_entries", "searched"]


def label(assoc: str, c) -> str:
    return c.label if assoc == "as written" else f"{c.label}; {assoc}"


def rank_entries(args, ir, fusions, model, onchip, per_group: int | None = None):
    """Every association order (``--assoc auto``; else the one compiled) ranked and merged:
    ``([(association, config)] best first, the merged Ranking)``; sw_sim runs the best K."""
    orders = [("as written", ir)]
    if getattr(args, "assoc", None) == "auto":
        traced = args.traced_ir
        orders = [("; ".join(r.rewritten for r in sub) or "as written", reassociate(traced, list(sub)))
                  for sub in subsets(chain_pairs(traced))]
    entries, enumerated, pruned, not_built, seconds = [], 0, 0, 0, 0.0
    for assoc, cand in orders:
        r = rank_model(cand, fusions=fusions, per_group=per_group or args.per_group, compile_kw={"locate": args.locate},
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


def on_board(args, entries) -> dict:
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
            rows.append({"rank": k + 1, "configuration": label(assoc, c) + (f"; par {par}" if par else ""),
                         "fusion": c.fusion, "assoc": assoc,
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
    tops: dict[str, dict] = {}  # configurations whose built top is the same are placed and routed once
    for r in fitting[:args.synthesize]:
        key = json.dumps(r["_graph"].to_json(), sort_keys=True, default=str) + repr(r["_hw"])
        first = tops.setdefault(key, r)
        if first is r:
            _measure(r, board)
        elif "fmax_mhz" in first["measured"]:  # the same netlist: the same place and route (seeded)
            r["measured"] = {**first["measured"], "wall_us": round(r["est_cycles"] / first["measured"]["fmax_mhz"], 2),
                             "same_top_as": first["configuration"]}
        else:
            r["measured"] = {**first["measured"], "same_top_as": first["configuration"]}
    measured = [r for r in fitting if "measured" in r]
    verdict = None
    if measured:
        best = min(measured, key=lambda r: r["measured"]["wall_us"])
        verdict = {"pick": fitting[0]["configuration"], "best_measured": best["configuration"],
                   "pick_over_best": round(fitting[0]["measured"]["wall_us"] / best["measured"]["wall_us"], 3)}
    for r in rows:
        del r["_graph"], r["_hw"]
    return {"name": board.name, "device": board.device, "family": fam.name, "margin": args.margin,
            "model": rm.note, "top": _top_text(board), "fitting": len(fitting), "ranked": [r for r in fitting],
            "refused": [r for r in rows if r["over"]], "verdict": verdict}


def _top_text(board: Board) -> str:
    """What the predictions are of: the top a board without DRAM builds for a model."""
    what = "the model's largest graph in a top of its own, every tensor on chip"
    if dram_name(board):
        return (f"{what} (synth --no-dram on the {board.name}; its default top, the whole model with its "
                "tensors in DRAM, is not predicted yet)")
    return f"{what} (what synth --model builds on the {board.name})"


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
    res = measured({k: v.used for k, v in rep.resources.items()})
    r["measured"] = {**res, "fmax_mhz": round(rep.fmax_mhz, 1), "wall_us": round(r["est_cycles"] / rep.fmax_mhz, 2)}


def print_board(board: dict, top: int) -> None:
    print(f"\non {board['name']} ({board['device']}), {board['fitting']} configurations predicted to fit "
          f"with a {board['margin']:.0%} margin ({board['model']}), by predicted wall time; predicted: "
          f"{board['top']}:")
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


def searched(args: argparse.Namespace) -> bool:
    """Whether a board build of ``--model`` takes the board search's fusion granularity: the
    granularity is not given (``--fusion`` unset or ``auto``, no ``--schedule``)."""
    return (getattr(args, "model", None) is not None and getattr(args, "kernel", None) is None
            and getattr(args, "graph", None) is None and getattr(args, "fusion", None) in (None, "auto")
            and not getattr(args, "schedule", None) and getattr(args, "manifest", None) is None)


def board_pick(args: argparse.Namespace, board: Board, compile_model) -> dict:
    """The board search's pick of a fusion granularity (and, with ``--assoc auto``, association
    order) for ``--model`` on ``board`` (its largest graph, the one a board without DRAM builds):
    each with the compiler's dataflow orders, predicted on the board; the fastest in predicted
    wall time among those predicted to fit with a 10 % margin.  Returns its row (``fusion``,
    ``assoc``, ``assoc_option`` (the ``--assoc`` value that builds it), ``predicted``,
    ``wall_us``, ...) with ``next`` (the runner-up, or None); nothing fits: a
    :class:`UserError` naming the resource.  ``compile_model(ns)`` is
    ``fuseflow_cli.models.load_compiled``."""
    ns = argparse.Namespace(**vars(args))
    ns.board, ns.margin, ns.lanes, ns.synthesize, ns.simulate, ns.per_group = board.name, 0.1, 1, 0, 0, 1
    ns.schedule, ns.par, ns.fusion = None, [], None
    auto = getattr(args, "assoc", None) == "auto"
    if auto:
        ns.assoc = None  # compiled as written; every order is ranked below
    _, ir, _ = compile_model(ns, choose=False)
    options = {"as written": getattr(args, "assoc", None)}
    if auto:
        ns.assoc = "auto"
        options = {"; ".join(r.rewritten for r in sub) or "as written": ",".join(r.outer for r in sub) or "as-written"
                   for sub in subsets(chain_pairs(ns.traced_ir))}
    else:
        ns.assoc = None  # the order the options name is the one compiled, and the one built
    model, placement = resolve_memory(ns)
    onchip = Placement(placement.onchip, strict=False)
    try:
        entries, _ = rank_entries(ns, ir, FUSIONS, model, onchip, per_group=1)
    except (MemoryError, SimError) as exc:
        raise UserError(str(exc)) from None
    ranked = on_board(ns, entries)["ranked"]
    return {**ranked[0], "assoc_option": options[ranked[0]["assoc"]], "next": ranked[1] if len(ranked) > 1 else None}


def pick_text(pick: dict, board: Board) -> str:
    """The line a board build prints for the search's pick."""
    p = pick["predicted"]
    nxt = pick["next"]
    after = ""
    if nxt:
        with_assoc = "" if nxt["assoc"] == "as written" else f" with {nxt['assoc']}"
        after = f"; next: {nxt['fusion']}{with_assoc} {nxt['wall_us']:,.1f} us"
    assoc = "" if pick["assoc"] == "as written" else f" with {pick['assoc']}"
    return (f"board search -> {pick['fusion']}{assoc}: {pick['est_cycles']:,} estimated cycles at a predicted "
            f"{p['fmax_mhz']:.1f} MHz = {pick['wall_us']:,.1f} us, predicted {p['LUT']:,.0f} LUT, "
            f"{p['BRAM']:.0f} BRAM, {p['DSP']:.0f} DSP of the {board.device}{after} "
            f"(rank --model ... --board {board.name} for the table; --fusion / --assoc to choose)")
