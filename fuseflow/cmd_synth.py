"""``fuseflow-hw synth``: synthesise, place and route a graph's board top (yosys + nextpnr).

Builds the accelerator behind the UART host bridge for a board, writes the bitstream and
``synth_report.json`` into BUILDDIR and prints LUT / FF / BRAM / DSP use and Fmax.  The YoWASP
tools are used unless YOSYS, NEXTPNR_ICE40, ICEPACK, NEXTPNR_ECP5, ECPPACK name system tools.
"""

from __future__ import annotations

import argparse
import json

from .cli import UserError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    from fpga.board_top import DEFAULT_BAUD
    from fpga.cli_args import add_board_arg, add_graph_args

    p = subparsers.add_parser(
        "synth",
        help="synthesise a graph's board top for an FPGA board",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_graph_args(p)
    add_board_arg(p)
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


def run(args: argparse.Namespace) -> int:
    from fpga.cli_args import board_from_args, config_from_args, graph_from_args
    from fpga.synth import SynthError, synthesize
    from hw.elaborate import GraphTop

    board = board_from_args(args)
    graph = graph_from_args(args)
    cfg = config_from_args(args, graph)
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
