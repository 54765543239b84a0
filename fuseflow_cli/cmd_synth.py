"""``fuseflow-hw synth``: synthesise, place and route a graph's board top (yosys + nextpnr).

Builds the accelerator behind the UART host bridge for a board, writes the bitstream and
``synth_report.json`` into BUILDDIR and prints LUT / FF / BRAM / DSP use and Fmax; each phase
of the build (yosys, nextpnr packing / placing / routing, the packer) is printed on stderr as it
starts.  The YoWASP tools (found next to the Python interpreter, then on PATH) are used unless
YOSYS, NEXTPNR_ICE40, ICEPACK, NEXTPNR_ECP5, ECPPACK name system tools.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from fpga.boards import Board
from fpga.capacity import TooLargeForChip, check_fits, check_max_nnz
from fpga.families import FAMILIES
from fpga.model_run import model_graphs, model_hw_config
from fpga.resource_model import load_model
from fpga.synth import PLACERS, SynthError, synthesize
from fuseflow.compiler.passes.fifo import set_accumulator_buffers
from fuseflow.ir.memory import MemoryError
from fuseflow.ir.samml import Graph
from hw.dram_model import ModelTop
from hw.elaborate import GraphTop, HwConfig
from hw.litedram import DramGraphTop, dram_timings

from . import board_args
from .argtypes import int_range, positive_float
from .board_model import board_model_manifest, refuse_host_work
from .board_search import board_pick, pick_text, searched
from .cmd_common import add_numerics_arg, with_numerics
from .errors import UserError
from .models import (
    add_host_steps_arg,
    add_model_args,
    load_compiled,
    manifest_source,
)
from .ui import phases, print_table

__all__ = ["add_parser", "board_top", "run"]


MAX_CLOCK_MHZ = 1000  # --clock-mhz above this is no goal place and route could meet


def _family_defaults(what) -> str:
    """``what(family)`` of every family, for the help texts of the family-dependent options."""
    return ", ".join(f"{what(f)} for {f.title}" for f in FAMILIES.values())


def add_parser(subparsers) -> None:
    p = board_args.add_board_parser(
        subparsers, "synth", "synthesise a graph's board top for an FPGA board", __doc__, graph=True
    )
    add_numerics_arg(p)
    p.add_argument("-o", "--outdir", required=True, metavar="BUILDDIR", help="build directory")
    p.add_argument(
        "--clock-mhz",
        type=positive_float,
        help="timing constraint for place and route (default: the board's oscillator, "
        "which the bitstream runs at); use it to measure Fmax against a goal",
    )
    board_args.add_baud_arg(p)
    p.add_argument("--seed", type=int_range(0), default=1, help="nextpnr placement seed")
    p.add_argument("--router", choices=("router1", "router2"),
                   help="nextpnr's router (default: nextpnr's, router1); router2 can route designs "
                        "where router1 does not converge")
    p.add_argument("--placer", choices=PLACERS,
                   help="nextpnr's placer (default: nextpnr's, heap); static can close a higher clock "
                        "on large designs (docs/fpga.md, 'Parallel lanes'); the resource model is "
                        "calibrated with the default")
    p.add_argument(
        "--json", action="store_true", help="print the report as JSON instead of a table"
    )
    p.add_argument(
        "--ram-fifo-depth",
        type=int,
        metavar="N",
        help="build output FIFOs of N or more slots in block RAM (same timing); default: "
        + _family_defaults(lambda f: f.ram_fifo_depth or "never")
        + " (block RAM where there is no distributed RAM); 0: never",
    )
    p.add_argument(
        "--spacc-block-ram",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep sparse-accumulator sums in block RAM (same timing); default: "
        + _family_defaults(lambda f: "on" if f.spacc_block_ram else
                           f"on from {f.spacc_block_ram_min_dim} entries" if f.spacc_block_ram_min_dim else "off"),
    )
    p.add_argument(
        "--spacc-buffers",
        type=int,
        choices=(1, 2),
        default=None,
        help="sparse-accumulator banks: 2 overlaps a fiber's flush with the next fiber's "
        "accumulation (twice the sum words), 1 does not; default: "
        + _family_defaults(lambda f: str(f.spacc_buffers)),
    )
    board_args.add_dram_placement_args(p)
    add_model_args(p, build=True)
    add_host_steps_arg(p)


def _graph(args: argparse.Namespace) -> Graph:
    """The graph to build: GRAPH.json, --kernel, or the largest graph of --model."""
    if args.graph is None and args.kernel is None and args.model is None:
        raise UserError("give GRAPH.json, --kernel NAME or --model NAME")
    if args.model is None:
        return board_args.graph_from_args(args)
    if args.graph is not None or args.kernel is not None:
        raise UserError("give one of GRAPH.json, --kernel NAME or --model NAME")
    _, _, cm = load_compiled(args)
    graph = cm.largest_graph()
    print(f"{args.model} / {args.fusion}: {len(cm.graphs)} graphs; synthesising the largest, "
          f"{graph.name!r} ({len(graph.nodes)} nodes)", file=sys.stderr if getattr(args, "json", False) else sys.stdout)
    return graph


def _config(args: argparse.Namespace, graph: Graph, board: Board) -> HwConfig:
    """The hardware config of the options, with the board family's block-RAM defaults."""
    cfg = board_args.config_from_args(args, graph)
    family = board.family
    ram = getattr(args, "ram_fifo_depth", None)
    ram = ram if ram is not None else family.ram_fifo_depth
    if ram is not None and ram != 0 and ram < 2:
        raise UserError(f"--ram-fifo-depth {ram}: use 0 (never) or a depth of at least 2")
    spacc_bram = getattr(args, "spacc_block_ram", None)
    min_dim = None  # --spacc-block-ram / --no-spacc-block-ram: every accumulator, or none
    if spacc_bram is None:
        spacc_bram, min_dim = family.spacc_block_ram, family.spacc_block_ram_min_dim
    cfg = replace(cfg, ram_fifo_depth=ram or None, spacc_block_ram=spacc_bram, spacc_block_ram_min_dim=min_dim)
    cfg = with_numerics(cfg, args.numerics, args.model is not None)
    try:
        check_max_nnz(cfg, board)
    except TooLargeForChip as exc:
        raise UserError(str(exc)) from None
    return cfg


def _synth_model(args: argparse.Namespace, board: Board, dram: str) -> tuple[object, HwConfig, str]:
    """A whole model on a board with DRAM: every graph in one top (hw.dram_model.ModelTop)."""
    if args.graph is not None or args.kernel is not None:
        raise UserError("give one of GRAPH.json, --kernel NAME or --model NAME")
    _, ir, cm = load_compiled(args)
    refuse_host_work(args, cm)
    graphs = model_graphs(cm)
    buffers = getattr(args, "spacc_buffers", None) or board.family.spacc_buffers
    for g in graphs:
        set_accumulator_buffers(g, buffers)
    cfg = _config(args, cm.largest_graph(), board)
    names = board_args.model_onchip(args, graphs)
    try:
        cfg = model_hw_config(cm, ir, cfg, dram, onchip=names, min_bytes=args.dram_min_bytes)
        top = ModelTop(graphs, cfg, dram, sim=False, name=args.model)
        top.manifest = board_model_manifest(args, cm, top, board.name)  # model.json beside the build files
    except (ValueError, MemoryError) as exc:
        raise UserError(str(exc)) from None
    size = dram_timings(dram)["size_bytes"]
    if top.allocator.next > size:
        top.discard()
        raise UserError(f"model {args.model} does not fit the {board.name}'s DRAM: its tensors need "
                        f"{top.allocator.next / 2**20:.1f} MB, the board has {size / 2**20:.0f} MB")
    if not getattr(args, "json", False):
        print(f"{args.model} / {args.fusion}: {len(graphs)} graphs in one top ({', '.join(g.name for g in graphs)}), "
              f"tensors in the {board.name}'s DRAM ({top.allocator.next:,} bytes, LiteDRAM {dram}) but "
              f"{', '.join(cfg.onchip) or 'none'}")
    return top, cfg, args.model


def board_top(args: argparse.Namespace, board: Board):
    """``(make_top, what, baud)`` of the options: the board top to build (made by ``make_top()``,
    after the capacity check), what it is for the messages, and the UART's baud rate.  A whole
    model on a board with DRAM is every graph in one top; otherwise the graph (a model's
    largest), at the fusion granularity the board search picks (``board_search.board_pick``)
    unless ``--fusion`` / ``--schedule`` give one, where the family has a resource model."""
    dram_name = board_args.dram_name(board)
    if args.model is not None and dram_name and args.dram is not False:
        top, _, what = _synth_model(args, board, dram_name)
        return (lambda: top), f"model {what!r}", board_args.baud_of(args, True)
    if getattr(args, "no_host_steps", False):
        raise UserError(f"--no-host-steps: a whole model is one top only on a board with DRAM (with --dram); "
                        f"on the {board.name} the model's largest graph is built alone")
    if searched(args) and load_model(board.family.name) is not None:  # the board search's granularity
        pick = board_pick(args, board, load_compiled)
        args.fusion, args.assoc = pick["fusion"], pick["assoc_option"]
        print(pick_text(pick, board), file=sys.stderr if getattr(args, "json", False) else sys.stdout)
    graph = _graph(args)
    buffers = getattr(args, "spacc_buffers", None) or board.family.spacc_buffers
    changed = set_accumulator_buffers(graph, buffers)
    if changed and not getattr(args, "json", False):
        print(f"sparse accumulators {', '.join(changed)}: {buffers} bank(s) of sums "
              f"({board.family.title} default; --spacc-buffers to choose); the cycle count is "
              "that of this graph (graph.json in the output directory)")
    cfg = _config(args, graph, board)
    dram = board_args.dram_setup(args, board, graph, cfg)
    baud = board_args.baud_of(args, dram)
    if dram is not None:
        cfg = dram.cfg
        if not getattr(args, "json", False):
            print(f"tensors in the {board.name}'s DRAM (LiteDRAM {dram.dram}) unless listed on chip:")
            print("\n".join(dram.lines()))

    def make_top():
        check_fits(graph, cfg, board, dram_size=dram.size_bytes if dram else None)  # before minutes of elaboration
        return DramGraphTop(graph, cfg, dram.dram, sim=False) if dram else GraphTop(graph, cfg)

    return make_top, repr(graph.name), baud


def run(args: argparse.Namespace) -> int:
    board = board_args.board_from_args(args)
    if args.clock_mhz is not None and not 0 < args.clock_mhz <= MAX_CLOCK_MHZ:
        raise UserError(f"--clock-mhz {args.clock_mhz:g}: a timing goal between 0 and {MAX_CLOCK_MHZ} MHz "
                        "(no FPGA fabric here clocks faster)")
    if manifest_source(args) and not (board_args.dram_name(board) and args.dram is not False):
        return _synth_each_graph(args, board)
    make_top, what, baud = board_top(args, board)
    return _synthesize(args, board, make_top, what, baud)


def _synth_each_graph(args: argparse.Namespace, board: Board) -> int:
    """``synth MODEL.json`` on a board without DRAM: every graph of the manifest's model
    synthesised on its own (``OUTDIR/<graph>/``), one report row each."""
    _, _, cm = load_compiled(args)
    refuse_host_work(args, cm)
    _, m = args.manifest
    caps = m.get("max_nnz", {})
    baud = board_args.baud_of(args, False)
    buffers = getattr(args, "spacc_buffers", None) or board.family.spacc_buffers
    records, rows = {}, []
    for g in cm.graphs:
        set_accumulator_buffers(g, buffers)
        args.max_nnz = [f"{t}={n}" for t, n in caps.items() if t in g.tensors] or None
        cfg = _config(args, g, board)
        try:
            check_fits(g, cfg, board)
            with phases(f"synthesising {g.name} for the {board.name}", enabled=not args.json) as progress:
                report = synthesize(GraphTop(g, cfg), board, Path(args.outdir) / g.name, clock_mhz=args.clock_mhz,
                                    baud=baud, seed=args.seed, progress=progress,
                                    router=args.router, placer=args.placer)
        except (SynthError, ValueError) as exc:
            raise UserError(f"model {args.model}, graph {g.name!r}: {exc}") from None
        records[g.name] = report.to_json()
        res = report.resources
        rows.append([g.name, *(res[k].used if k in res else "-" for k in ("LUT", "FF", "BRAM", "DSP")),
                     f"{report.fmax_mhz:.1f}", f"{g.name}/{report.bitstream}"])
    if args.json:
        print(json.dumps({"model": args.model, "fusion": args.fusion, "board": board.name, "graphs": records},
                         indent=1))
        return 0
    print(f"{args.model} / {args.fusion} on the {board.name}: {len(rows)} graphs, each its own bitstream "
          f"(a board without DRAM runs one graph at a time)")
    print_table(rows, ["graph", "LUT", "FF", "BRAM", "DSP", "Fmax MHz", "bitstream"])
    return 0


def _synthesize(args: argparse.Namespace, board: Board, make_top, what: str, baud: int) -> int:
    """Build the top ``make_top()`` returns for ``board`` (a refusal or a tool failure: a clear
    error) and print its report."""
    try:
        top = make_top()
        with phases(f"synthesising {what} for the {board.name}", enabled=not args.json) as progress:
            report = synthesize(top, board, args.outdir, clock_mhz=args.clock_mhz, baud=baud,
                                seed=args.seed, progress=progress, router=args.router,
                                placer=args.placer)
    except (SynthError, ValueError) as exc:
        raise UserError(str(exc)) from None
    write_manifest(top, args.outdir)
    return _print_report(args, report)


def write_manifest(top, out) -> None:
    """A whole model's top: its ``model.json`` (:func:`fuseflow_cli.models.board_model_manifest`)."""
    manifest = getattr(top, "manifest", None)
    if manifest is not None:
        (Path(out) / "model.json").write_text(json.dumps(manifest, indent=1) + "\n")


def _print_report(args: argparse.Namespace, report) -> int:
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
        return 0
    # the report's text with its resource rows as a rich table
    lines = report.table().splitlines()
    print(lines[0])
    print_table([[name, r.used, r.available, f"{r.percent:.1f}%"] for name, r in report.resources.items()],
                ["resource", "used", "avail", "use"])
    print("\n".join(line.strip() for line in lines[2 + len(report.resources):]))
    print(f"bitstream: {args.outdir}/{report.bitstream}; report: {args.outdir}/synth_report.json")
    return 0
