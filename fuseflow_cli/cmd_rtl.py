"""``fuseflow-hw rtl``: run a graph in RTL (Verilator + cocotb) and compare with sw_sim."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fuseflow.memory import MemoryError
from rtl_sim import ToolchainError
from rtl_sim import run_graph as rtl_run
from sw_sim import run_graph

from .cmd_common import add_graph_args, add_memory_args, load_graph_job, resolve_memory
from .errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("rtl", help="run a graph in RTL under cocotb and compare with sw_sim")
    add_graph_args(p)
    p.add_argument("--waves", metavar="FILE", help="write a waveform (VCD) of the RTL run")
    add_memory_args(p)  # both simulators (docs/memory.md)


def run(args) -> int:
    job = load_graph_job(args)
    model, placement = resolve_memory(args, job.schedule)
    try:
        sw = run_graph(job.graph, job.data, memory=model, onchip=placement)
        rtl = rtl_run(job.graph, job.data, waves=bool(args.waves), wave_file=Path(args.waves) if args.waves else None,
                      memory=model, onchip=placement)
    except (ToolchainError, MemoryError) as exc:
        raise UserError(str(exc)) from None
    same = all(np.array_equal(rtl.outputs[t].to_dense(), sw.outputs[t].to_dense()) for t in sw.outputs)
    if not model.ideal:
        print(f"memory: {model.describe()}")
    print(f"{job.source}: RTL {rtl.cycles} cycles, sw_sim {sw.cycles} cycles "
          f"(ratio {rtl.cycles / max(sw.cycles, 1):.4f}); outputs {'identical' if same else 'DIFFER'}")
    if job.expected is not None:
        [name] = rtl.outputs
        ok = np.array_equal(rtl.outputs[name].to_dense(), job.expected)
        print(f"check against numpy: {'PASS' if ok else 'FAIL'}")
        same = same and ok
    if args.waves:
        print(f"waveform: {args.waves}")
    return 0 if same else 1
