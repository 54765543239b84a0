"""Command-line pieces shared by ``fuseflow-hw synth`` / ``run`` / ``flash``: choosing a graph
(GRAPH.json or a built-in kernel), the hardware configuration, the board and input data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from fpga.board_top import DEFAULT_BAUD, DRAM_BAUD
from fpga.boards import BOARDS, Board, get_board
from fuseflow.ir.graph_file import load_graph
from fuseflow.ir.json_file import JsonFileError, read_json
from fuseflow.ir.numerics import Mode, Numerics
from fuseflow.ir.quantize import quantized_input
from fuseflow.ir.samml import Graph, GraphError
from fuseflow.ir.tensor import Format, TensorData
from fuseflow.kernels import check_drawable
from hw.elaborate import HwConfig
from hw.litedram import DRAM_BOARDS, dram_placement, dram_timings
from rtl_sim.dram import dram_config

from .argtypes import int_range
from .cmd_common import (
    add_graph_source_args,
    add_schedule_args,
    add_width_args,
    apply_par,
    kernel_graph_of,
    kernel_options,
    onchip_names,
    parse_max_nnz,
    resolve_widths,
)
from .cmd_rtl_dram import DEFAULT_MIN_BYTES
from .errors import UserError

__all__ = [
    "build_record",
    "DramSetup",
    "add_baud_arg",
    "add_board_arg",
    "add_board_parser",
    "add_dram_placement_args",
    "add_graph_args",
    "baud_of",
    "board_from_args",
    "config_from_args",
    "dram_name",
    "dram_setup",
    "graph_from_args",
    "load_inputs",
    "model_onchip",
    "onchip_names",
    "random_inputs",
]


def add_graph_args(p: argparse.ArgumentParser) -> None:
    add_graph_source_args(p, graph_help="SAMML graph JSON (from fuseflow-hw compile / build), or the "
                          "model.json of build --model (synth: every graph of its model)",
                          kernel_help="a built-in kernel instead of GRAPH.json",
                          size_help="kernel size N (N×N operands; default 64)")
    p.add_argument(
        "--max-nnz",
        action="append",
        default=[],
        metavar="TENSOR=N",
        help="memory capacity (stored values) of a sparse input or output, e.g. B=512; "
        "repeatable; default: the dense size, which rarely fits an FPGA",
    )
    add_width_args(p, vw_help="value data width in bits (default 32; 16 fits one DSP)")
    add_schedule_args(p)


def add_board_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--board", required=True, metavar="BOARD", help=f"target board: {', '.join(BOARDS)}"
    )


def add_board_parser(subparsers, name: str, help: str, doc: str, *, graph: bool
                     ) -> argparse.ArgumentParser:
    """The parser of a board subcommand: ``doc`` as its description, the graph options when
    ``graph``, then ``--board``."""
    p = subparsers.add_parser(
        name, help=help, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if graph:
        add_graph_args(p)
    add_board_arg(p)
    return p


def add_dram_placement_args(p: argparse.ArgumentParser) -> None:
    """``--dram`` / ``--no-dram``, ``--onchip`` and ``--dram-min-bytes``: where a board with DRAM
    keeps the tensors (docs/board.md)."""
    p.add_argument("--dram", action=argparse.BooleanOptionalAction, default=None,
                   help="keep tensors in the board's DRAM through a generated LiteDRAM controller "
                        "(default on boards with DRAM: " + ", ".join(_dram_boards()) + "); "
                        "--no-dram keeps every tensor in on-chip RAM")
    p.add_argument("--onchip", action="append", default=[], metavar="TENSOR[,TENSOR]",
                   help="with DRAM: keep these tensors on chip; repeatable")
    p.add_argument("--dram-min-bytes", type=int_range(0), default=DEFAULT_MIN_BYTES, metavar="N",
                   help=f"with DRAM: tensors smaller than N bytes stay on chip (default {DEFAULT_MIN_BYTES})")


def _dram_boards() -> list[str]:
    return [n for b in DRAM_BOARDS.values() for n in b.boards]


class DramSetup:
    """The DRAM of a board top: the LiteDRAM board name, the config with its placement, and
    where every tensor went (``placement``: rows of tensor, place, bytes, why)."""

    def __init__(self, dram: str, cfg: HwConfig, placement: list[dict], size_bytes: int) -> None:
        self.dram, self.cfg, self.placement, self.size_bytes = dram, cfg, placement, size_bytes

    def lines(self) -> list[str]:
        return [f"  {r['tensor']}: {'DRAM' if r['place'] == 'dram' else 'on chip'}, {r['bytes']:,} bytes"
                + (f" ({r['why']})" if r["why"] else "") for r in self.placement]


def model_onchip(args: argparse.Namespace, graphs) -> list[str]:
    """``--onchip`` for a whole model: each name must be a tensor of one of its graphs."""
    names = onchip_names(args)
    every = {t for g in graphs for t in g.tensors}
    unknown = sorted(set(names) - every)
    if unknown:
        raise UserError(f"--onchip: no tensor {', '.join(map(repr, unknown))} in model {args.model} "
                        f"(its tensors: {', '.join(sorted(every))})")
    return names


def dram_name(board: Board) -> str | None:
    """The LiteDRAM board name of ``board``'s DRAM (None: it has none)."""
    return next((name for name, b in DRAM_BOARDS.items() if board.name in b.boards), None)


def dram_setup(args: argparse.Namespace, board: Board, graph: Graph, cfg: HwConfig) -> DramSetup | None:
    """The DRAM placement of the command line on ``board`` (None: every tensor on chip)."""
    dram = dram_name(board)
    want = getattr(args, "dram", None)
    names = onchip_names(args)
    if want and dram is None:
        raise UserError(f"--dram: board {board.name!r} has no DRAM (boards with DRAM: {', '.join(_dram_boards())})")
    if dram is None or want is False:
        if names:
            raise UserError(f"--onchip {','.join(names)}: every tensor is on chip already "
                            + ("(--no-dram)" if want is False else f"(board {board.name!r} has no DRAM)"))
        return None
    unknown = sorted(set(names) - set(graph.tensors))
    if unknown:
        raise UserError(f"--onchip: no tensor {', '.join(map(repr, unknown))} in graph {graph.name!r} "
                        f"(its tensors: {', '.join(graph.tensors)})")
    try:
        dcfg = dram_config(graph, cfg, dram, onchip=names, min_bytes=args.dram_min_bytes)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    rows = dram_placement(graph, names, min_bytes=args.dram_min_bytes, cw=cfg.cw, vw=cfg.vw, max_nnz=cfg.max_nnz)
    return DramSetup(dram, dcfg, rows, dram_timings(dram)["size_bytes"])


def add_baud_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--baud", type=int_range(1), default=None,
        help=f"UART baud rate (default {DEFAULT_BAUD:,}; with DRAM {DRAM_BAUD:,}, which the controller's "
             "50 MHz clock divides exactly)"
    )


def baud_of(args: argparse.Namespace, dram) -> int:
    """``--baud``, else the default of the design (with DRAM or without)."""
    return args.baud or (DRAM_BAUD if dram else DEFAULT_BAUD)


def board_from_args(args: argparse.Namespace) -> Board:
    try:
        return get_board(args.board)
    except KeyError as exc:
        raise UserError(exc.args[0]) from None


def graph_from_args(args: argparse.Namespace) -> Graph:
    if (args.graph is None) == (args.kernel is None):
        raise UserError("give either GRAPH.json or --kernel NAME (not both)")
    if args.kernel is not None:
        if args.size < 1:
            raise UserError(f"--size {args.size}: the kernel size must be at least 1")
        return apply_par(args, kernel_graph_of(args), f"kernel {args.kernel}")
    kernel_options(args)
    path = Path(args.graph)
    if not path.is_file():
        raise UserError(f"graph file {args.graph!r} does not exist")
    try:
        graph = load_graph(path)
    except GraphError as exc:
        raise UserError(str(exc)) from None
    return apply_par(args, graph, args.graph)


def config_from_args(args: argparse.Namespace, graph: Graph, numerics: Numerics | None = None) -> HwConfig:
    """The hardware config of the graph options: widths, ``--max-nnz`` and fixed-point
    ``numerics`` (which set the value width)."""
    max_nnz = parse_max_nnz(args.max_nnz, graph)
    cw, vw = resolve_widths(args, graph, max_nnz, numerics)
    if numerics is not None and numerics.mode is Mode.FIXED:
        return HwConfig(cw=cw, vw=vw, max_nnz=max_nnz, numerics=numerics)
    return HwConfig(cw=cw, vw=vw, max_nnz=max_nnz)


def random_inputs(graph: Graph, cfg: HwConfig, density: float, seed: int) -> dict[str, TensorData]:
    """Seeded random integer inputs: sparse tensors at ``density`` (capped by their max_nnz),
    quantised under fixed-point numerics."""
    try:
        check_drawable(graph)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    rng = np.random.default_rng(seed)
    data: dict[str, TensorData] = {}
    for t in graph.input_tensors():
        spec = graph.tensors[t]
        values = rng.integers(-8, 8, size=spec.shape)
        values[values == 0] = 1
        if any(f is not Format.DENSE for f in spec.fmt.levels):
            mask = rng.random(spec.shape) < density
            cap = cfg.nnz_for(t)
            if cap is not None and mask.sum() > cap:
                keep = rng.permutation(np.flatnonzero(mask))[:cap]
                mask = np.zeros(mask.size, dtype=bool)
                mask[keep] = True
                mask = mask.reshape(spec.shape)
            values = values * mask
        if cfg.num.mode is Mode.FIXED:  # the integers as fixed-point values
            values = cfg.num.quantize(values.astype(np.float64))
        data[t] = TensorData.from_dense(values, spec.fmt)
    return data


def load_inputs(path: str, graph: Graph, num: Numerics | None = None) -> dict[str, TensorData]:
    """Inputs from an ``.npz`` (or ``.json``: name -> nested list) of dense arrays per input
    tensor, in the datapath's numbers ``num`` (fixed point: quantised; integers: whole numbers)."""
    file = Path(path)
    if not file.is_file():
        raise UserError(f"data file {path!r} does not exist")
    if file.suffix not in (".npz", ".json"):
        raise UserError(f"--data {path!r}: give a .npz or .json of arrays named by input tensor, or a .mtx "
                        "matrix (without --build)")
    try:
        if file.suffix == ".json":
            arrays = {k: np.asarray(v) for k, v in json.loads(file.read_text()).items()}
        else:
            with np.load(file) as npz:
                arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, AttributeError, RecursionError) as exc:
        raise UserError(f"--data {path!r}: not a readable file of named arrays ({exc})") from None
    data: dict[str, TensorData] = {}
    for t in graph.input_tensors():
        if t not in arrays:
            raise UserError(
                f"{path}: no array for input tensor {t!r} (has {', '.join(arrays) or 'none'})"
            )
        spec = graph.tensors[t]
        if tuple(arrays[t].shape) != spec.shape:
            raise UserError(
                f"{path}: array {t!r} has shape {arrays[t].shape}, graph {graph.name!r} wants {spec.shape}"
            )
        a = arrays[t]
        if a.dtype.kind not in "biuf":
            raise UserError(f"{path}: array {t!r} holds {a.dtype} values, not real numbers")
        try:
            if num is not None and num.mode is not Mode.INT:
                data[t] = quantized_input(t, a, spec.shape, num, spec.fmt)
                continue
            whole = np.asarray(a, dtype=np.float64)
            bad = np.argwhere(~np.isfinite(whole) | (whole != np.round(whole)))
            if bad.size:
                at = tuple(int(i) for i in bad[0])
                raise ValueError(f"input {t!r}: entry [{', '.join(map(str, at))}] is {float(whole[at])}, not a whole number; the datapath "
                                 "is integer (--numerics q16.16 takes real values)")
        except ValueError as exc:
            raise UserError(f"{path}: {exc}") from None
        data[t] = TensorData.from_dense(a.astype(np.int64), spec.fmt)
    return data


def build_record(build: str | Path, name: str, keys: tuple[str, ...]) -> dict:
    """``name`` (a JSON report) of build directory ``build``: a dict holding ``keys``; a
    damaged or hand-edited one is an error naming the file and what is wrong, never a
    traceback."""
    path = Path(build) / name
    try:
        d = read_json(path, "build report")
    except JsonFileError as exc:
        raise UserError(f"--build {build}: {exc}; build it again") from None
    if not isinstance(d, dict):
        raise UserError(f"--build {build}: {name} holds a {type(d).__name__}, not a report object; build it again")
    missing = [k for k in keys if k not in d]
    if missing:
        raise UserError(f"--build {build}: {name} has no {', '.join(missing)} (damaged or from another "
                        "version); build it again")
    return d
