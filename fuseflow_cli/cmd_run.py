"""``fuseflow-hw run``: run a graph on an FPGA board over its UART and check it against sw_sim.

Loads the inputs through the board top's host bridge, starts the accelerator, polls until done,
reads the outputs, the hardware cycle counter and the overflow status (the nodes whose results
the hardware wrapped or saturated), and compares them with sw_sim (values equal, cycles equal,
the same nodes flagged).  ``--sim`` runs the same driver against the simulated board top
(Verilator) instead of a serial port.  Exit status 1 when the board disagrees with sw_sim or an
integer result wrapped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

import sw_sim
from fpga.board_sim import simulate_board
from fpga.board_top import config_from_json, host_view
from fpga.capacity import TooLargeForChip, check_fits
from fpga.host import BoardLink, BoardResult, LinkError, SerialTransport, run_on_board
from fuseflow.ir.graph_file import load_graph
from fuseflow.ir.samml import Graph, GraphError
from fuseflow.ir.tensor import TensorData
from hw.elaborate import HwConfig

from .argtypes import fraction, int_range, positive_float
from .board_args import (
    add_baud_arg,
    add_board_parser,
    board_from_args,
    config_from_args,
    graph_from_args,
    load_inputs,
    random_inputs,
)
from .cmd_common import add_overflow_arg, hw_overflow_text, overflow_mismatches, overflow_verdict
from .errors import UserError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = add_board_parser(
        subparsers, "run", "run a graph on an FPGA board (or its simulation) and check it",
        __doc__, graph=True,
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", help="serial port of the board's UART, e.g. /dev/ttyUSB1")
    where.add_argument(
        "--sim", action="store_true", help="simulate the board top (Verilator + UART model)"
    )
    p.add_argument(
        "--build",
        metavar="BUILDDIR",
        help="take graph, hardware config and baud rate from a fuseflow-hw synth build",
    )
    add_baud_arg(p)
    p.add_argument(
        "--data",
        help="inputs: .npz or .json of dense arrays named by input tensor "
        "(default: seeded random integers)",
    )
    p.add_argument(
        "--density", type=fraction, default=0.1, help="density of random sparse inputs (default 0.1)"
    )
    p.add_argument("--seed", type=int_range(0), default=0, help="seed of the random inputs")
    p.add_argument(
        "--timeout", type=positive_float, default=2.0, help="seconds to wait for each reply from the board"
    )
    add_overflow_arg(p)


def _from_build(args: argparse.Namespace) -> tuple[Graph, HwConfig, int]:
    d = Path(args.build)
    files = {n: d / n for n in ("graph.json", "design.json", "synth_report.json")}
    missing = [n for n, f in files.items() if not f.exists()]
    if missing:
        raise UserError(
            f"--build {args.build}: not a fuseflow-hw synth build directory (missing {', '.join(missing)})"
        )
    report = json.loads(files["synth_report.json"].read_text())
    if report["board"] != args.board:
        raise UserError(
            f"--build {args.build} was built for board {report['board']!r}, not {args.board!r}"
        )
    try:
        graph = load_graph(files["graph.json"])
    except GraphError as exc:
        raise UserError(f"--build {args.build}: {exc}") from None
    cfg = config_from_json(json.loads(files["design.json"].read_text())["hw_config"])
    return graph, cfg, int(report["baud"])


def _design(args: argparse.Namespace) -> tuple[Graph, HwConfig, int]:
    """The graph, hardware config and baud rate: from ``--build`` or from the graph options."""
    if not args.build:
        graph = graph_from_args(args)
        return graph, config_from_args(args, graph), args.baud
    if args.graph or args.kernel:
        raise UserError("--build takes the graph from the build directory: drop GRAPH.json / --kernel")
    return _from_build(args)


def _run_hardware(args: argparse.Namespace, graph: Graph, cfg: HwConfig, baud: int,
                  data: dict[str, TensorData]) -> BoardResult:
    """One run on the simulated board top (``--sim``) or on the board behind ``--port``."""
    try:
        if args.sim:
            [result] = simulate_board(graph, [data], cfg=cfg, on_overflow="ignore")  # checked in run()
            return result
        mmap, ident = host_view(graph, cfg)
        transport = SerialTransport(args.port, baud, timeout=args.timeout)
        try:
            return asyncio.run(run_on_board(BoardLink(transport), graph, data, mmap, ident, on_overflow="ignore"))
        finally:
            transport.close()
    except (LinkError, ValueError) as exc:
        raise UserError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    board = board_from_args(args)
    graph, cfg, baud = _design(args)
    try:  # the board's device must hold the tensors (before the data, sw_sim and the top)
        check_fits(graph, cfg, board)
    except TooLargeForChip as exc:
        raise UserError(str(exc)) from None
    if not 0 < args.density <= 1:
        raise UserError(f"--density {args.density}: must be in (0, 1]")
    data = (
        load_inputs(args.data, graph)
        if args.data
        else random_inputs(graph, cfg, args.density, args.seed)
    )
    try:  # the cycle model first: a graph that deadlocks stops here, naming the stalled nodes
        sw = sw_sim.run_graph(graph, data, val_width=cfg.vw, numerics=cfg.numerics,
                              on_overflow="ignore")  # --on-overflow is applied after the board run
    except (sw_sim.SimError, ValueError) as exc:
        raise UserError(f"sw_sim pre-check: {exc}") from None
    hw = _run_hardware(args, graph, cfg, baud, data)
    ok = True
    where = "simulated board" if args.sim else f"{args.board} on {args.port}"
    print(f"{graph.name} on {where}")
    for t, ref in sw.outputs.items():
        got, want = hw.outputs[t].to_dense(), ref.to_dense()
        same = got.shape == want.shape and bool(np.array_equal(got, want))
        ok &= same
        bad = (
            ""
            if same
            else f" ({int(np.sum(got != want)) if got.shape == want.shape else 'shape'} differ)"
        )
        print(f"  {t}: {'equal to sw_sim' if same else 'DIFFERS from sw_sim'}{bad}")
    cycles_ok = hw.cycles == sw.cycles
    ok &= cycles_ok
    print(f"  cycles: hardware {hw.cycles}, sw_sim {sw.cycles}{'' if cycles_ok else '  MISMATCH'}")
    print(f"  {hw_overflow_text(hw.overflow, 'hardware')}")
    mismatches = overflow_mismatches(sw.overflows, hw.overflow, "the hardware")
    for line in mismatches:
        print(f"  {line}")
    ok &= overflow_verdict(args, sw.overflow_records, f"graph {graph.name!r} (sw_sim)")
    return 0 if ok and not mismatches else 1
