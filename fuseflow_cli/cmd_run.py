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
import time
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
from fuseflow.options import Source
from hw.elaborate import HwConfig

from .applies import declare
from .argtypes import fraction, int_range, positive_float
from .board_args import (
    add_baud_arg,
    add_board_parser,
    add_dram_placement_args,
    baud_of,
    board_from_args,
    build_record,
    config_from_args,
    dram_setup,
    graph_from_args,
    load_inputs,
    random_inputs,
)
from .cmd_common import (
    GraphJob,
    add_numerics_arg,
    add_overflow_arg,
    add_save_arg,
    check_save_path,
    check_text,
    graph_numerics,
    hw_overflow_text,
    load_graph_job,
    overflow_mismatches,
    overflow_verdict,
    save_outputs,
)
from .cmd_run_model import run_model_on_board
from .errors import UserError
from .models import add_host_steps_arg, add_model_args
from .ui import load_progress

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
        "--density", type=fraction, default=None,
        help="density of random sparse inputs (default 0.1); with --model: of a synthetic graph's adjacency"
    )
    p.add_argument("--seed", type=int_range(0), default=0, help="seed of the random inputs")
    declare(p, Source.KERNEL | Source.GRAPH, "--data", "--seed")  # a model's inputs are its own
    p.add_argument(
        "--timeout", type=positive_float, default=2.0, help="seconds to wait for each reply from the board"
    )
    p.add_argument("--json", action="store_true",
                   help="print the result as JSON (outputs' check, cycles, sw_sim's, wall and load time)")
    add_dram_placement_args(p)
    add_overflow_arg(p)
    add_save_arg(p)
    add_numerics_arg(p)
    add_model_args(p, build=True)
    add_host_steps_arg(p)


def _from_build(args: argparse.Namespace) -> tuple[Graph, HwConfig, int]:
    d = Path(args.build)
    files = {n: d / n for n in ("graph.json", "design.json", "synth_report.json")}
    missing = [n for n, f in files.items() if not f.exists()]
    if missing:
        raise UserError(
            f"--build {args.build}: not a fuseflow-hw synth build directory (missing {', '.join(missing)})"
        )
    report = build_record(d, "synth_report.json", ("board",))
    if report["board"] != args.board:
        raise UserError(
            f"--build {args.build} was built for board {report['board']!r}, not {args.board!r}"
        )
    try:
        graph = load_graph(files["graph.json"])
    except GraphError as exc:
        raise UserError(f"--build {args.build}: {exc}") from None
    design = build_record(d, "design.json", ("hw_config",))
    cfg = config_from_json(design["hw_config"])
    if "dram" in design:  # built with its tensors in DRAM: the same placement
        if args.onchip or args.dram is False:
            raise UserError(f"--build {args.build}: the placement is the build's; drop --onchip / --no-dram")
        onchip = [r["tensor"] for r in design["dram"]["placement"] if r["place"] == "onchip"]
        args.dram, args.onchip, args.dram_min_bytes = True, [",".join(onchip)] if onchip else [], 0
    return graph, cfg, int(report["baud"])


def _design(args: argparse.Namespace) -> tuple[Graph, HwConfig, int, GraphJob | None]:
    """The graph, hardware config, baud rate and (``--data M.mtx``) the job with its data: from
    ``--build`` or from the graph options, with ``--numerics``."""
    if not args.build:
        if args.data and Path(args.data).suffix == ".mtx":  # the matrix shapes a kernel (as sim / rtl)
            job = load_graph_job(args, rtl=True)
            return job.graph, config_from_args(args, job.graph, job.numerics), args.baud, job
        graph = graph_from_args(args)
        return graph, config_from_args(args, graph, graph_numerics(args, rtl=True)), args.baud, None
    if args.graph or args.kernel:
        raise UserError("--build takes the graph from the build directory: drop GRAPH.json / --kernel")
    if args.numerics:
        raise UserError(f"--numerics {args.numerics}: the numerics are the build's (--build {args.build})")
    return (*_from_build(args), None)


def _run_hardware(args: argparse.Namespace, graph: Graph, cfg: HwConfig, baud: int,
                  data: dict[str, TensorData], dram: str | None) -> BoardResult:
    """One run on the simulated board top (``--sim``) or on the board behind ``--port``."""
    try:
        if args.sim:
            [result] = simulate_board(graph, [data], cfg=cfg, on_overflow="ignore", dram=dram)  # checked in run()
            return result
        mmap, ident = host_view(graph, cfg, dram)
        transport = SerialTransport(args.port, baud, timeout=args.timeout)
        try:
            with load_progress(f"loading {graph.name} over {args.port}", enabled=not args.json) as progress:
                return asyncio.run(run_on_board(BoardLink(transport), graph, data, mmap, ident, on_overflow="ignore",
                                                progress=progress))
        finally:
            transport.close()
    except (LinkError, ValueError) as exc:
        raise UserError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    board = board_from_args(args)
    if args.model:
        return run_model_on_board(args, board)
    check_save_path(args)
    if args.density is None:
        args.density = 0.1
    graph, cfg, baud, job = _design(args)
    setup = dram_setup(args, board, graph, cfg)
    baud = baud or baud_of(args, setup)
    if setup is not None:
        cfg = setup.cfg
    try:  # the board's device must hold the tensors (before the data, sw_sim and the top)
        check_fits(graph, cfg, board, dram_size=setup.size_bytes if setup else None)
    except TooLargeForChip as exc:
        raise UserError(str(exc)) from None
    if not 0 < args.density <= 1:
        raise UserError(f"--density {args.density}: must be in (0, 1]")
    if job is not None:
        data = job.data
    elif args.data:
        data = load_inputs(args.data, graph, cfg.num)
    else:
        data = random_inputs(graph, cfg, args.density, args.seed)
    try:  # the cycle model first: a graph that deadlocks stops here, naming the stalled nodes
        # under the board's DRAM preset when the tensors are in DRAM
        mem = {"memory": cfg.memory, "onchip": cfg.onchip} if setup else {}
        sw = sw_sim.run_graph(graph, data, val_width=cfg.vw, numerics=cfg.numerics,
                              on_overflow="ignore", **mem)  # --on-overflow is applied after the board run
    except (sw_sim.SimError, ValueError) as exc:
        raise UserError(f"sw_sim pre-check: {exc}") from None
    t0 = time.perf_counter()
    hw = _run_hardware(args, graph, cfg, baud, data, setup.dram if setup else None)
    wall = time.perf_counter() - t0
    ok = True
    where = "simulated board" if args.sim else f"{args.board} on {args.port}"
    report: dict = {"graph": graph.name, "board": args.board, "sim": bool(args.sim), "outputs": {},
                    "placement": setup.placement if setup else None}
    lines = [f"{graph.name} on {where}"]
    if setup:
        lines.append(f"  tensors in DRAM (LiteDRAM {setup.dram}): "
                     + ", ".join(r["tensor"] for r in setup.placement if r["place"] == "dram"))
    for t, ref in sw.outputs.items():
        got, want = hw.outputs[t].to_dense(), ref.to_dense()
        same = got.shape == want.shape and bool(np.array_equal(got, want))
        ok &= same
        differ = None if same else (int(np.sum(got != want)) if got.shape == want.shape else "shape")
        report["outputs"][t] = {"equal_to_sw_sim": same, "differ": differ}
        lines.append(f"  {t}: {'equal to sw_sim' if same else 'DIFFERS from sw_sim'}"
                     + ("" if same else f" ({differ} differ)"))
    saved = save_outputs(args, hw.outputs, cfg.num)
    report["saved"] = str(saved) if saved else None
    if saved:
        lines.append(f"  outputs saved: {saved}")
    check = job.check(hw.outputs) if job is not None else None
    if check is not None:  # a built-in kernel on the user's matrix: against scipy too
        ok &= check.ok
        report["check_against_numpy"] = {"ok": check.ok, "error": check.max_error, "tolerance": check.bound,
                                         "numerics": str(job.numerics)}
        lines.append("  " + check_text(str(job.numerics), check.ok, check.max_error, check.bound))
    if setup:  # the real controller against the preset: a statistical model, reported as a ratio
        ratio = hw.cycles / sw.cycles if sw.cycles else None
        lines.append(f"  cycles: hardware {hw.cycles}, sw_sim {sw.cycles} under preset {cfg.memory.name} "
                     f"(ratio {ratio:.3f}; the DRAM preset is statistical, docs/dram.md)")
        cycles_ok = True
    else:
        ratio = None
        cycles_ok = hw.cycles == sw.cycles
        lines.append(f"  cycles: hardware {hw.cycles}, sw_sim {sw.cycles}{'' if cycles_ok else '  MISMATCH'}")
    ok &= cycles_ok
    lines.append(f"  load: {hw.load_bytes:,} bytes over the link ({hw.load_bytes * 10 / baud:.3f} s at "
                 f"{baud:,} baud{f'; {hw.resent} transfers re-sent' if hw.resent else ''})")
    lines.append(f"  {hw_overflow_text(hw.overflow, 'hardware')}")
    mismatches = overflow_mismatches(sw.overflows, hw.overflow, "the hardware")
    lines += [f"  {line}" for line in mismatches]
    verdict = overflow_verdict(args, sw.overflow_records, f"graph {graph.name!r} (sw_sim)")
    ok &= verdict
    ok = ok and not mismatches
    report.update({"cycles": hw.cycles, "sw_sim_cycles": sw.cycles, "cycles_ratio": ratio,
                   "cycles_equal": hw.cycles == sw.cycles, "overflow": list(hw.overflow),
                   "wall_seconds": round(wall, 3), "load_bytes": hw.load_bytes,
                   # the UART time of the load at --baud (8N1: 10 bits a byte), not the simulation's
                   "load_seconds": round(hw.load_bytes * 10 / baud, 6), "baud": baud, "resent": hw.resent,
                   "check": "pass" if ok else "fail"})
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print("\n".join(lines))
    return 0 if ok else 1
