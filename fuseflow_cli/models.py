"""``fuseflow-hw sim --model …``, ``build --model …`` and ``synth --model …``: model-zoo paths of the
CLI."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

import sw_sim
from fuseflow.compiler.pipeline import pass_options
from fuseflow.cost.choose import FUSIONS, choose_fusion
from fuseflow.cost.model import estimate_model
from fuseflow.ir.check import Check
from fuseflow.ir.memory import MemoryError, Placement
from fuseflow.ir.numerics import Mode, Numerics
from fuseflow.ir.samml import Graph
from fuseflow.models.assoc import AssocError, chain_pairs, reassociate, subsets
from fuseflow.models.bounds import check_model
from fuseflow.models.datasets import DATASETS, SYNTHETIC, load_dataset
from fuseflow.models.frontend import FrontendError, trace
from fuseflow.models.plan import compile_model
from fuseflow.models.plan import run_model as simulate_model
from fuseflow.models.steps import CompilerStep, ConvertStep
from fuseflow.options import Source
from hw import HwConfig, build_graph
from rtl_sim.toolchain import lint
from sw_sim import run_graph
from sw_sim.counters import merge_counters

from .applies import declare
from .argtypes import MAX_SIZE, fraction, int_range
from .cmd_common import (
    add_pass_args,
    check_save_path,
    has_flag,
    overflow_verdict,
    pass_values,
    resolve_memory,
    resolve_schedule,
    saturated_text,
    save_outputs,
    sparse_in,
    with_numerics,
)
from .errors import UserError
from .ui import print_table, table_text

__all__ = [
    "FUSIONS",
    "FUSION_HELP",
    "add_model_args",
    "add_user_model_args",
    "add_zoo_args",
    "build_model",
    "compile_model_cmd",
    "host_text",
    "load_compiled",
    "rtl_model_cmd",
    "run_model",
    "simulate_model_args",
]


ZOO = ("gcn", "graphsage", "sae", "gpt")

FUSION_HELP = ("fusion granularity: auto (the default) compiles the one the estimate predicts fastest "
               "under --memory and says why (build / synth --board, no DRAM: the fastest in predicted "
               "wall time predicted to fit the board); unfused, partial or full as given (one "
               "granularity the estimate puts 2x slower or more than the best draws a warning)")


def add_user_model_args(g, *, model: bool = True) -> None:
    """``--model`` (a zoo name or a user's ``file.py:NAME``), ``--inputs``, ``--formats``, ``--strict``."""
    if model:
        g.add_argument("--model", metavar="gcn|graphsage|sae|gpt|FILE.py:NAME",
                       help="compile a PyTorch model instead of a graph / kernel: a model-zoo name, or your "
                            "own module: a Python file and the nn.Module class (built with no arguments) or "
                            "factory function in it (docs/models.md, 'Bringing your own model')")
    g.add_argument("--inputs", metavar="INPUTS.npz|pt",
                   help="FILE.py models: example inputs, arrays named after forward()'s parameters (.npz) or "
                        "a dict of tensors, sparse ones allowed (.pt)")
    g.add_argument("--formats", metavar="NAME=FMT,...",
                   help="FILE.py models: sparse formats of inputs / parameters (adj=csr,fc1.weight=csc; "
                        "csr, csc, dcsr, dcsc, coo or per-level letters)")
    g.add_argument("--strict", action="store_true",
                   help="an op that would run on the host (a graph break) is an error instead")
    declare(g, Source.MODEL, "--inputs", "--formats", "--strict")


ASSOC_HELP = ("association order of the model's matrix-product chains: as-written (the default) "
              "computes (A·X)·W as written; auto costs every order, e.g. A·(X·W), with the estimate "
              "and compiles the fewest cycles; PRODUCT[,PRODUCT...] reassociates the chains of those "
              "products, as --explain and rank name them (docs/schedules.md, 'Association order')")


def add_assoc_arg(g) -> None:
    """``--assoc`` (models only)."""
    g.add_argument("--assoc", metavar="auto|as-written|PRODUCT[,PRODUCT...]", help=ASSOC_HELP)
    declare(g, Source.MODEL, "--assoc")


def add_model_args(p: argparse.ArgumentParser, *, build: bool = False) -> None:
    g = p.add_argument_group("PyTorch models (needs torch: pip install -e '.[torch]')")
    add_user_model_args(g)
    add_zoo_args(g)
    g.add_argument("--fusion", choices=("auto", *FUSIONS), help=FUSION_HELP)
    add_assoc_arg(g)
    add_pass_args(g, Source.MODEL, without=Source.GRAPH | Source.KERNEL)  # --no-locate, ...
    declare(g, Source.PROGRAM | Source.MODEL, "--fusion")
    if not build:
        g.add_argument("--explain", action="store_true", help="print the compiled steps and graphs")
        declare(g, Source.PROGRAM | Source.MODEL, "--explain")
        g.add_argument("--numerics",
                       help="value numerics: for --model float (default) or a fixed-point format such as "
                            "q16.16, checked against PyTorch within the bound derived from the format and "
                            "the op chain (docs/semantics.md); for a graph file or kernel int (default), "
                            "float, or fixed point for real-valued data (checked against scipy within "
                            "that bound)")


ADJ_DENSITY_HELP = ("the adjacency's non-zero fraction nnz/(n*n), self loops not counted (there are "
                    "none; the densest graph is (n-1)/n): exactly round(density*n*n/2) undirected "
                    "edges (default: about 0.02 from the older generators)")


def add_zoo_args(g) -> None:
    """The model zoo's options: the dataset and the model's sizes."""
    g.add_argument("--dataset",
                   help=f"graph models: {', '.join(DATASETS)} (real graphs shipped with networkx, "
                        "then synthetic graphs of the named datasets' size), a .mtx/.npz file or a "
                        "Planetoid/OGB directory (default karate); sae: random (default) or digits "
                        "(scikit-learn's handwritten digits)")
    g.add_argument("--hidden", type=int_range(1, MAX_SIZE), default=16, help="hidden width of GCN / GraphSAGE (default 16)")
    g.add_argument("--features", type=int_range(1, MAX_SIZE), help="feature width of synthetic graphs / cora")
    g.add_argument("--nodes", type=int_range(2, MAX_SIZE), default=256, help="nodes of uniform/powerlaw/blockdiag graphs")
    own_density = not has_flag(g, "--density")  # sim, build, rtl, estimate: the graph options' --density
    if own_density:
        g.add_argument("--density", type=fraction,
                       help=f"uniform/powerlaw/blockdiag graphs: {ADJ_DENSITY_HELP}")
    g.add_argument("--feature-density", type=fraction, metavar="FRACTION",
                   help="uniform/powerlaw/blockdiag graphs: the non-zero fraction of the random binary "
                        "node features (default 0.05)")
    g.add_argument("--seq", type=int_range(1, MAX_SIZE), default=64, help="GPT sequence length (default 64)")
    g.add_argument("--dmodel", type=int_range(1, MAX_SIZE), default=64, help="GPT hidden size (default 64)")
    g.add_argument("--heads", type=int_range(1), default=2, help="GPT heads (default 2)")
    g.add_argument("--blocks", type=int_range(1), default=2, help="GPT decoder blocks (default 2)")
    declare(g, Source.MODEL, *(f"--{k.replace('_', '-')}" for k in _ZOO_ONLY))
    if own_density:
        declare(g, Source.MODEL, "--density")


# the model options and their defaults (add_model_args), for a manifest's clashes; a graph or
# kernel command refuses them from their declared sources (fuseflow_cli.applies)
_MODEL_PASS_OPTIONS = {o.name: o for o in pass_options(Source.MODEL)
                       if o.cli and not o.sources & (Source.GRAPH | Source.KERNEL)}
_MODEL_OPTIONS = {"dataset": None, "fusion": None, "assoc": None, "hidden": 16, "features": None, "nodes": 256,
                  "feature_density": None, "seq": 64, "dmodel": 64, "heads": 2, "blocks": 2,
                  **{n: o.default for n, o in _MODEL_PASS_OPTIONS.items()}, "explain": False,
                  "numerics": None, "inputs": None, "formats": None, "strict": False, "no_host_steps": False}
_ZOO_ONLY = ("dataset", "hidden", "features", "nodes", "feature_density", "seq", "dmodel", "heads", "blocks")


_MANIFEST_OPTIONS = (*_ZOO_ONLY, "density", "inputs", "formats", "strict", "assoc")


def model_options(args: argparse.Namespace) -> dict:
    """The model options a manifest records (the zoo's sizes and data, a user model's inputs and
    formats), so ``rtl`` and ``synth`` given the manifest compile the same graphs."""
    return {k: getattr(args, k) for k in _MANIFEST_OPTIONS if getattr(args, k, None) is not None}


def manifest_source(args: argparse.Namespace) -> bool:
    """``GRAPH`` is a ``build --model`` manifest (``model.json``): take its model, fusion,
    numerics and options into ``args`` (an option given on the command line too is refused)
    and return True; a graph file returns False."""
    path = getattr(args, "graph", None)
    if not path or not str(path).endswith(".json") or not Path(path).is_file():
        return False
    try:
        m = json.loads(Path(path).read_text())
    except (OSError, ValueError, RecursionError):
        return False  # not JSON: the graph loader says why
    if not isinstance(m, dict) or "steps" not in m or "model" not in m:
        return False
    if getattr(args, "model", None) or getattr(args, "kernel", None):
        raise UserError(f"{path}: a model manifest names its model ({m['model']}); drop --model / --kernel")
    clash = [k for k, v in m.get("options", {}).items()
             if getattr(args, k, None) not in (None, _MODEL_OPTIONS.get(k), False) and getattr(args, k) != v]
    if clash:
        raise UserError(f"{path}: the manifest fixes {', '.join('--' + k.replace('_', '-') for k in clash)}; "
                        "drop them (or build the model again)")
    args.graph, args.model, args.fusion = None, m["model"], m.get("fusion", "partial")
    for k, v in m.get("options", {}).items():
        setattr(args, k, v)
    if getattr(args, "numerics", None) is None and "numerics" in m:
        args.numerics = m["numerics"]
    args.manifest = (Path(path), m)
    return True


def check_manifest_graphs(args: argparse.Namespace, cm) -> None:
    """The graphs compiled from a manifest's model must be the ones it was built from."""
    path, m = getattr(args, "manifest", (None, None))
    if m is None or "structure" not in m:
        return
    now = {g.name: g.structure_hash() for g in cm.graphs}
    if now != m["structure"]:
        differ = sorted(set(now) ^ set(m["structure"])) or sorted(n for n in now if now[n] != m["structure"].get(n))
        raise UserError(f"{path}: this version compiles model {m['model']} ({m.get('fusion')}) to other graphs "
                        f"than the manifest's (they differ in {', '.join(differ)}): build it again")


def load_compiled(args: argparse.Namespace, *, choose: bool = True):
    """Build the model case (zoo or FILE.py:NAME), trace it and compile it: ``(case, ir,
    compiled_model)``.  ``--fusion auto`` (the default) compiles the estimate's pick; an explicit
    granularity the estimate puts ≥ 2x slower than the best draws a warning.  ``choose=False``
    (estimate, rank: they compare the granularities themselves) compiles ``args.fusion`` as
    given, partial for auto."""
    try:  # PyTorch is an optional dependency: only --model needs it
        import torch  # noqa: F401
    except ImportError:
        raise UserError("--model needs PyTorch: pip install -e '.[torch]' (CPU build: "
                        "pip install torch==2.13.0)") from None
    # the zoo imports torch when it is imported: load it only for --model
    from fuseflow.models.zoo import make_case

    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    try:
        case = _user_case(args) if args.model not in ZOO else _zoo_case(args, make_case)
        ir = trace(case.module, case.inputs, case.formats, name=case.name)
        sched = resolve_schedule(args)
        if sched.orders or sched.block:
            raise UserError(f"--schedule {args.schedule}: orders and block are for compile "
                            f"PROGRAM.py; a model's statements are generated")
        args.traced_ir = ir  # as written (rank --assoc auto ranks every order itself)
        ir = _choose_assoc(args, ir, sched)
        cm = _compile_fusion(args, ir, sched, choose)
    except (FrontendError, ValueError) as exc:
        raise UserError(str(exc)) from None
    check_manifest_graphs(args, cm)
    return case, ir, cm


def _choose_assoc(args: argparse.Namespace, ir, sched):
    """``--assoc auto``: every association order of the model's product chains
    (:func:`fuseflow.models.assoc.subsets`) compiled at each granularity and estimated; the
    fewest estimated cycles wins (ties: as written).  Said on stderr (every order with
    ``--explain``); ``args.assoc_choice`` keeps the record (None for as written)."""
    args.assoc_choice = None
    given = getattr(args, "assoc", None)
    if given in (None, "as-written"):
        return ir
    pairs = chain_pairs(ir)
    if given != "auto":
        return _given_assoc(args, ir, pairs, given)
    memory, placement = resolve_memory(args, sched)
    onchip = Placement(placement.onchip, strict=False)
    passes = pass_values(args, sched, Source.MODEL)
    explicit = sched.fusion or getattr(args, "fusion", None)
    explicit = None if explicit == "auto" else explicit
    strict = getattr(args, "strict", False)
    orders = []
    for subset in subsets(pairs):
        cand = reassociate(ir, list(subset))
        try:
            choice = choose_fusion(lambda f, c=cand: compile_model(c, f, strict=strict, **passes),
                                   lambda cm: estimate_model(cm, memory=memory, placement=onchip),
                                   errors=(FrontendError, ValueError), keep=explicit)
        except (FrontendError, ValueError, AssocError) as exc:
            orders.append({"rewritten": [r.outer for r in subset], "error": str(exc).splitlines()[0]})
            continue
        fusion = explicit or choice.fusion
        orders.append({"rewritten": [r.outer for r in subset], "fusion": fusion,
                       "estimated_cycles": round(choice.estimates[fusion].cycles), "ir": cand,
                       "text": [r.text() for r in subset]})
    done = [o for o in orders if "error" not in o]
    if not done:
        raise UserError(f"--assoc auto: no order compiles ({orders[0]['error']})")
    best = min(done, key=lambda o: (o["estimated_cycles"], len(o["rewritten"])))
    written = next((o for o in done if not o["rewritten"]), None)
    args.assoc_choice = {"mode": "auto", "chosen": best["rewritten"],
                         "orders": [{k: v for k, v in o.items() if k not in ("ir", "text")} for o in orders]}
    what = "; ".join(best["text"]) if best["rewritten"] else "as written"
    vs = (f"; as written {written['estimated_cycles']:,} ({written['estimated_cycles'] / max(best['estimated_cycles'], 1):.2f}x)"
          if written is not None and written is not best else "")
    print(f"assoc auto -> {what}: {best['estimated_cycles']:,} estimated cycles ({best['fusion']}), "
          f"the fewest of {len(orders)} orders{vs} (estimate under memory {memory.name})", file=sys.stderr)
    if getattr(args, "explain", False):
        for o in orders:
            name = ", ".join(o["rewritten"]) or "as written"
            cost = o.get("error") or f"{o['estimated_cycles']:,} estimated cycles ({o['fusion']})"
            print(f"  assoc order [{name}]: {cost}", file=sys.stderr)
    return best["ir"]


def _given_assoc(args: argparse.Namespace, ir, pairs, given: str):
    """``--assoc PRODUCT[,PRODUCT...]``: the chains whose outer products are named, reassociated."""
    by_outer = {r.outer: r for r in pairs}
    names = [n.strip() for n in given.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_outer]
    if unknown or not names:
        have = "; ".join(r.text() for r in pairs) or "none"
        raise UserError(f"--assoc {given}: {', '.join(unknown) or 'no product named'} is not the outer product "
                        f"of a chain of model {args.model} (auto, as-written, or products of its chains: {have})")
    chosen = [by_outer[n] for n in dict.fromkeys(names)]
    args.assoc_choice = {"mode": "given", "chosen": [r.outer for r in chosen]}
    print(f"assoc -> {'; '.join(r.text() for r in chosen)}", file=sys.stderr)
    return reassociate(ir, chosen)


def _compile_fusion(args: argparse.Namespace, ir, sched, choose: bool):
    """Compile ``ir`` at the granularity of the schedule or ``--fusion`` (auto: the estimate's
    pick, said on stderr); sets ``args.fusion`` to the one compiled and ``args.fusion_choice``
    to the estimate's record (None when not chosen)."""
    passes = pass_values(args, sched, Source.MODEL)
    strict = getattr(args, "strict", False)
    explicit = sched.fusion or getattr(args, "fusion", None)
    explicit = None if explicit == "auto" else explicit
    args.fusion_choice = None
    if not choose:
        args.fusion = explicit or "partial"
        return compile_model(ir, args.fusion, strict=strict, **passes)
    memory, placement = resolve_memory(args, sched)
    onchip = Placement(placement.onchip, strict=False)
    choice = choose_fusion(lambda f: compile_model(ir, f, strict=strict, **passes),
                           lambda cm: estimate_model(cm, memory=memory, placement=onchip),
                           errors=(FrontendError, ValueError), keep=explicit)
    args.fusion = explicit or choice.fusion
    args.fusion_choice = {"mode": "explicit" if explicit else "auto", **choice.to_json()}
    if explicit is None:
        print(f"fusion auto -> {choice.reason()} (estimate under memory {memory.name})", file=sys.stderr)
    elif (w := choice.warning(explicit)) is not None:
        print(f"warning: {w}", file=sys.stderr)
    return choice.compiled


def _zoo_case(args: argparse.Namespace, make_case):
    if args.inputs or args.formats:
        raise UserError(f"--inputs / --formats: for FILE.py:NAME models; {args.model} makes its own")
    if args.model == "gpt" and args.dataset is not None:
        raise UserError(f"--dataset {args.dataset}: gpt runs on a seeded random sequence (--seq, --dmodel)")
    if args.dataset is None:
        args.dataset = {"gcn": "karate", "graphsage": "karate", "sae": "random"}.get(args.model)
    ds = args.dataset
    density, fdensity = getattr(args, "density", None), getattr(args, "feature_density", None)
    given = [f for f, v in (("--density", density), ("--feature-density", fdensity)) if v is not None]
    if given and (args.model not in ("gcn", "graphsage") or args.dataset not in SYNTHETIC):
        what = f"model {args.model}" if args.model not in ("gcn", "graphsage") else f"--dataset {args.dataset}"
        raise UserError(f"{' / '.join(given)}: for the synthetic graphs of gcn / graphsage "
                        f"(--dataset {'|'.join(SYNTHETIC)}); {what} has its own")
    if args.model in ("gcn", "graphsage"):
        ds = load_dataset(args.dataset, nodes=args.nodes, features=args.features, density=density,
                          feature_density=fdensity)
    return make_case(args.model, ds, hidden=args.hidden, seq=args.seq, d=args.dmodel,
                     heads=args.heads, blocks=args.blocks)


def _user_case(args: argparse.Namespace):
    given = [k for k in _ZOO_ONLY if getattr(args, k, _MODEL_OPTIONS[k]) != _MODEL_OPTIONS[k]]
    given += ["density"] if getattr(args, "density", None) is not None else []
    if given:
        raise UserError(f"{', '.join('--' + k.replace('_', '-') for k in given)}: model-zoo options; {args.model} is your own "
                        "model (its inputs come from --inputs or its factory)")
    # deferred: the loader imports torch (an optional dependency), only for FILE.py models
    from fuseflow.models.user import load_user_model

    return load_user_model(args.model, args.inputs, args.formats)


def _reference(case) -> np.ndarray:
    """PyTorch's result for the check (an error in the user's forward is a one-line error)."""
    try:
        return case.reference()
    except FrontendError as exc:
        raise UserError(str(exc)) from None


def host_text(cm, res=None) -> str:
    """One line on the host steps (graph breaks, conversions, data movement) and, after a run,
    the bytes they materialised."""
    kinds: dict[str, int] = {}
    for s in cm.host_steps:
        kinds[s.kind] = kinds.get(s.kind, 0) + 1
    what = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) or "none (fully on dataflow)"
    moved = f"; materialised {res.materialised_bytes} bytes on the host" if res is not None and res.host else ""
    return f"host steps: {what}{moved}"


def simulate_model_args(args: argparse.Namespace) -> tuple[dict, dict]:
    """Compile the model of ``args``, run it in sw_sim and check it against PyTorch: the
    ``sim --json`` record and what the text output adds (case, compiled model, memory model,
    merged counters, check description)."""
    check_save_path(args)
    case, ir, cm = load_compiled(args)
    text = args.numerics or "float"
    try:
        num = Numerics.parse(text)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if num.mode is Mode.INT:
        raise UserError(f"--numerics {text}: models need float or fixed point (e.g. q16.16)")
    model, placement = resolve_memory(args)
    try:
        placement.check({t for g in cm.graphs for t in g.tensors}, f"model {args.model}")
        res = simulate_model(cm, numerics=str(num), simulate=run_graph, memory=model,
                             onchip=Placement(placement.onchip, strict=False),
                             saturate=getattr(args, "saturate", False), on_overflow="ignore")
    except (MemoryError, ValueError) as exc:
        raise UserError(str(exc)) from None
    counters = merge_counters([c for _, c in res.counters])
    checks = check_model(cm, res, _reference(case), num)
    ok = all(c.ok for c in checks)
    out = checks[0]
    record = {"source": case.description, "model": args.model, "fusion": args.fusion,
              "fusion_choice": args.fusion_choice, "assoc_choice": getattr(args, "assoc_choice", None),
              "par_choice": getattr(args, "par_choice", None),
              "schedule": resolve_schedule(args).to_json(), "cycles": res.total_cycles,
              "ok": ok, "error": out.max_error, "tolerance": out.bound, "numerics": str(num),
              "checks": [c.to_json() for c in checks],
              "graphs": [{"name": n, "cycles": c} for n, c in res.cycles],
              "memory": model.to_json(), "onchip": sorted(placement.onchip),
              "counters": summary_counters(counters),
              "wall_seconds": round(res.wall_seconds, 3), "engine": sw_sim.ENGINE,
              "saturated": res.saturated if getattr(args, "saturate", False) else None,
              "overflows": res.overflows, "capture": ir.capture,
              "host_steps": [{k: h[k] for k in ("step", "kind", "bytes_read", "bytes_written")} for h in res.host],
              "graph_breaks": len(cm.breaks), "materialised_bytes": res.materialised_bytes}
    saved = save_outputs(args, res.outputs, None)  # the model's outputs: real values already
    record["saved"] = str(saved) if saved else None
    return record, {"case": case, "compiled": cm, "memory": model, "counters": counters, "checks": checks,
                    "run": res}


def checks_text(checks: list[Check]) -> list[str]:
    """The check lines: each output against PyTorch, then the stage checks in one line (all of
    them when one fails)."""
    lines = [f"check against PyTorch: {c.text()}" for c in checks if not c.name.startswith("stage ")]
    stages = [c for c in checks if c.name.startswith("stage ")]
    if stages:
        worst = max(stages, key=lambda c: c.worst)
        ok = all(c.ok for c in stages)
        lines.append(f"stage checks ({len(stages)} materialised tensors, each within the bound derived "
                     f"from the values it read): {'PASS' if ok else 'FAIL'}; worst {worst.text()}")
        lines += [f"  {c.text()}" for c in stages if not c.ok]
    return lines


def run_model(args: argparse.Namespace) -> int:
    """Compile the model, run it in sw_sim (float numerics), check against PyTorch."""
    record, more = simulate_model_args(args)
    ok = record["ok"]
    if getattr(args, "json", False):
        print(json.dumps(record, indent=1))
        ok &= overflow_verdict(args, more["run"].overflow_records, f"model {args.model}", err=True)
        return 0 if ok else 1
    cm = more["compiled"]
    print(more["case"].description)
    if getattr(args, "explain", False):
        print(cm.explain())
    for note in cm.notes:
        print(f"note: {note.splitlines()[0]}")
    print(f"{args.model} / {args.fusion}: {len(cm.graphs)} graphs, compiled in {cm.seconds * 1e3:.1f} ms; "
          f"{record['cycles']} cycles in sw_sim ({record['wall_seconds']:.1f} s, {sw_sim.ENGINE} model)")
    print(f"memory: {more['memory'].describe()}")
    print(host_text(cm, more["run"]))
    if record["saved"]:
        print(f"outputs saved: {record['saved']}")
    if getattr(args, "saturate", False):
        print(saturated_text(record["saturated"], record["numerics"]))
    ok &= overflow_verdict(args, more["run"].overflow_records, f"model {args.model}")
    print(counters_text(more["counters"], stats=getattr(args, "stats", False)))
    print("\n".join(checks_text(more["checks"])))
    return 0 if ok else 1


def summary_counters(c: dict) -> dict:
    """The counters for JSON: everything but the per-stream token counts of a many-graph run."""
    return {k: v for k, v in c.items() if k != "tokens"}


def counters_text(c: dict, stats: bool = False) -> str:
    """Counters as text: totals; with ``stats`` the per-array table too."""
    flops = ", ".join(f"{k} {v}" for k, v in c["flops"].items()) or "none"
    lines = [(f"FLOPs {c['flops_total']} ({flops}); bytes read {c['bytes_read']}, written "
              f"{c['bytes_written']}, moved off chip {c['bytes_offchip']}; intensity "
              f"{format(c['intensity'], '.3f') if c['intensity'] is not None else '-'} FLOP/B")]
    if stats and c["arrays"]:
        rows = [[k, "off" if a["offchip"] else "on", a["words_read"], a["bytes_read"], a["words_written"],
                 a["bytes_written"], a.get("lines", "-"), a.get("bytes_moved", "-")] for k, a in c["arrays"].items()]
        lines.append(table_text(rows, ["array", "chip", "words read", "bytes read", "words written",
                                  "bytes written", "lines", "bytes moved"]))
    return "\n".join(lines)


def build_model(args: argparse.Namespace) -> int:
    """Elaborate every graph of the model to Verilog, each in its own directory, and write
    ``model.json``: the steps in the order they run (graphs with their Verilog, inputs, outputs
    and what they compute: the fused Einsum and the model's source lines; host steps with what
    they read).  ``--max-nnz T=N`` applies to the graphs with tensor T (one in no graph is an
    error); ``--lint`` lints every graph's Verilog."""
    _, _, cm = load_compiled(args)
    out = Path(args.out)
    cfg = with_numerics(HwConfig(cw=args.cw, vw=args.vw, fifo_depth=args.fifo_depth),
                        getattr(args, "numerics", None), True)
    caps = _model_max_nnz(args, cm.graphs)
    rows: list[list] = []
    built_files: list[tuple[str, Path, str]] = []

    def build(g, computes) -> dict:
        gcfg = replace(cfg, max_nnz=tuple((t, n) for t, n in caps if t in g.tensors))
        try:
            summary = build_graph(g, out / g.name, gcfg)
        except ValueError as exc:
            raise UserError(f"model {args.model}, graph {g.name!r}: {exc}") from None
        (out / g.name / "graph.dot").write_text(g.to_dot())
        built_files.append((g.name, out / g.name / summary["verilog"], summary["top"]))
        rows.append(["graph", g.name, f"{g.name}/{summary['verilog']} ({summary['verilog_lines']:,} lines)",
                     ", ".join(g.input_tensors())])
        return {"name": g.name, "dir": g.name, "verilog": f"{g.name}/{summary['verilog']}",
                "top": summary["top"], "nodes": len(g.nodes), "inputs": g.input_tensors(),
                "outputs": g.output_tensors(), "computes": computes}

    def host(step, made) -> None:
        rows.append([f"host ({step.kind})", made, "", ", ".join(step.reads)])

    steps = model_steps(cm, build, host)
    manifest = {"model": args.model, "fusion": args.fusion, "fusion_choice": args.fusion_choice, "numerics": str(cfg.num), "cw": cfg.cw, "vw": cfg.vw,
                "max_nnz": dict(caps), "options": model_options(args), "graphs": [g.name for g in cm.graphs],
                "structure": {g.name: g.structure_hash() for g in cm.graphs}, "steps": steps}
    (out / "model.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{args.model} / {args.fusion}: {len(cm.graphs)} graphs, {len(cm.host_steps)} host steps "
          f"({cfg.num} values) -> {out}/ (model.json: the steps in order, what each graph computes)")
    print_table(rows, ["step", "name", "verilog", "reads"])
    if args.lint:
        failed = 0
        for name, path, top in built_files:
            res = lint(path, top)
            print(f"verilator --lint-only {name}: {'clean' if res.returncode == 0 else 'FAILED'}")
            if res.returncode:
                failed += 1
                print(res.stderr[-4000:])
        return 1 if failed else 0
    return 0


def model_steps(cm, graph_entry, on_host=None) -> list[dict]:
    """The steps of compiled model ``cm`` in the order they run, as ``model.json`` lists them:
    host steps with what they read and make (``on_host(step, made)`` is told of each), graph
    steps with ``graph_entry(graph, computes)`` for each graph, the model's source lines and the
    conversions a compiled program makes."""
    steps: list[dict] = []
    for step in cm.steps:
        if not step.graphs:
            made = step.output if isinstance(step, ConvertStep) else step.node.name
            steps.append({"kind": "host", "what": step.kind, "label": step.label(), "reads": list(step.reads),
                          "output": made})
            if on_host is not None:
                on_host(step, made)
            continue
        entry = {"kind": "graphs", "label": step.label(),
                 "graphs": [graph_entry(g, computes) for g, computes in _graph_texts(step)],
                 "source": list(dict.fromkeys(str(n.source) for n in getattr(step, "nodes", [])))}
        if isinstance(step, CompilerStep) and step.compiled.permuted:
            entry["conversions"] = [{"name": p.name, "source": p.source, "format": str(p.fmt), "why": p.reason}
                                    for p in step.compiled.permuted]
        steps.append(entry)
    return steps


def add_host_steps_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-host-steps", action="store_true",
                   help="with --model on a board: refuse a model that needs the host between its graphs "
                        "(graph breaks, conversions, data movement, permuted copies), naming each")
    declare(p, Source.MODEL, "--no-host-steps")


def _model_max_nnz(args: argparse.Namespace, graphs) -> tuple[tuple[str, int], ...]:
    """``--max-nnz`` of a whole model: each tensor must be in one of its graphs."""
    items = getattr(args, "max_nnz", None) or []
    every = {t for g in graphs for t in g.tensors}
    caps: dict[str, int] = {}
    for item in items:
        tensor, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit() or int(value) < 1:
            raise UserError(f"--max-nnz {item!r}: expected TENSOR=N with N at least 1, e.g. B=512")
        if tensor in caps:
            raise UserError(f"--max-nnz {item}: tensor {tensor} is given twice; give it once")
        if tensor not in every:
            raise UserError(f"--max-nnz {item!r}: no graph of model {args.model} has tensor {tensor!r}; "
                            f"tensors: {', '.join(sorted(every))}")
        if not any(tensor in g.tensors and sparse_in(g, tensor) for g in graphs):
            raise UserError(f"--max-nnz {item!r}: tensor {tensor!r} is dense in every graph of model "
                            f"{args.model} (its memories hold its dense size)")
        caps[tensor] = int(value)
    return tuple(sorted(caps.items()))


def _graph_texts(step) -> list[tuple[Graph, list[str]]]:
    """Each graph of ``step`` with what it computes: the fused Einsum and the legend of its fused
    indices (a compiled program's graph), or the ML subgraph's label."""
    if isinstance(step, CompilerStep):
        return [(cg.graph, cg.group.fused_einsum().splitlines()
                 + [f"{i} is {what}" for i, what in cg.group.origins.items()]) for cg in step.compiled.groups]
    return [(g, [step.label()]) for g in step.graphs]


def compile_model_cmd(args: argparse.Namespace) -> int:
    """``compile --model …``: trace and compile, print the steps (``--explain``: every node with
    its source line, the fused Einsums and their index legends), write the graphs (``-o``),
    run and check against PyTorch (``--run``)."""
    case, ir, cm = load_compiled(args)
    print(case.description)
    print(f"{ir.name} / {args.fusion} (captured with {ir.capture}): {len(cm.steps)} steps, {len(cm.graphs)} "
          f"graphs, compiled in {cm.seconds * 1e3:.1f} ms")
    print(host_text(cm))
    if args.explain:
        print(cm.explain())
    else:
        for note in ir.notes + cm.notes:
            print(f"note: {note.splitlines()[0]}")
    if args.outdir:
        out = Path(args.outdir)
        out.mkdir(parents=True, exist_ok=True)
        for g in cm.graphs:
            g.save(out / f"{g.name}.json")
            (out / f"{g.name}.dot").write_text(g.to_dot())
        print(f"wrote {len(cm.graphs)} graphs (.json, .dot) to {out}")
    if not args.run:
        return 0
    try:
        res = simulate_model(cm, simulate=run_graph, on_overflow="ignore")  # float: nothing overflows
    except ValueError as exc:
        raise UserError(str(exc)) from None
    checks = check_model(cm, res, _reference(case), "float")
    print(f"{res.total_cycles} cycles in sw_sim; {host_text(cm, res)}")
    print("\n".join(checks_text(checks)))
    return 0 if all(c.ok for c in checks) else 1


def rtl_model_cmd(args: argparse.Namespace) -> int:
    """``rtl --model …``: every graph of the model in RTL (Q16.16 values) next to sw_sim: values
    and cycles must be identical, and the dequantised result within the fixed-point bound of
    PyTorch.  Host steps run on the host between graphs, as in sw_sim."""
    # deferred: the RTL runner is needed only here (it needs Verilator)
    from rtl_sim import ToolchainError
    from rtl_sim import run_graph as rtl_run

    case, _, cm = load_compiled(args)
    text = getattr(args, "numerics", None) or "q16.16"
    try:
        num = Numerics.parse(text)
    except ValueError as exc:
        raise UserError(f"--numerics {text}: {exc}") from None
    if num.mode is not Mode.FIXED:
        raise UserError(f"--numerics {text}: a model's RTL runs fixed point (e.g. q16.16, the default)")
    cfg = HwConfig.for_numerics(num)
    rows: list[tuple[str, int, int, bool]] = []

    def both(graph, data, **kw):
        sw = run_graph(graph, data, **kw)
        rtl = rtl_run(graph, data, cfg=cfg, runner=args.runner, on_overflow="ignore")  # flags compared
        same = all(np.array_equal(rtl.outputs[t].vals, o.vals) and
                   np.array_equal(rtl.outputs[t].to_dense(), o.to_dense()) for t, o in sw.outputs.items())
        rows.append((graph.name, sw.cycles, rtl.cycles, same and sorted(rtl.overflow) == sorted(sw.overflows)))
        return sw

    try:
        res = simulate_model(cm, numerics=str(num), simulate=both, on_overflow="ignore")
    except (ToolchainError, ValueError) as exc:
        raise UserError(str(exc)) from None
    checks = check_model(cm, res, _reference(case), num)
    identical = all(same and s == r for _, s, r, same in rows)
    if getattr(args, "json", False):
        record = {"source": case.description, "model": args.model, "fusion": args.fusion,
                  "fusion_choice": args.fusion_choice, "assoc_choice": getattr(args, "assoc_choice", None),
              "par_choice": getattr(args, "par_choice", None),
                  "runner": args.runner, "numerics": str(num),
                  "graphs": [{"name": n, "sw_cycles": s, "rtl_cycles": r, "identical": same and s == r}
                             for n, s, r, same in rows],
                  "sw_cycles": sum(s for _, s, _, _ in rows), "rtl_cycles": sum(r for _, _, r, _ in rows),
                  "outputs_identical": identical, "checks": [c.to_json() for c in checks],
                  "ok": identical and all(c.ok for c in checks), "overflows": res.overflows,
                  "host_steps": [{k: h[k] for k in ("step", "kind", "bytes_read", "bytes_written")}
                                 for h in res.host]}
        print(json.dumps(record, indent=1))
        ok = record["ok"] & overflow_verdict(args, res.overflow_records, f"model {args.model}", err=True)
        return 0 if ok else 1
    print(case.description)
    print_table([[n, s, r, "yes" if same and s == r else "NO"] for n, s, r, same in rows],
                ["graph", "sw_sim cycles", "RTL cycles", "identical"])
    print(host_text(cm, res))
    print(f"RTL = sw_sim in values, overflow flags and cycles for {len(rows)} graphs: {'yes' if identical else 'NO'}")
    ok = identical & overflow_verdict(args, res.overflow_records, f"model {args.model}")
    print("\n".join(checks_text(checks)))
    ok &= all(c.ok for c in checks)
    return 0 if ok else 1
