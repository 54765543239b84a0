"""``fuseflow-hw build``: elaborate a SAMML graph to one Verilog top; with ``--model``, every graph
of the model and a manifest; with ``--board``, the board top's Verilog and build files (the
tools not run: ``synth`` runs them)."""

from __future__ import annotations

from pathlib import Path

from fpga.boards import BOARDS
from fpga.synth import prepare
from hw import HwConfig, build_graph
from rtl_sim.toolchain import lint

from . import board_args
from .argtypes import MAX_FIFO_DEPTH, int_range
from .board_args import DEFAULT_MIN_BYTES
from .cmd_common import (
    add_graph_args,
    add_numerics_arg,
    load_graph_job,
    parse_max_nnz,
    with_numerics,
)
from .cmd_synth import board_top, write_manifest  # the same design as synth's
from .errors import UserError
from .models import add_host_steps_arg, add_model_args, build_model
from .ui import print_table, spinner


def add_parser(sub) -> None:
    p = sub.add_parser("build", help="elaborate a graph to Verilog (+ memory map, summary, DOT)")
    add_graph_args(p)
    p.add_argument("-o", "--out", required=True, help="output directory")
    p.add_argument("--cw", type=int_range(2, 64), help="crd/ref data width (default 16; with --board: the "
                   "narrowest the graph needs, as synth)")
    p.add_argument("--vw", type=int_range(2, 64), default=32, help="value data width (default 32)")
    p.add_argument("--fifo-depth", type=int_range(2, MAX_FIFO_DEPTH), help="default channel FIFO depth (default: the graph's, 2)")
    p.add_argument("--max-nnz", action="append", metavar="TENSOR=N",
                   help="capacity (stored values) of a tensor's memories; default: its dense size")
    p.add_argument("--lint", action="store_true", help="also run verilator --lint-only on the result")
    add_numerics_arg(p)
    p.add_argument("--board", metavar="BOARD",
                   help=f"write the board top for BOARD ({', '.join(BOARDS)}): Verilog, constraints and "
                        "the build script synth would run, without running the tools; a whole model "
                        "on a board with DRAM is one top")
    board_args.add_baud_arg(p)
    board_args.add_dram_placement_args(p)
    add_model_args(p, build=True)
    add_host_steps_arg(p)


def run(args) -> int:
    if args.board is not None:
        return _build_board(args)
    board_only = [flag for flag, used in (("--baud", args.baud is not None), ("--dram/--no-dram", args.dram is not None),
                                          ("--onchip", bool(args.onchip)),
                                          ("--dram-min-bytes", args.dram_min_bytes != DEFAULT_MIN_BYTES),
                                          ("--no-host-steps", args.no_host_steps)) if used]
    if board_only:
        raise UserError(f"{', '.join(board_only)}: only with --board (a board top)")
    if args.cw is None:
        args.cw = 16
    if args.model:
        return build_model(args)
    job = load_graph_job(args)
    if args.cw < 10 or args.vw < 10:
        raise UserError("--cw and --vw must be at least 10 bits (control words use bits 9..0)")
    cfg = with_numerics(HwConfig(cw=args.cw, vw=args.vw, fifo_depth=args.fifo_depth,
                                 max_nnz=parse_max_nnz(args.max_nnz, job.graph)), args.numerics, False)
    out = Path(args.out)
    try:
        summary = build_graph(job.graph, out, cfg)
    except ValueError as exc:
        raise UserError(f"{job.source}: {exc}") from None
    (out / "graph.dot").write_text(job.graph.to_dot())
    print(f"{job.source} -> {out / summary['verilog']} ({summary['verilog_lines']} lines)")
    print_table(sorted(summary["primitives"].items()), ["primitive", "count"])
    mm = summary["memory_map"]
    rows = [[r["name"], hex(r["base"]), r["depth"], r["width"], "host writes" if r["access"] == "w" else "host reads"]
            for r in mm["regions"]]
    print_table(rows, ["array", "base", "depth", "width", "access"])
    print(f"host port: {mm['addr_width']}-bit word address; CTRL=0 (write 1: start), CYCLES=1, "
          f"output lengths at 2..{1 + len(mm['lengths'])}")
    for t, bank in mm.get("banks", {}).items():
        print(f"{t} is written in {len(bank['tensors'])} banks ({', '.join(bank['tensors'])}): {bank['interleave']}")
    if args.lint:
        with spinner("verilator --lint-only"):
            res = lint(out / summary["verilog"], summary["top"])
        print("verilator --lint-only:", "clean" if res.returncode == 0 else "FAILED")
        if res.returncode:
            print(res.stderr[-4000:])
            return 1
    return 0


def _build_board(args) -> int:
    """``build --board``: the top ``synth`` would build, written with its build files; the
    tools are not run."""
    unused = [flag for flag, used in (("--lint", args.lint), ("--fifo-depth", args.fifo_depth is not None)) if used]
    if unused:
        raise UserError(f"{', '.join(unused)}: not with --board (the board top is synth's, which has no such "
                        "option; build without --board for a linted or deeper-FIFO graph top)")
    if args.cw is None:
        args.cw = "auto"
    board = board_args.board_from_args(args)
    make_top, what, baud = board_top(args, board)
    try:
        top = make_top()
        with spinner(f"elaborating {what} for the {board.name}"):
            p = prepare(top, board, args.out, baud=baud, verilog=True)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    out = Path(args.out)
    write_manifest(top, out)
    verilog = out / str(p.verilog)
    print(f"{what} for the {board.name} -> {verilog} ({verilog.read_text().count(chr(10)):,} lines); "
          f"ident {p.ident:#010x}, UART {p.baud:,} baud at {p.uart_hz / 1e6:g} MHz")
    extra = sorted(f.name for f in out.glob("*.v") if f.name != p.verilog)
    print(f"build files: {p.name}.il (what yosys reads), {p.name}.ys, the constraints"
          + (f", {', '.join(extra)}" if extra else "")
          + f", {p.script}.sh; memory_map.json, design.json, "
          + ("graphs/, model.json (the steps in order, the graphs' places in the top and the on-chip "
             "sequencer's runs)" if hasattr(top, "subs") else "graph.json"))
    print(f"run the tools: fuseflow-hw synth with the same options (or sh {out}/{p.script}.sh with "
          "yosys and nextpnr on PATH)")
    return 0
