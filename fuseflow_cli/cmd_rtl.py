"""``fuseflow-hw rtl``: run a graph in RTL (Verilator, driven by the compiled native harness or
by cocotb, or amaranth.sim with ``--sim amaranth``) and compare values and cycles with sw_sim."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from fuseflow.ir.memory import MemoryError
from fuseflow.ir.numerics import Mode, Numerics
from fuseflow.options import Source
from hw.elaborate import HwConfig
from rtl_sim import ToolchainError
from rtl_sim import run_graph as rtl_run
from rtl_sim.api import VERILATOR_RUNNERS, graph_build, memory_config
from rtl_sim.waves import wave_format
from sw_sim import SimError, run_graph

from .applies import declare
from .argtypes import int_range
from .cmd_common import (
    NO_REFERENCE,
    add_graph_args,
    add_memory_args,
    add_overflow_arg,
    add_saturate_arg,
    add_save_arg,
    add_width_args,
    check_save_path,
    check_text,
    compare_rtl,
    hw_overflow_text,
    load_graph_job,
    overflow_mismatches,
    overflow_verdict,
    resolve_memory,
    resolve_widths,
    saturate_job,
    saturated_text,
    save_outputs,
)
from .cmd_rtl_dram import add_dram_args, is_dram_memory, run_dram
from .errors import UserError
from .models import (
    FUSION_HELP,
    FUSIONS,
    add_assoc_arg,
    add_user_model_args,
    add_zoo_args,
    manifest_source,
    rtl_model_cmd,
)
from .ui import spinner

SIMULATORS = ("verilator", "amaranth")
# the fields of ``rtl --json`` (README, "Machine-readable output")
JSON_FIELDS = ("source", "graph", "runner", "rtl_cycles", "sw_cycles", "ratio", "outputs_identical", "check",
               "cw", "vw", "memory", "onchip", "build_s", "wall_s", "cycles_per_s", "waves", "saturated",
               "overflows", "rtl_overflow", "numerics", "error", "tolerance", "saved")


def add_parser(sub) -> None:
    p = sub.add_parser("rtl", help="run a graph in RTL (Verilator or amaranth.sim) and compare with sw_sim")
    add_graph_args(p, manifest=True)
    p.add_argument("--sim", choices=SIMULATORS, default="verilator",
                   help="verilator (default): the Verilated top, driven as --runner says; amaranth: "
                        "Amaranth's Python simulator (no Verilator or C++ compiler needed; slower)")
    p.add_argument("--runner", choices=VERILATOR_RUNNERS, default=None,
                   help="with --sim verilator: native (default), a compiled C++ harness drives the "
                        "Verilated model; cocotb, the cocotb testbench (about a hundred times slower)")
    add_width_args(p)
    p.add_argument("--max-cycles", type=int_range(1), metavar="N",
                   help="stop with an error when the run is not done after N cycles (default: "
                        "50 M native, 5 M cocotb and amaranth)")
    p.add_argument("--waves", metavar="FILE", help="write a waveform of the RTL run: FILE.vcd (VCD) or FILE.fst "
                   "(FST), and the GTKWave save file FILE.gtkw beside it (host port and "
                   "every node's streams grouped)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (README 'Machine-readable output') instead of text")
    add_memory_args(p)  # both simulators (docs/memory.md)
    add_dram_args(p)  # --memory <board>-sdram: the generated LiteDRAM controller (docs/dram.md)
    add_saturate_arg(p)
    add_overflow_arg(p)
    add_save_arg(p)
    p.add_argument("--numerics", help="value arithmetic: int (default for a graph file or kernel: the --vw-bit "
                   "integers), or a fixed-point format such as q16.16 for real-valued data (sets the value "
                   "width; the default for --model)")
    declare(p, Source.GRAPH | Source.KERNEL, "--cw", "--vw", "--max-cycles", "--waves", "--memory", "--onchip",
            "--dram-min-bytes", "--saturate", "--save")  # a model's RTL: Q16.16, on chip, no waves yet
    g = p.add_argument_group("PyTorch models instead of a graph (needs torch): every graph in RTL")
    add_user_model_args(g)
    add_zoo_args(g)
    g.add_argument("--fusion", choices=("auto", *FUSIONS), help=FUSION_HELP)
    declare(g, Source.MODEL, "--fusion")
    add_assoc_arg(g)


def resolve_runner(args) -> str:
    """The runner of ``--sim`` / ``--runner`` (``native``, ``cocotb`` or ``amaranth``), also set
    as ``args.runner``."""
    if args.sim == "amaranth":
        if args.runner is not None:
            raise UserError(f"--runner {args.runner}: a Verilator runner; --sim amaranth has none")
        args.runner = "amaranth"
    else:
        args.runner = args.runner or "native"
    return args.runner


def run(args) -> int:
    resolve_runner(args)
    if manifest_source(args):  # a build --model manifest: every graph of its model
        return rtl_model_cmd(args)
    if args.model:
        if args.graph or args.kernel:
            raise UserError("give a graph, --kernel or --model, not several")
        return rtl_model_cmd(args)
    if args.inputs or args.formats or args.strict:
        raise UserError("--inputs / --formats / --strict: options of --model")
    check_save_path(args)
    job = load_graph_job(args, rtl=True)
    if is_dram_memory(getattr(args, "memory", None)):  # the board's DRAM, real controller (docs/dram.md)
        return run_dram(args, job)
    model, placement = resolve_memory(args, job.schedule)
    cw, vw = resolve_widths(args, job.graph, numerics=job.numerics)
    fixed = job.numerics.mode is Mode.FIXED
    if args.max_cycles is not None and args.max_cycles < 1:
        raise UserError(f"--max-cycles {args.max_cycles}: must be at least 1")
    waves = Path(args.waves) if args.waves else None
    if waves is not None and waves.is_dir():
        raise UserError(f"--waves {args.waves}: a directory; give a file path (e.g. {waves / 'run.vcd'})")
    try:
        wave_format(waves)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    saturated = saturate_job(args, job, job.numerics if fixed else vw)
    try:
        hw = HwConfig(cw=cw, vw=vw, numerics=job.numerics) if fixed else HwConfig(cw=cw, vw=vw)
        cfg = memory_config(hw, model, placement)
        with spinner("sw_sim", enabled=not args.json) as status:
            # --on-overflow is applied below, to sw_sim's counts and the RTL's flags
            sw = run_graph(job.graph, job.data, memory=model, onchip=placement,
                           numerics=job.numerics if fixed else _sw_numerics(vw), on_overflow="ignore")
            t0 = time.perf_counter()
            if args.runner != "amaranth":  # amaranth.sim builds nothing ahead of the run
                status(f"Verilator: building the {args.runner} model (cached after the first build)")
                graph_build(job.graph, cfg, waves is not None, args.runner)  # cached: the run reuses it
            t1 = time.perf_counter()
            status("Verilator: running" if args.runner != "amaranth" else "amaranth.sim: running")
            rtl = rtl_run(job.graph, job.data, cfg=cfg, runner=args.runner, waves=waves is not None,
                          wave_file=waves, max_cycles=args.max_cycles, on_overflow="ignore")
        wall = time.perf_counter() - t1
    except (ToolchainError, MemoryError, ValueError, SimError) as exc:
        raise UserError(str(exc)) from None
    same, check = compare_rtl(rtl, sw, job)
    detail = job.check(rtl.outputs)
    saved = save_outputs(args, rtl.outputs, job.numerics)
    ratio = rtl.cycles / max(sw.cycles, 1)
    if args.json:
        out = {"source": job.source, "graph": job.graph.name, "runner": args.runner, "rtl_cycles": rtl.cycles,
               "sw_cycles": sw.cycles, "ratio": round(ratio, 6), "outputs_identical": same,
               "check": None if check is None else ("pass" if check else "fail"), "cw": cw, "vw": vw,
               "memory": model.to_json(), "onchip": sorted(placement.onchip), "build_s": round(t1 - t0, 3),
               "wall_s": round(wall, 4), "cycles_per_s": round(rtl.cycles / max(wall, 1e-9)),
               "waves": args.waves, "saturated": saturated if args.saturate else None,
               "overflows": sw.overflows, "rtl_overflow": rtl.overflow, "numerics": str(job.numerics),
               "error": detail.max_error if detail else None, "tolerance": detail.bound if detail else None,
               "saved": str(saved) if saved else None}
        print(json.dumps({k: out[k] for k in JSON_FIELDS}, indent=1))
    else:
        _print_text(args, job, model, rtl, sw, same, detail, (cw, vw, wall), saturated)
        if saved:
            print(f"outputs saved: {saved}")
    mismatches = overflow_mismatches(sw.overflows, rtl.overflow)
    for line in mismatches:
        print(line, file=sys.stderr if args.json else sys.stdout)
    ok = overflow_verdict(args, sw.overflow_records, f"graph {job.graph.name!r} (sw_sim; the RTL flags the same nodes)"
                          if not mismatches else f"graph {job.graph.name!r} (sw_sim)", err=args.json)
    return 0 if same and check is not False and ok and not mismatches else 1


def _sw_numerics(vw: int) -> Numerics:
    """sw_sim's arithmetic for an RTL run: the RTL's value width (at least the 11 bits the
    numerics allow; narrower datapaths are compared at 11)."""
    return Numerics.integer(max(vw, 11))


def _print_text(args, job, model, rtl, sw, same: bool, check, run: tuple[int, int, float],
                saturated: dict[str, int]) -> None:
    cw, vw, wall = run
    if not model.ideal:
        print(f"memory: {model.describe()}")
    print(f"{job.source}: RTL {rtl.cycles} cycles, sw_sim {sw.cycles} cycles "
          f"(ratio {rtl.cycles / max(sw.cycles, 1):.4f}); outputs {'identical' if same else 'DIFFER'}")
    rate = rtl.cycles / max(wall, 1e-9)
    print(f"RTL: {args.runner} runner, cw {cw}, vw {vw}, {wall:.2f} s "
          f"({f'{rate / 1e6:.2f} M' if rate >= 1e5 else f'{rate / 1e3:.1f} k'} cycles/s)")
    if check is not None:
        print(check_text(str(job.numerics), check.ok, check.max_error, check.bound))
    else:
        print(f"check against a reference: none ({NO_REFERENCE}); RTL against sw_sim above")
    if args.saturate:
        print(saturated_text(saturated, vw))
    if sw.overflows or rtl.overflow:
        print(hw_overflow_text(rtl.overflow) + " (the RTL's STATUS / OVERFLOW registers)")
    if args.waves:
        print(f"waveform: {args.waves} (GTKWave: gtkwave {Path(args.waves).with_suffix('.gtkw')})")
