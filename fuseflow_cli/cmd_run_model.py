"""``fuseflow-hw run --board B --model M --sim``: a whole model on one board top.

Every graph of the compiled model goes into one top (``hw.dram_model.ModelTop``) with its
tensors in the board's DRAM; the host loads the inputs over the UART, starts the graphs in
order, runs the host steps between them and reads the results back (``fpga.model_run``).  The
result is checked against PyTorch within the numerics' bound and against sw_sim's run of the same
model under the board's DRAM preset (values equal, cycles as a ratio: the preset is
statistical).  ``docs/board.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from fpga.capacity import DEVICE_RAM, onchip_bits
from fpga.host import LinkError, SerialTransport
from fpga.model_run import BoardModel, build_model_top, model_graphs, model_hw_config
from fuseflow.ir.graph_file import load_graph
from fuseflow.ir.memory import MemoryError, Placement
from fuseflow.models.bounds import check_model
from fuseflow.models.plan import run_model
from hw.dram_model import ModelTop
from hw.elaborate import HwConfig
from hw.litedram import DRAM_BOARDS, dram_timings
from rtl_sim import ToolchainError
from sw_sim import run_graph

from .board_args import baud_of, build_record, model_onchip
from .board_model import refuse_host_work
from .cmd_common import check_save_path, save_outputs, with_numerics
from .errors import UserError
from .models import _reference, load_compiled
from .ui import load_progress, spinner

__all__ = ["run_model_on_board"]

SIM_DIVISOR = 8  # clock cycles a UART bit in simulation


def _dram_of(args: argparse.Namespace, board) -> str:
    dram = next((name for name, b in DRAM_BOARDS.items() if board.name in b.boards), None)
    if dram is None or args.dram is False:
        boards = ", ".join(n for b in DRAM_BOARDS.values() for n in b.boards)
        raise UserError(f"run --model: a whole model runs on a board with DRAM (its graphs share one top, "
                        f"their tensors in DRAM): {boards}" + ("; drop --no-dram" if dram else
                                                              f", not {board.name}"))
    return dram


def _from_build(args: argparse.Namespace, board, graphs) -> tuple[dict, int]:
    """The host's view of a ``synth --model`` build directory: per graph its base, memory map and
    DRAM layout, the design's ident and the baud rate; refused if it was built for another board
    or another compilation of the model."""
    d = Path(args.build)
    files = {n: d / n for n in ("memory_map.json", "design.json", "synth_report.json")}
    missing = [n for n, f in files.items() if not f.exists()]
    if missing or not (d / "graphs").is_dir():
        raise UserError(f"--build {args.build}: not a synth --model build directory (missing "
                        f"{', '.join(missing) or 'graphs/'})")
    report = build_record(d, "synth_report.json", ("board", "ident", "baud"))
    if report["board"] != board.name:
        raise UserError(f"--build {args.build} was built for board {report['board']!r}, not {board.name!r}")
    host = build_record(d, "memory_map.json", ("graphs",))
    built = [g["name"] for g in host.get("graphs", [])]
    if built != [g.name for g in graphs]:
        raise UserError(f"--build {args.build} holds graphs {built}, but model {args.model} ({args.fusion}) "
                        f"compiles to {[g.name for g in graphs]}: build it with the same options")
    for g in graphs:
        saved = load_graph(d / "graphs" / f"{g.name}.json")
        if saved.structure_hash() != g.structure_hash():
            raise UserError(f"--build {args.build}: graph {g.name!r} differs from this compilation of "
                            f"{args.model} (other options or another version): build it again")
    if "sequencer" not in host:
        raise UserError(f"--build {args.build} was built by an earlier version (its top has no on-chip "
                        f"sequencer): build it again")
    dram_bytes = build_record(d, "design.json", ()).get("dram", {}).get("bytes", 0)
    return ({"ident": report["ident"], "graphs": host["graphs"], "sequencer": host["sequencer"],
             "dram_bytes": dram_bytes}, int(report["baud"]))


def _model_config(args: argparse.Namespace, board, cm, ir, cfg: HwConfig, dram: str) -> HwConfig:
    """The model top's config on ``board``'s DRAM, refused (before anything is built) when its
    tensors need more DRAM than the board has, or more block RAM than the device has."""
    graphs = model_graphs(cm)
    names = model_onchip(args, graphs)
    try:
        cfg = model_hw_config(cm, ir, cfg, dram, onchip=names, min_bytes=args.dram_min_bytes)
        top = ModelTop(graphs, cfg, dram, sim=True)  # the layout (no Verilog yet)
        top.discard()
    except (ValueError, MemoryError) as exc:
        raise UserError(str(exc)) from None
    size = dram_timings(dram)["size_bytes"]
    if top.allocator.next > size:
        raise UserError(f"model {args.model} does not fit the {board.name}'s DRAM: its tensors need "
                        f"{top.allocator.next / 2**20:.1f} MB, the board has {size / 2**20:.0f} MB")
    ram = DEVICE_RAM.get(board.device)
    need = sum(sum(onchip_bits(s.graph, s.cfg).values()) for s in top.subs)
    if ram is not None and need > ram.bits:
        raise UserError(f"model {args.model}: the tensors kept on chip need {need / 1024:.0f} kbit, the "
                        f"{board.device} has {ram.bits / 1024:.0f} kbit (--dram-min-bytes, --onchip)")
    return cfg


def _run_on_board(args: argparse.Namespace, board, cm, graphs, cfg: HwConfig, dram: str, num: str):
    """The model on the board behind ``--port`` (a ``synth --model`` build) or on the simulated
    top: ``(run, board model, meta, baud, simulated cycles, wall seconds)``."""
    baud = baud_of(args, True)
    sim_cycles = None
    try:
        if args.port:
            meta, baud = _from_build(args, board, graphs)
            transport = SerialTransport(args.port, baud, timeout=args.timeout)
            t0 = time.perf_counter()
            try:
                bm = BoardModel(transport, meta)
                with load_progress(f"loading over {args.port}", enabled=not args.json) as progress:
                    bm.progress = progress
                    res = run_model(cm, numerics=num, simulate=bm.simulate, program_runner=bm.run_program,
                                    on_overflow="report")
            finally:
                transport.close()
        else:
            with spinner(f"building the model top ({len(graphs)} graphs, LiteDRAM {dram}) in Verilator",
                         enabled=not args.json):
                bdir, meta = build_model_top(graphs, cfg, dram, SIM_DIVISOR)
            t0 = time.perf_counter()
            bm, pipe = BoardModel.simulated(bdir, meta)
            with pipe:
                res = run_model(cm, numerics=num, simulate=bm.simulate, program_runner=bm.run_program,
                                on_overflow="report")
                sim_cycles = pipe.cycles()
        return res, bm, meta, baud, sim_cycles, time.perf_counter() - t0
    except (ToolchainError, ValueError, LinkError) as exc:
        raise UserError(str(exc)) from None


def run_model_on_board(args: argparse.Namespace, board) -> int:
    if args.graph or args.kernel:
        raise UserError("give --model M or GRAPH.json / --kernel NAME, not both")
    if args.port and not args.build:
        raise UserError("run --model --port: give --build DIR, the directory of the board's "
                        "synth --model build (its memory map and ident)")
    if args.build and not args.port:
        raise UserError("run --model --build DIR: with --port (--sim builds its own top)")
    dram = _dram_of(args, board)
    check_save_path(args)
    case, ir, cm = load_compiled(args)
    refuse_host_work(args, cm)
    cfg = with_numerics(HwConfig(), args.numerics, True)
    num = str(cfg.num)
    graphs = model_graphs(cm)
    cfg = _model_config(args, board, cm, ir, cfg, dram)
    res, bm, meta, baud, sim_cycles, wall = _run_on_board(args, board, cm, graphs, cfg, dram, num)
    sw = run_model(cm, numerics=num, simulate=run_graph, memory=cfg.memory,
                   onchip=Placement(cfg.onchip, strict=False), on_overflow="report")
    checks = check_model(cm, res, _reference(case), num)
    saved = save_outputs(args, res.outputs, None)  # the model's outputs: real values already
    equal = {o: bool(np.array_equal(res.outputs[o], sw.outputs[o])) for o in ir.outputs}
    ok = all(c.ok for c in checks) and all(equal.values())
    sw_cycles = dict(sw.cycles)
    clock = DRAM_BOARDS[dram].sys_clk_hz
    hw_total = sum(r.cycles for r in bm.runs)
    # the board's own time: each on-chip sequence from its start to its last graph's done, and
    # the graphs the host started alone
    board_cycles = sum(q.cycles for q in bm.sequences) + sum(r.cycles for r in bm.runs if r.sequence is None)
    sw_total = sum(sw_cycles.values())
    load_bytes = sum(r.load_bytes for r in bm.runs)
    offchip = sum(c.get("bytes_offchip", 0) for _, c in sw.counters)
    peak = dram_timings(dram)["word_bytes"]  # bytes a cycle: one native word
    record = {
        "model": args.model, "board": board.name, "sim": bool(args.sim), "fusion": args.fusion, "numerics": num,
        "graphs": [{"graph": r.graph, "cycles": r.cycles, "sw_sim_cycles": sw_cycles.get(r.graph),
                    "ratio": round(r.cycles / sw_cycles[r.graph], 4) if sw_cycles.get(r.graph) else None,
                    "load_bytes": r.load_bytes, "from_dram": r.from_dram, "loaded": r.loaded,
                    "sequence": r.sequence} for r in bm.runs],
        "sequences": [{"graphs": q.graphs, "cycles": q.cycles} for q in bm.sequences],
        "board_cycles": board_cycles,
        "host_steps": [h["step"] for h in res.host],
        "cycles": hw_total, "sw_sim_cycles": sw_total, "cycles_ratio": round(hw_total / sw_total, 4) if sw_total else None,
        "clock_mhz": clock / 1e6, "run_seconds": board_cycles / clock,
        "load_bytes": load_bytes, "baud": baud, "load_seconds": round(load_bytes * 10 / baud, 6),
        "dram_bytes": meta["dram_bytes"], "dram_bytes_moved": offchip,
        "dram_bandwidth_use": round(offchip / hw_total / peak, 4) if hw_total else None,
        "equal_to_sw_sim": equal, "checks": [c.to_json() for c in checks],
        "error": checks[0].max_error, "tolerance": checks[0].bound,
        "sim_cycles": sim_cycles, "wall_seconds": round(wall, 3), "check": "pass" if ok else "fail",
        "saved": str(saved) if saved else None}
    if args.json:
        print(json.dumps(record, indent=1))
        return 0 if ok else 1
    where = f"the simulated {board.name}" if args.sim else f"the {board.name} on {args.port}"
    print(f"{args.model} ({args.fusion}, {num}) whole on {where}: {len(graphs)} graphs in one "
          f"top, tensors in DRAM ({meta['dram_bytes']:,} bytes) but {', '.join(cfg.onchip) or 'none'}")
    for g in record["graphs"]:
        kept = f"; in DRAM already: {', '.join(g['from_dram'])}" if g["from_dram"] else ""
        print(f"  {g['graph']}: {g['cycles']:,} cycles, sw_sim {g['sw_sim_cycles']:,} (ratio {g['ratio']}); "
              f"loaded {', '.join(g['loaded']) or 'nothing'} ({g['load_bytes']:,} bytes){kept}")
    for q in bm.sequences:
        print(f"  on-chip sequencer: {', '.join(q.graphs)} back to back, {q.cycles:,} cycles from its start "
              f"to the last done")
    if record["host_steps"]:
        print(f"  host steps between graphs: {', '.join(record['host_steps'])}")
    print(f"  cycles: {hw_total:,} (sw_sim {sw_total:,} under {cfg.memory.name}, ratio {record['cycles_ratio']}); "
          f"on the board {board_cycles:,}: {record['run_seconds'] * 1e3:.3f} ms at {clock / 1e6:g} MHz")
    print(f"  load: {load_bytes:,} bytes over the UART, {record['load_seconds']:.3f} s at {baud:,} baud")
    print(f"  DRAM: {offchip:,} bytes moved (sw_sim's count), {record['dram_bandwidth_use']:.1%} of the "
          f"{peak} bytes a cycle the controller's port carries")
    for o, same in equal.items():
        print(f"  {o}: {'equal to' if same else 'DIFFERS from'} sw_sim's values")
    for c in checks[:1]:
        print(f"  against PyTorch: max error {c.max_error:.3g}, bound {c.bound:.3g}: {'ok' if c.ok else 'FAILED'}")
    if saved:
        print(f"  outputs saved: {saved}")
    return 0 if ok else 1
