"""``fuseflow-hw synth``: synthesise, place and route a graph's board top (yosys + nextpnr).

Builds the accelerator behind the UART host bridge for a board, writes the bitstream and
``synth_report.json`` into BUILDDIR and prints LUT / FF / BRAM / DSP use and Fmax.  The YoWASP
tools are used unless YOSYS, NEXTPNR_ICE40, ICEPACK, NEXTPNR_ECP5, ECPPACK name system tools.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from .cli import UserError

__all__ = ["RAM_FIFO_DEPTH", "SPACC_BLOCK_RAM", "add_parser", "run"]

# FIFOs at least this deep go to block RAM by default, per FPGA family: the iCE40 has no
# distributed RAM, so a deep FIFO would otherwise be flip-flops and multiplexers
RAM_FIFO_DEPTH = {"ice40": 16}
# ... and so do the sparse accumulators' sums (the families where that is the default)
SPACC_BLOCK_RAM = {"ice40"}


def add_parser(subparsers) -> None:
    from fpga.board_top import DEFAULT_BAUD
    from fpga.cli_args import add_board_arg, add_graph_args

    p = subparsers.add_parser(
        "synth",
        help="synthesise a graph's board top for an FPGA board",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from fuseflow.models.cli import add_model_args

    from .cmd_common import add_numerics_arg

    add_graph_args(p)
    add_board_arg(p)
    add_numerics_arg(p)
    p.add_argument("-o", "--outdir", required=True, metavar="BUILDDIR", help="build directory")
    p.add_argument(
        "--clock-mhz",
        type=float,
        help="timing constraint for place and route (default: the board's oscillator, "
        "which the bitstream runs at); use it to measure Fmax against a goal",
    )
    p.add_argument(
        "--baud", type=int, default=DEFAULT_BAUD, help=f"UART baud rate (default {DEFAULT_BAUD})"
    )
    p.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    p.add_argument(
        "--json", action="store_true", help="print the report as JSON instead of a table"
    )
    p.add_argument(
        "--ram-fifo-depth",
        type=int,
        metavar="N",
        help="build output FIFOs of N or more slots in block RAM (same timing); default: "
        f"{RAM_FIFO_DEPTH['ice40']} on iCE40 (no distributed RAM there), never on ECP5; 0: never",
    )
    p.add_argument(
        "--spacc-block-ram",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep sparse-accumulator sums in block RAM (same timing); default: on for iCE40, "
        "off for ECP5 (its distributed RAM is faster)",
    )
    add_model_args(p, build=True)


def run(args: argparse.Namespace) -> int:
    from fpga.cli_args import board_from_args, config_from_args, graph_from_args
    from fpga.synth import SynthError, synthesize
    from hw.elaborate import GraphTop

    from .cmd_common import with_numerics

    board = board_from_args(args)
    if args.graph is None and args.kernel is None and args.model is None:
        raise UserError("give GRAPH.json, --kernel NAME or --model NAME")
    if args.model is not None:
        if args.graph is not None or args.kernel is not None:
            raise UserError("give one of GRAPH.json, --kernel NAME or --model NAME")
        from fuseflow.models.cli import load_compiled

        _, _, cm = load_compiled(args)
        graph = cm.largest_graph()
        print(f"{args.model} / {args.fusion}: {len(cm.graphs)} graphs; synthesising the largest, "
              f"{graph.name!r} ({len(graph.nodes)} nodes)")
    else:
        graph = graph_from_args(args)
    cfg = config_from_args(args, graph)
    ram = args.ram_fifo_depth if args.ram_fifo_depth is not None else RAM_FIFO_DEPTH.get(board.family)
    if ram is not None and ram != 0 and ram < 2:
        raise UserError(f"--ram-fifo-depth {ram}: use 0 (never) or a depth of at least 2")
    spacc_bram = args.spacc_block_ram
    if spacc_bram is None:
        spacc_bram = board.family in SPACC_BLOCK_RAM
    cfg = replace(cfg, ram_fifo_depth=ram or None, spacc_block_ram=spacc_bram)
    cfg = with_numerics(cfg, args.numerics, args.model is not None)
    if args.clock_mhz is not None and args.clock_mhz <= 0:
        raise UserError(f"--clock-mhz {args.clock_mhz}: must be positive")
    if args.baud <= 0:
        raise UserError(f"--baud {args.baud}: must be positive")
    try:
        top = GraphTop(graph, cfg)
        report = synthesize(
            top, board, args.outdir, clock_mhz=args.clock_mhz, baud=args.baud, seed=args.seed
        )
    except (SynthError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(json.dumps(report.to_json(), indent=1) if args.json else report.table())
    if not args.json:
        print(
            f"bitstream: {args.outdir}/{report.bitstream}; report: {args.outdir}/synth_report.json"
        )
    return 0
