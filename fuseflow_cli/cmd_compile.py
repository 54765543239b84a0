"""``fuseflow-hw compile PROGRAM.py``: compile an Einsum program to SAMML graphs (JSON + DOT).

PROGRAM.py must define ``program()`` returning a :class:`fuseflow.compiler.Program`.  It may
also define ``example_data(seed: int) -> dict[str, numpy.ndarray]`` (dense arrays per input);
then ``--run`` simulates the compiled graphs in sw_sim and checks them against numpy.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

from fuseflow.compiler import (
    Fusion,
    Options,
    Program,
    ProgramError,
    compile_program,
    describe_pipeline,
    dump_ir,
    pass_names,
    run_program,
)
from fuseflow.compiler.bounds import check_program
from fuseflow.compiler.evaluate import dense_of
from fuseflow.cost.choose import FUSIONS, choose_fusion
from fuseflow.cost.graph import estimate_program
from fuseflow.ir.samml import GraphError
from fuseflow.options import Source
from sw_sim import run_graph

from .applies import declare
from .argtypes import int_range
from .cmd_common import (
    add_overflow_arg,
    add_pass_args,
    add_schedule_args,
    overflow_verdict,
    pass_values,
    resolve_schedule,
)
from .errors import UserError
from .models import add_user_model_args, add_zoo_args, compile_model_cmd

__all__ = ["add_parser", "load_program_module", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compile", help="compile an Einsum program (PROGRAM.py) to SAMML graphs",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program", nargs="?", help="Python file defining program() -> Program")
    p.add_argument("--list-passes", action="store_true",
                   help="print the compiler's pass pipeline (name, input -> output IR, options) and exit")
    p.add_argument("--dump-after", choices=pass_names(), metavar="PASS",
                   help="print the IR after pass PASS (one section per graph) and exit; passes: "
                        + ", ".join(pass_names()))
    p.add_argument("--fusion", choices=("auto", *FUSIONS),
                   help="one graph per statement (unfused), per declared region (partial), or for the "
                        "whole program (full: the default for PROGRAM.py); auto: the one the estimate "
                        "predicts fastest on the program's example_data(), and for --model the default "
                        "(see sim --help)")
    p.add_argument("--order", action="append", default=[], metavar="TENSOR=ORDER",
                   help="dataflow order of the statement computing TENSOR, in its own index "
                        "letters (e.g. T=ikj); repeatable")
    p.add_argument("--fused-order", action="append", default=[], metavar="GRAPH=ORDER",
                   help="full fused order of graph number GRAPH (e.g. 0=i,u0,j); repeatable")
    lowering = p.add_mutually_exclusive_group()
    lowering.add_argument("--factored", dest="factored", action="store_true", default=True,
                          help="factored iteration for every reduced intermediate it applies to "
                               "(the default; see docs/compiler.md)")
    lowering.add_argument("--global-iteration", dest="factored", action="store_false",
                          help="inline every reduced intermediate into one iteration space per "
                               "output (for comparison)")
    add_schedule_args(p)
    add_pass_args(p, Source.PROGRAM)  # --no-locate, --skip, --spacc-buffers, --block, --lanes, ...
    p.add_argument("-o", "--outdir", help="write <graph>.json and <graph>.dot here")
    p.add_argument("--explain", action="store_true",
                   help="print fused einsum, POG, chosen order and fusion table per graph")
    p.add_argument("--run", action="store_true",
                   help="simulate with the program's example_data() and compare with numpy (integer "
                        "data exactly, real-valued data in float numerics within the derived bound)")
    p.add_argument("--seed", type=int_range(0), default=0, help="seed passed to example_data()")
    add_overflow_arg(p)
    declare(p, Source.PROGRAM, "--dump-after", "--order", "--fused-order", "--global-iteration", "--seed")
    g = p.add_argument_group("PyTorch models instead of PROGRAM.py (needs torch)")
    add_user_model_args(g)
    add_zoo_args(g)


def load_program_module(path: str) -> ModuleType:
    file = Path(path)
    if not file.is_file():
        raise UserError(f"program file {path!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"fuseflow_program_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file failed: report it as theirs
        raise UserError(f"{path}: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(module, "program", None)):
        raise UserError(f"{path} must define a function program() returning a "
                        "fuseflow.compiler.Program")
    return module


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            raise UserError(f"{what} {item!r} must read KEY=VALUE")
        out[key] = value
    return out


def _compile_model(args: argparse.Namespace) -> int:
    """``compile --model …`` (the model options without --model are an error)."""
    if not args.model:
        raise UserError("--inputs / --formats / --strict: options of --model")
    if args.program is not None:
        raise UserError(f"give PROGRAM.py or --model, not both ({args.program}, {args.model})")
    return compile_model_cmd(args)


def run(args: argparse.Namespace) -> int:
    if args.list_passes:
        print(describe_pipeline(), end="")
        return 0
    if args.model or args.inputs or args.formats or args.strict:
        return _compile_model(args)
    if args.program is None:
        raise UserError("give a PROGRAM.py, --model MODEL (or --list-passes)")
    module = load_program_module(args.program)
    try:
        program = module.program()
    except ProgramError as exc:
        raise UserError(f"{args.program}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's program() failed: report it as theirs
        raise UserError(f"{args.program}: program() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(program, Program):
        raise UserError(f"{args.program}: program() returned {type(program).__name__}, not a Program")
    orders = _pairs(args.order, "--order")
    fused: dict[int, tuple[str, ...]] = {}
    for k, v in _pairs(args.fused_order, "--fused-order").items():
        if not k.isdigit():
            raise UserError(f"--fused-order {k}={v}: GRAPH must be a graph number (0, 1, ...)")
        fused[int(k)] = tuple(x for x in v.replace("->", ",").split(",") if x)
    sched = resolve_schedule(args)
    orders = {**sched.orders, **orders}
    values = _pass_values(args, sched)
    fusion = _fusion(args, sched, module, program, orders, fused, values)
    try:
        if args.dump_after:
            opts = Options(fusion=Fusion(fusion), orders=orders or None, fused_orders=fused or None,
                           **values)
            print(dump_ir(program, args.dump_after, opts), end="")
            return 0
        compiled = compile_program(program, fusion, orders, fused, **values)
    except (ProgramError, GraphError) as exc:
        raise UserError(str(exc)) from None
    if args.explain:
        print(sched.describe())
        print(compiled.explain())
        print()
    summary = []
    for cg in compiled.groups:
        g = cg.graph
        summary.append(f"{g.name}: {len(g.nodes)} nodes, {len(g.edges)} edges, reads "
                       f"{', '.join(g.input_tensors())}, writes {', '.join(g.output_tensors())}; "
                       f"{cg.lowering()}")
    if args.outdir:
        summary.append(_write(compiled, program, Path(args.outdir)))
    print("\n".join(summary))
    print(f"compiled in {compiled.seconds * 1e3:.1f} ms")
    if args.run:
        return _check_against_numpy(args, module, compiled, program)
    return 0


def _fusion(args, sched, module, program: Program, orders, fused, values) -> str:
    """The schedule's or ``--fusion``'s granularity (a program's default: full); ``auto``: the
    one the estimate predicts fastest on ``example_data(seed)``, said on stderr."""
    fusion = sched.fusion or args.fusion or "full"
    if fusion != "auto":
        return fusion
    make = getattr(module, "example_data", None)
    if not callable(make):
        raise UserError(f"--fusion auto: {args.program} must define example_data(seed) (the estimate's "
                        "statistics come from it), or give --fusion unfused|partial|full")
    data = make(args.seed)
    choice = choose_fusion(lambda f: compile_program(program, f, orders, fused, **values),
                           lambda c: estimate_program(c, data),
                           errors=(ProgramError, GraphError))
    print(f"fusion auto -> {choice.reason()} (estimate on example_data({args.seed}), ideal memory)",
          file=sys.stderr)
    return choice.fusion


def _pass_values(args: argparse.Namespace, sched) -> dict:
    """The pass options of the command line over the schedule's (``--block`` over its
    ``block``, ...), and ``--factored``."""
    values = {**pass_values(args, sched, Source.PROGRAM), "factored": args.factored}
    if values.get("lanes") is not None and not values.get("block"):
        raise UserError("--lanes needs --block (the dimension whose blocks become vectors)")
    return values


def _write(compiled, program: Program, out: Path) -> str:
    """Each graph's JSON and DOT plus ``program.json`` (the manifest) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for cg in compiled.groups:
        cg.graph.save(out / f"{cg.graph.name}.json")
        (out / f"{cg.graph.name}.dot").write_text(cg.graph.to_dot())
    manifest = {
        "program": program.name, "fusion": compiled.fusion.value,
        "graphs": [cg.graph.name for cg in compiled.groups],
        "outputs": program.result_names(),
        "permuted_copies": [{"name": p.name, "source": p.source, "format": p.fmt.to_json()}
                            for p in compiled.permuted],
        "lowering": {cg.graph.name: cg.lowering() for cg in compiled.groups},
    }
    (out / "program.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return f"wrote {len(compiled.groups)} graph(s) to {out}/"


def _check_against_numpy(args: argparse.Namespace, module: ModuleType, compiled, program: Program) -> int:
    """``--run``: simulate with the module's ``example_data`` and compare with numpy: integer
    data exactly (integer numerics), real-valued data in float numerics within the derived
    relative bound (``fuseflow.ir.check``), the error printed next to it."""
    make = getattr(module, "example_data", None)
    if not callable(make):
        raise UserError(f"--run needs {args.program} to define example_data(seed)")
    data = make(args.seed)
    real = any(not np.all(np.mod(dense_of(v), 1) == 0) for v in data.values())
    num = "float" if real else "int32"
    try:
        result = run_program(compiled, data, simulate=run_graph, numerics=num, on_overflow="ignore")
        checks = check_program(program, data, {n: result.dense(n) for n in program.result_names()}, num)
    except ProgramError as exc:
        raise UserError(str(exc)) from None
    print(f"sw_sim ({num} numerics): {result.total_cycles} cycles ({', '.join(map(str, result.cycles))})")
    for c in checks:
        print(f"check against numpy: {c.text()}")
    ok = overflow_verdict(args, result.overflow_records, f"program {program.name!r}")
    return 0 if ok and all(c.ok for c in checks) else 1
