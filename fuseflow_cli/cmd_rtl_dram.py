"""``fuseflow-hw rtl --memory <board>-<kind>`` (``ulx3s-sdram``, ``ecpix5-ddr3``): run a graph
with its tensors in a board's DRAM,
through the LiteDRAM controller generated for the board and LiteDRAM's SDRAM model, in
Verilator, and compare with sw_sim under the board's preset (``docs/dram.md``)."""

from __future__ import annotations

import json
import time

from hw.elaborate import HwConfig
from hw.litedram import DRAM_BOARDS, dram_memory_model, placement_report
from rtl_sim import ToolchainError
from rtl_sim.dram import dram_config, dram_graph_build, run_graph_dram
from sw_sim import SimError, run_graph

from .cmd_common import compare_rtl, onchip_names
from .errors import UserError

__all__ = ["DEFAULT_MIN_BYTES", "DRAM_MEMORIES", "add_dram_args", "is_dram_memory", "run_dram"]

# --memory spellings: the board's DRAM behind the real controller (ulx3s-sdram, ecpix5-ddr3)
DRAM_MEMORIES = {b.memory_name: name for name, b in DRAM_BOARDS.items()}
# tensors smaller than this stay on chip (a whole line fetched for a few words costs more than
# the block RAM it saves)
DEFAULT_MIN_BYTES = 64


def is_dram_memory(text: str | None) -> bool:
    return bool(text) and text in DRAM_MEMORIES


def add_dram_args(p) -> None:
    p.add_argument("--dram-min-bytes", type=int, default=DEFAULT_MIN_BYTES, metavar="N",
                   help=f"with --memory {'/'.join(DRAM_MEMORIES)}: tensors smaller than N bytes stay on "
                        f"chip (default {DEFAULT_MIN_BYTES}); the others live in DRAM unless --onchip names "
                        "them")


def run_dram(args, job) -> int:
    board = DRAM_MEMORIES[args.memory]
    if getattr(args, "runner", "native") not in (None, "native"):
        raise UserError(f"--memory {args.memory}: runs on the native Verilator harness only (not {args.runner})")
    if getattr(args, "waves", None):
        raise UserError(f"--memory {args.memory}: --waves is not supported yet")
    names = onchip_names(args)
    unknown = sorted(set(names) - set(job.graph.tensors))
    if unknown:
        raise UserError(f"--onchip: no tensor {', '.join(map(repr, unknown))} in graph {job.graph.name!r}")
    min_bytes = getattr(args, "dram_min_bytes", DEFAULT_MIN_BYTES)
    try:
        cfg = dram_config(job.graph, HwConfig(), board, onchip=names, min_bytes=min_bytes)
        model = dram_memory_model(board)
        sw = run_graph(job.graph, job.data, memory=model, onchip=cfg.onchip)
        t0 = time.perf_counter()
        _, meta = dram_graph_build(job.graph, cfg, board)
        t1 = time.perf_counter()
        [rtl] = run_graph_dram(job.graph, [job.data], board=board, onchip=names, min_bytes=min_bytes,
                               max_cycles=args.max_cycles)
        wall = time.perf_counter() - t1
    except (ToolchainError, ValueError, SimError) as exc:
        raise UserError(str(exc)) from None
    same, check = compare_rtl(rtl, sw, job)
    placement = meta["summary"]["dram"]["placement"]
    out = {"source": job.source, "graph": job.graph.name, "runner": "native", "memory": args.memory,
           "controller": meta["summary"]["dram"]["controller"], "rtl_cycles": rtl.cycles, "sw_cycles": sw.cycles,
           "ratio": round(rtl.cycles / max(sw.cycles, 1), 6), "outputs_identical": same,
           "check": None if check is None else ("pass" if check else "fail"), "placement": placement,
           "preset": model.to_json(), "build_s": round(t1 - t0, 3), "wall_s": round(wall, 4)}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"memory: {model.describe()}")
        print(f"controller: {out['controller']} (generated; LiteDRAM's SDRAM model in Verilator)")
        for row in placement:
            where = ("DRAM " + ", ".join(f"{k} @ {v:#x}" for k, v in row["arrays"].items())
                     if row["place"] == "dram" else "on chip")
            print(f"  {row['tensor']}: {where}")
        print(f"{job.source}: RTL {rtl.cycles} cycles, sw_sim {sw.cycles} cycles (ratio {out['ratio']:.4f}); "
              f"outputs {'identical' if same else 'DIFFER'}")
        if check is not None:
            print(f"check against numpy: {'PASS' if check else 'FAIL'}")
    return 0 if same and check is not False else 1


def placement_lines(graph, onchip) -> list[str]:  # pragma: no cover - convenience for --explain
    return [f"{r['tensor']}: {r['place']}" for r in placement_report(graph, tuple(onchip))]
