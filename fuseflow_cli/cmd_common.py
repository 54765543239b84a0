"""Options and helpers shared by the graph-oriented subcommands."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from fuseflow.compiler.bounds import check_program
from fuseflow.compiler.passes.par import ParallelError, parallelize
from fuseflow.compiler.passes.skip import enable_skipping, explain_skipping, skip_sites
from fuseflow.compiler.pipeline import pass_options
from fuseflow.compiler.program import Program, ProgramError
from fuseflow.compiler.program_json import program_from_reference
from fuseflow.cost.graph import estimate_graph
from fuseflow.cost.par_search import ParChoice, choose_par_graphs
from fuseflow.executor import (
    WORKER_MEMORY,
    WORKERS_PER_CORE,
    Executor,
    ExecutorError,
    make_executor,
    max_workers,
)
from fuseflow.ir.check import Check, compare
from fuseflow.ir.graph_file import load_graph
from fuseflow.ir.memory import PRESETS as MEMORY_PRESETS
from fuseflow.ir.memory import MemoryError, MemoryModel, Placement, parse_memory
from fuseflow.ir.numerics import INT32, Mode, Numerics
from fuseflow.ir.overflow import OVERFLOW_POLICIES, NumericOverflowError, Overflow
from fuseflow.ir.quantize import quantized_input
from fuseflow.ir.results_file import save_results
from fuseflow.ir.samml import Graph, GraphError
from fuseflow.ir.tensor import Format, TensorData
from fuseflow.ir.validate import saturate_inputs
from fuseflow.kernels import (
    KERNELS,
    check_kernel,
    example,
    example_from_matrix,
    integer_matrix,
    kernel_graph,
    matrix_use,
    random_operands,
    sparse_inputs,
)
from fuseflow.models.datasets import read_matrix
from fuseflow.options import Kind, Option, Source
from fuseflow.schedule import (
    AUTO,
    Schedule,
    ScheduleError,
    load_schedule,
    par_budget,
    parse_block,
    parse_index_map,
    parse_par,
)
from hw.elaborate import HwConfig, crd_width_needed

from .applies import declare
from .argtypes import MAX_SIZE, fraction, int_range
from .errors import UserError

OVERFLOW_CHOICES = OVERFLOW_POLICIES[:2]  # raise, report ("ignore" is for code that reports flags itself)
OPERAND_DENSITY = 0.1  # --density of random kernel / graph-file operands when not given

__all__ = [
    "GraphJob",
    "add_graph_args",
    "add_graph_source_args",
    "add_kernel_options",
    "add_memory_args",
    "add_numerics_arg",
    "add_overflow_arg",
    "add_pass_args",
    "add_saturate_arg",
    "add_save_arg",
    "add_schedule_args",
    "add_scheduler_arg",
    "add_width_args",
    "apply_par",
    "choose_graph_par",
    "refuse_par_auto",
    "check_save_path",
    "NO_REFERENCE",
    "check_text",
    "compare_rtl",
    "graph_numerics",
    "has_flag",
    "hw_overflow_text",
    "kernel_graph_of",
    "kernel_options",
    "load_graph_job",
    "open_executor",
    "operand_density",
    "overflow_mismatches",
    "overflow_verdict",
    "parse_max_nnz",
    "pass_values",
    "resolve_memory",
    "resolve_schedule",
    "resolve_widths",
    "saturate_job",
    "saturated_text",
    "save_outputs",
    "table",
    "with_numerics",
]


def add_graph_source_args(p: argparse.ArgumentParser, *, graph_help: str, kernel_help: str,
                          size_help: str) -> None:
    """The graph a command works on: GRAPH.json, or ``--kernel`` at ``--size`` with its
    options (each command's own wording)."""
    p.add_argument("graph", nargs="?", help=graph_help)
    p.add_argument("--kernel", choices=sorted(KERNELS), help=kernel_help)
    p.add_argument("--size", type=int_range(1, MAX_SIZE), default=64, help=size_help)
    add_kernel_options(p)
    declare(p, Source.KERNEL, "--size", "--block", "--lanes")


def add_graph_args(p: argparse.ArgumentParser, *, manifest: bool = False) -> None:
    """The graph options; ``manifest``: the command also takes a ``build --model`` manifest."""
    add_graph_source_args(p, graph_help="SAMML graph JSON (or use --kernel)" + (
                              ", or the model.json of build --model: its model with the same options and graphs"
                              if manifest else ""),
                          kernel_help="a built-in kernel graph instead of a file",
                          size_help="matrix size of --kernel (default 64)")
    p.add_argument("--data", help="operands: a .npz of arrays named by tensor (graph files), or one "
                   "matrix (.mtx Matrix Market or scipy sparse .npz with --kernel; .mtx with a graph "
                   "file) for every sparse input, dense inputs seeded random (default: all seeded random)")
    p.add_argument("--seed", type=int_range(0), default=0, help="seed of the random operands")
    p.add_argument("--operand", metavar="TENSOR=FILE",
                   help="--kernel with --data: the kernel's second operand from a file instead of "
                        "generated or derived from the matrix: X of spmm_dense (B) and bspmm (X), B of "
                        "spmm_csr / add / mul / spmspm_inner, c of spmv; a .npy array, or a .mtx / "
                        "scipy sparse .npz matrix")
    p.add_argument("--dense-cols", type=int_range(1, MAX_SIZE), metavar="N",
                   help="--kernel spmm_dense / bspmm with --data: columns of the random dense matrix "
                        "X in M·X (default: the matrix's column count)")
    p.add_argument("--density", type=fraction, default=None,
                   help="density of the random sparse operands of a kernel or graph file (default "
                        f"{OPERAND_DENSITY}); with --model on the synthetic graphs uniform, powerlaw "
                        "or blockdiag: the adjacency's non-zero fraction nnz/(n*n), self loops not "
                        "counted (there are none; the densest graph is (n-1)/n)")
    p.add_argument("--skip", action="store_true",
                   help="coordinate skipping on the graph's intersections of compressed fibres "
                        "(an error if none can skip)")
    add_schedule_args(p)
    add_pass_args(p, Source.GRAPH)
    declare(p, Source.KERNEL, "--operand", "--dense-cols")
    declare(p, Source.KERNEL | Source.GRAPH, "--data")
    declare(p, Source.KERNEL | Source.GRAPH | Source.PROGRAM, "--seed")  # estimate PROGRAM.py: example_data(seed)


def drawn_operands(graph: Graph, seed: int, density: float = 0.1) -> dict[str, object]:
    """``fuseflow.kernels.random_operands``, a tensor too large to draw a ``UserError``."""
    try:
        return random_operands(graph, seed, density)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def operand_density(args: argparse.Namespace) -> float:
    """``--density`` of random kernel / graph-file operands (its default when not given)."""
    d = getattr(args, "density", None)
    return OPERAND_DENSITY if d is None else d


def add_kernel_options(p: argparse.ArgumentParser) -> None:
    """``--block`` / ``--lanes``: the options of a blocked built-in kernel (``bspmm``)."""
    p.add_argument("--block", type=int_range(1, 1 << 16), metavar="B",
                   help="block size of --kernel bspmm: a power of two (default 4)")
    p.add_argument("--lanes", type=int_range(1, 64), metavar="W",
                   help="vector lanes of --kernel bspmm: the block size (default) or a power-of-two divisor")


def kernel_options(args: argparse.Namespace) -> dict[str, int]:
    """The kernel options given on the command line; an error without ``--kernel``."""
    opts = {k: getattr(args, k, None) for k in ("block", "lanes")}
    opts = {k: v for k, v in opts.items() if v is not None}
    if opts and not getattr(args, "kernel", None):
        raise UserError(f"{', '.join('--' + k for k in opts)} set(s) the options of a built-in kernel "
                        "(--kernel bspmm); a graph file carries its own lanes")
    return opts


def kernel_graph_of(args: argparse.Namespace) -> Graph:
    """The graph of ``--kernel`` at ``--size`` with its options (errors named)."""
    try:
        return kernel_graph(args.kernel, args.size, **kernel_options(args))
    except ValueError as exc:
        raise UserError(str(exc)) from None


def add_schedule_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schedule", metavar="FILE|PRESET",
                   help="schedule: a .toml/.json file (fusion, orders, par, locate, skip) or a "
                        "preset: unfused, partial, full (README, 'Parallel lanes and schedules')")
    add_pass_args(p, Source.ALL, only=("par",))


def add_pass_args(p, source: Source, *, only: Sequence[str] | None = None,
                  without: Source | None = None) -> None:
    """The command-line flags of the compiler passes' options that apply to ``source`` (from
    their declarations; ``without``: not those that apply to these sources too), except those
    ``p`` has already (a command's own wording)."""
    for opt in pass_options(source):
        if without is not None and opt.sources & without:
            continue
        if opt.cli and (only is None or opt.name in only) and not has_flag(p, opt.cli_flag):
            opt.add_argument(p)


def has_flag(p, flag: str) -> bool:
    return flag in p._option_string_actions  # argument groups share their parser's table


_PARSE_MAP = {"par": parse_par, "block": parse_block}


def _given(opt: Option, value):
    if opt.kind is not Kind.INDEX_MAP:
        return value
    parse = _PARSE_MAP.get(opt.name)
    return parse(value) if parse else parse_index_map(opt, value, opt.example or "i=2")


def pass_values(args: argparse.Namespace, sched: Schedule, source: Source) -> dict:
    """The compiler pass options of ``source`` as the command line and the schedule set them:
    an {index: n} map is the schedule's with the command line's added; a flag is the
    schedule's if it sets it; any other value the command line's if given, else the
    schedule's, else the declared default."""
    out = {}
    for opt in pass_options(source):
        if not opt.cli:
            continue
        try:
            given = _given(opt, getattr(args, opt.name, [] if opt.kind is Kind.INDEX_MAP else None))
        except ScheduleError as exc:
            raise UserError(str(exc)) from None
        planned = getattr(sched, opt.name) if opt.schedule else None
        if opt.kind is Kind.INDEX_MAP:
            out[opt.name] = {**(planned or {}), **given} or None
            if opt.name == "par":
                refuse_par_auto(out["par"], "a program's or model's compile")
        elif opt.kind is Kind.FLAG:
            out[opt.name] = planned if planned is not None else (opt.default if given is None else given)
        else:
            out[opt.name] = next((v for v in (given, planned) if v is not None), opt.default)
    return out


def resolve_schedule(args: argparse.Namespace) -> Schedule:
    """The schedule of the command line: ``--schedule`` (default: none set) plus ``--par``."""
    try:
        base = load_schedule(args.schedule) if getattr(args, "schedule", None) else Schedule()
        sched = base.with_par(parse_par(getattr(args, "par", None)))
        par_budget(sched.par)  # auto next to explicit factors (the schedule's and the command line's)
        return sched
    except ScheduleError as exc:
        raise UserError(str(exc)) from None


def refuse_par_auto(par: Mapping[str, int] | None, where: str) -> None:
    """``par auto`` left unresolved where ``where`` needs explicit factors: an error."""
    if par and AUTO in par:
        raise UserError(f"--par auto={par[AUTO]}: chooses the lanes of a graph file, a --kernel or a "
                        f"--model (sim, rtl, build, estimate); {where} takes explicit INDEX=N factors")


def add_scheduler_arg(p: argparse.ArgumentParser, default: str = "processes") -> None:
    p.add_argument("--scheduler", default=default, metavar="serial|processes|dask|tcp://HOST:PORT",
                   help=f"where jobs run: in this process, in -j local processes, on a local Dask cluster of "
                        f"-j workers, or on a running Dask scheduler (default {default}; README 'Sweeps')")


def open_executor(args: argparse.Namespace) -> Executor:
    """The executor of ``--scheduler`` / ``-j`` (a clear error for a bad name or address)."""
    if args.jobs is not None and args.jobs > max_workers() and "://" not in (args.scheduler or ""):
        raise UserError(f"-j {args.jobs}: at most {max_workers()} local workers on this machine "
                        f"({os.cpu_count() or 1} cores; {WORKERS_PER_CORE} per core, {WORKER_MEMORY >> 20} MiB each)")
    try:
        return make_executor(args.scheduler, args.jobs)
    except ExecutorError as exc:
        raise UserError(f"--scheduler {args.scheduler}: {exc}") from None


def add_memory_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", metavar="PRESET[:K=V,...]",
                   help=f"off-chip memory model: {', '.join(MEMORY_PRESETS)} (default ideal, or the "
                        "schedule's), optionally with fields changed, e.g. hbm2:bytes_per_cycle=16 "
                        "(docs/memory.md)")
    p.add_argument("--onchip", action="append", default=[], metavar="TENSOR[,TENSOR]",
                   help="keep these tensors in on-chip block RAM (the others are off-chip under a "
                        "non-ideal --memory); repeatable")


def onchip_names(args: argparse.Namespace) -> list[str]:
    """The tensors ``--onchip`` names (repeatable, comma-separated)."""
    items = getattr(args, "onchip", None) or []
    for item in items:
        if not item.strip() or any(not t.strip() for t in item.split(",")):
            raise UserError(f"--onchip {item!r}: an empty tensor name; give TENSOR[,TENSOR] (identifiers)")
    return [t.strip() for item in items for t in item.split(",")]


def resolve_memory(args: argparse.Namespace, sched: Schedule | None = None) -> tuple[MemoryModel, Placement]:
    """The memory model and placement of the command line: ``--memory`` / ``--onchip``, else the
    schedule's, else ideal with nothing named."""
    sched = sched or resolve_schedule(args)
    try:
        text = getattr(args, "memory", None)
        if text is not None and not text.strip():
            raise UserError(f"--memory {text!r}: empty; give a preset ({', '.join(MEMORY_PRESETS)}) or "
                            "PRESET:key=value,..., or leave --memory out for ideal memory")
        model = parse_memory(text) if text else (sched.memory or parse_memory(None))
    except MemoryError as exc:
        raise UserError(str(exc)) from None
    names = onchip_names(args)
    if not names and sched.onchip:
        names = list(sched.onchip)
    try:
        return model, Placement.of(names)
    except MemoryError as exc:
        raise UserError(str(exc)) from None


@dataclass
class GraphJob:
    graph: Graph
    data: dict[str, TensorData]  # the datapath's numbers (fixed point: quantised)
    expected: np.ndarray | None  # numpy result for built-in kernels
    source: str
    schedule: Schedule | None = None
    numerics: Numerics = INT32  # the values' arithmetic (--numerics)
    kernel: str | None = None  # a built-in kernel's name (its reference and error bound)
    operands: dict | None = None  # a built-in kernel's (or a graph file's) real operands
    program: Program | None = None  # a graph file's own Einsum (Graph.reference), if recorded

    def check(self, outputs: Mapping[str, TensorData]) -> Check | None:
        """A built-in kernel's one output against scipy's result, or a graph file's outputs
        against numpy on the statements recorded in it (the worst output): equal for integers,
        within the numerics' bound for fixed point and float (``None`` for a graph file without
        a record)."""
        if self.program is not None:
            return self._check_reference(outputs)
        if self.expected is None:
            return None
        [out] = outputs.values()
        got = out.to_dense()
        if self.numerics.mode is Mode.INT:  # exact (int32 results: float64 holds them exactly)
            return compare(self.graph.output_tensors()[0], got, self.expected, 0.0, 0.0, str(self.numerics))
        return check_kernel(self.kernel, self.graph, self.operands, self.numerics.dequantize(got), self.numerics)


    def _check_reference(self, outputs: Mapping[str, TensorData]) -> Check:
        assert self.program is not None and self.operands is not None and self.graph.reference is not None
        aliases = self.graph.reference.get("aliases") or {}
        computed = {st.out for st in self.program.statements}
        data = {n: self.operands[aliases.get(n, n)] for n in self.program.decls if n not in computed}
        got = {}
        for name in self.program.result_names():
            dense = outputs[name].to_dense()
            got[name] = dense if self.numerics.mode is Mode.INT else self.numerics.dequantize(dense)
        checks = check_program(self.program, data, got, self.numerics)
        return max(checks, key=lambda c: (not c.ok, c.worst))


NO_REFERENCE = ("the graph file records no Einsum to compute a reference from; graphs the compiler writes "
                "carry one: compile it again with this version")


def graph_reference(g: Graph, source: str) -> Program | None:
    """The program of a graph file's recorded Einsum (None without a record); a malformed
    record is an error naming the file."""
    if g.reference is None:
        return None
    try:
        return program_from_reference(g.reference, source)
    except ProgramError as exc:
        raise UserError(str(exc)) from None


def graph_numerics(args: argparse.Namespace, *, rtl: bool) -> Numerics:
    """``--numerics`` of a graph file or built-in kernel: int (default; 32-bit in sw_sim, the
    value width in RTL), a fixed-point format (real values, quantised), or float (sw_sim only)."""
    text = getattr(args, "numerics", None)
    if text is None or text == "int":
        return INT32 if not rtl else Numerics.integer(max(getattr(args, "vw", None) or 32, 11))
    try:
        num = Numerics.parse(text)
    except ValueError as exc:
        raise UserError(f"--numerics {text}: {exc}") from None
    if rtl and num.mode is Mode.FLOAT:
        raise UserError(f"--numerics {text}: float is sw_sim only; the RTL needs int or fixed point (e.g. q16.16)")
    return num


def add_saturate_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--saturate", action="store_true",
                   help="clamp input values outside the datapath's range to its bounds and report "
                        "how many were clamped (default: such a value is an error naming it)")


def saturate_job(args: argparse.Namespace, job: GraphJob, word: Numerics | int) -> dict[str, int]:
    """With ``--saturate``: clamp the job's input values to ``word`` (numerics, or a signed
    width in bits) in place; the counts of clamped values per tensor."""
    if not getattr(args, "saturate", False):
        return {}
    job.data, counts = saturate_inputs(job.graph, job.data, word)
    return counts


def saturated_text(counts: dict[str, int], word: Numerics | int | str) -> str:
    what = f"{word}-bit" if isinstance(word, int) else str(word)
    return ("saturated: " + ", ".join(f"{n} value(s) of {t!r}" for t, n in counts.items())
            + f" clamped to the {what} range") if counts else "saturated: none"


def overflow_verdict(args: argparse.Namespace, records: Sequence[Overflow], where: str, *,
                     err: bool = False) -> bool:
    """``--on-overflow`` applied to a run's overflows (results the arithmetic wrapped or
    saturated): ``raise`` (default) prints one error line naming every node, its count, the
    largest magnitude and the format, and fails the run; ``report`` prints a warning line and
    does not.  ``err``: print on stderr (``--json`` keeps stdout for the record).  Whether the
    run may still pass."""
    if not records:
        return True
    out = sys.stderr if err else sys.stdout
    if getattr(args, "on_overflow", "raise") == "report":
        print(f"warning: overflow in {where} (--on-overflow report): "
              + "; ".join(o.describe() for o in records), file=out)
        return True
    print(f"fuseflow-hw {args.command}: error: {NumericOverflowError(where, list(records))}", file=sys.stderr)
    return False


def add_overflow_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--on-overflow", choices=OVERFLOW_CHOICES, default="raise",
                   help="a result the arithmetic wrapped (integer numerics) or saturated (fixed "
                        "point): 'raise' (default) fails the run (exit 1) with an error naming "
                        "each node, how many results, the largest magnitude and the format; "
                        "'report' prints the results with a warning (--saturate is different: "
                        "it clamps input values before the run)")


def overflow_mismatches(sw: Mapping[str, int], hw: Sequence[str], who: str = "the RTL") -> list[str]:
    """Where the hardware's sticky overflow flags (the nodes it flagged) and sw_sim's per-node
    counts disagree, one message per node (none when they agree)."""
    out = [f"overflow MISMATCH: {who} flagged node {n!r}, where sw_sim brought no result into range"
           for n in hw if n not in sw]
    out += [f"overflow MISMATCH: sw_sim wrapped or saturated {k} result(s) in node {n!r}, which {who} did not "
            "flag" for n, k in sw.items() if n not in hw]
    return out


def hw_overflow_text(hw: Sequence[str], who: str = "RTL") -> str:
    """The line that reports the nodes the hardware's status registers flagged."""
    return f"{who} overflow flags: " + (", ".join(f"node {n!r}" for n in hw) if hw else "none")


def add_save_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--save", metavar="FILE.npz",
                   help="write every output tensor to FILE.npz by name: dense arrays, sparse matrices as "
                        "their CSR arrays (NAME.data / .indices / .indptr / .shape); real values in fixed "
                        "point (fuseflow.ir.results_file.load_results reads it back)")


def check_save_path(args: argparse.Namespace) -> None:
    """``--save``'s directory must exist (checked before the run, not after minutes of it)."""
    save = getattr(args, "save", None)
    if save is None:
        return
    path = Path(save)
    if path.is_dir():
        raise UserError(f"--save {save!r}: a directory; give a file name such as {str(path / 'out.npz')!r}")
    if path.parent != Path("") and not path.parent.is_dir():
        raise UserError(f"--save {save!r}: no directory {str(path.parent)!r}")


def save_outputs(args: argparse.Namespace, outputs, numerics: Numerics | None) -> Path | None:
    """``--save``: write ``outputs`` (tensor name -> TensorData in the datapath's words, or real
    arrays) and return the file written."""
    if getattr(args, "save", None) is None:
        return None
    try:
        return save_results(args.save, outputs, numerics)
    except (OSError, ValueError) as exc:
        raise UserError(f"--save {args.save!r}: {exc}") from None


def check_text(numerics: str, ok: bool, error: float | None, bound: float | None) -> str:
    """The line of a built-in kernel's check: exact for integers, else its error and bound."""
    if bound == 0 or error is None:
        return f"check against numpy: {'PASS' if ok else 'FAIL'}" + ("" if ok or error is None else
                                                                     f" (max error {error:.3g})")
    return (f"check against numpy ({numerics}): {'PASS' if ok else 'FAIL'} (max error {error:.3g}, "
            f"bound {bound:.3g})")


def compare_rtl(rtl, sw, job: GraphJob) -> tuple[bool, bool | None]:
    """Whether an RTL run's outputs all equal sw_sim's, and, for a built-in kernel, whether its
    one output passes :meth:`GraphJob.check` (None for a graph file)."""
    same = all(np.array_equal(rtl.outputs[t].to_dense(), sw.outputs[t].to_dense()) for t in sw.outputs)
    check = job.check(rtl.outputs)
    return same, None if check is None else check.ok


def load_graph_job(args: argparse.Namespace, *, rtl: bool = False) -> GraphJob:
    """The graph file or built-in kernel of ``args`` with its data in the ``--numerics``'
    numbers (``rtl``: the RTL's choices), skipping and lanes applied."""
    job = _load_graph_job(args, graph_numerics(args, rtl=rtl))
    if getattr(args, "skip", False):
        if not any(s.convertible or s.enabled for s in skip_sites(job.graph)):
            why = "; ".join(explain_skipping(job.graph)) or "it has no intersect"
            raise UserError(f"--skip: no intersection in {job.source} can skip: {why}")
        enable_skipping(job.graph, in_place=True)
        job.source += ", skipping"
    sched = resolve_schedule(args)
    sched = _resolve_par_auto(args, job.graph, sched, job.data)
    apply_par(args, job.graph, job.source, sched)
    job.source += "".join(f", par {i}={f}" for i, f in sched.par.items() if f > 1)
    job.schedule = sched
    return job


def choose_graph_par(graph: Graph, data: Mapping[str, TensorData], budget: int, memory: MemoryModel,
                     placement: Placement) -> ParChoice:
    """``--par auto``'s search on one graph: every split within ``budget`` lanes estimated on
    ``data`` under ``memory`` (:mod:`fuseflow.cost.par_search`)."""
    onchip = Placement(placement.onchip, strict=False)
    try:
        return choose_par_graphs([graph], budget, lambda g: estimate_graph(
            g, {t: data[t] for t in g.input_tensors()}, memory=memory, placement=onchip)[0].cycles,
            qualified=False)
    except (ValueError, GraphError) as exc:
        raise UserError(f"--par auto={budget}: graph {graph.name!r}: {exc}") from None


def _resolve_par_auto(args: argparse.Namespace, graph: Graph, sched: Schedule,
                      data: Mapping[str, TensorData] | None) -> Schedule:
    """``sched`` with ``par auto`` replaced by the estimate's pick for ``graph`` (said on stderr;
    ``args.par_choice``: its record), or unchanged without auto.  ``data``: the operands (None:
    the seeded random ones)."""
    args.par_choice = None
    budget = par_budget(sched.par)
    if budget is None:
        return sched
    if data is None:
        ops = drawn_operands(graph, getattr(args, "seed", 0) or 0, operand_density(args))
        data = {t: graph.tensors[t].data(ops[t]) for t in graph.input_tensors()}
    memory, placement = resolve_memory(args, sched)
    choice = choose_graph_par(graph, data, budget, memory, placement)
    args.par_choice = choice.to_json()
    print(f"par auto {choice.reason()} (estimate under memory {memory.name})", file=sys.stderr)
    return replace(sched, name=sched.name if sched.name != "default" else "custom",
                   passes={**sched.passes, "par": choice.chosen})


def apply_par(args: argparse.Namespace, graph: Graph, source: str,
              sched: Schedule | None = None) -> Graph:
    """``graph`` with the command line's ``--par`` / ``--schedule`` lanes (in place; ``--par
    auto``: the estimate's pick on seeded random operands)."""
    sched = sched or resolve_schedule(args)
    if par_budget(sched.par) is not None:
        sched = _resolve_par_auto(args, graph, sched, None)
    if sched.fusion or sched.orders or sched.block:
        raise UserError(f"--schedule {args.schedule}: a graph file or kernel is already fused and "
                        f"ordered; only par applies (fusion and orders are for --model / compile, "
                        f"block for compile)")
    _reject_compile_switches(args, sched)
    for key in sched.par:
        name, colon, index = key.rpartition(":")
        if colon and name != graph.name:
            raise UserError(f"--par {key}={sched.par[key]}: {source} has no graph {name!r}; its graph is "
                            f"{graph.name!r} (give {graph.name}:{index}=N or {index}=N)")
    if sched.par:
        try:
            # --no-par-banks, else the schedule's par_banks (default on)
            banks = getattr(args, "par_banks", True) and sched.par_banks is not False
            parallelize(graph, sched.par, banks=banks)
        except ParallelError as exc:
            raise UserError(f"{source}: {exc}") from None
    return graph


def _reject_compile_switches(args: argparse.Namespace, sched: Schedule) -> None:
    """A schedule's skip / lanes / locate: compiler switches, not options of a built graph."""
    given = [k for k in ("skip", "lanes", "locate") if getattr(sched, k) is not None]
    if given:
        raise UserError(f"--schedule {args.schedule}: {', '.join(given)} apply to --model / compile; a "
                        "graph file or kernel is already compiled (give --skip on the command line to "
                        "skip on its intersections)")


def _given_operand(args: argparse.Namespace) -> dict[str, object]:
    """``--operand TENSOR=FILE``: the array (.npy) or matrix (.mtx, scipy sparse .npz) by name."""
    text = getattr(args, "operand", None)
    if text is None:
        return {}
    name, eq, file = text.partition("=")
    if not eq or not name or not file:
        raise UserError(f"--operand {text!r}: expected TENSOR=FILE, e.g. B=x.npy")
    path = Path(file)
    if not path.is_file():
        raise UserError(f"--operand {text}: no such file {file!r}")
    try:
        if path.suffix == ".npy":
            value = np.load(path, allow_pickle=False)
        elif path.suffix in (".mtx", ".npz"):
            value = read_matrix(path)
        else:
            raise ValueError(f"file {file!r}: give a .npy array, or a .mtx / scipy sparse .npz matrix")
    except (OSError, ValueError, EOFError) as exc:
        raise UserError(f"--operand {text}: {exc}") from None
    if not 1 <= np.ndim(value) <= 2:
        raise UserError(f"--operand {text}: a vector or matrix, not an array of {np.ndim(value)} dimensions")
    return {name: value}


def _data_file(args: argparse.Namespace) -> Path:
    path = Path(args.data)
    if not path.is_file():
        raise UserError(f"--data {str(path)!r}: no such file")
    return path


def _matrix_operands(g: Graph, path: Path, seed: int, num: Numerics) -> dict[str, object]:
    """``--data X.mtx``: the matrix for every sparse input of a graph file, seeded random dense
    operands."""
    try:
        m = read_matrix(path)
        if num.mode is Mode.INT:
            m = integer_matrix(m, f"--data {str(path)!r}")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    targets = sparse_inputs(g)
    if not targets:
        raise UserError(f"--data {str(path)!r}: graph {g.name!r} has no sparse input for the matrix; "
                        "give a .npz of arrays named by tensor")
    ops: dict[str, object] = drawn_operands(g, seed)
    for t in targets:
        if tuple(m.shape) != g.tensors[t].shape:
            raise UserError(f"--data {str(path)!r}: the matrix is {m.shape[0]}x{m.shape[1]}, but the "
                            f"graph's sparse input {t!r} is {'x'.join(map(str, g.tensors[t].shape))}")
        ops[t] = m
    return ops


def _kernel_job(args: argparse.Namespace, num: Numerics) -> GraphJob:
    opts = kernel_options(args)
    cols = getattr(args, "dense_cols", None)
    if cols is not None and not args.data:
        raise UserError(f"--dense-cols {cols}: the columns of the dense operand next to a matrix given "
                        "with --data (a random kernel's operands are --size square)")
    if cols is not None and args.kernel not in ("spmm_dense", "bspmm"):
        raise UserError(f"--dense-cols {cols}: kernel {args.kernel} has no generated dense matrix "
                        "(spmm_dense and bspmm have)")
    given = _given_operand(args)
    if given and not args.data:
        raise UserError(f"--operand {args.operand}: the second operand next to a matrix given with --data "
                        "(a random kernel's operands are generated together)")
    if given and cols is not None:
        raise UserError(f"--dense-cols {cols}: the given --operand {args.operand} fixes the dense operand's columns")
    if not args.data:
        try:
            g, data, ops, expected = example(args.kernel, args.size, args.seed, operand_density(args),
                                             numerics=num, **opts)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        return GraphJob(g, data, expected, f"kernel {args.kernel} ({args.size}x{args.size})", numerics=num,
                        kernel=args.kernel, operands=ops)
    path = _data_file(args)
    if path.suffix not in (".mtx", ".npz"):
        raise UserError(f"--data {str(path)!r}: a kernel takes one matrix, a .mtx (Matrix Market) or "
                        "scipy sparse .npz file")
    try:
        g, data, ops, expected = example_from_matrix(args.kernel, read_matrix(path), args.seed,
                                                     f"--data {str(path)!r}", numerics=num, x_cols=cols,
                                                     given=given, **opts)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    shape = g.tensors[sparse_inputs(g)[0]].operand_shape
    return GraphJob(g, data, expected, f"kernel {args.kernel} on {path.name} ({shape[0]}x{shape[1]}) computing "
                    f"{matrix_use(args.kernel, shape, next(iter(given), None))}",
                    numerics=num, kernel=args.kernel, operands=ops)


def _reject_kernel_operand_options(args: argparse.Namespace) -> None:
    """The built-in kernels' options given with a graph file are errors."""
    kernel_options(args)
    if getattr(args, "dense_cols", None) is not None:
        raise UserError("--dense-cols: the dense operand of a built-in kernel (--kernel spmm_dense or bspmm)")
    if getattr(args, "operand", None) is not None:
        raise UserError(f"--operand {args.operand}: a built-in kernel's second operand; a graph file's "
                        "operands come from --data (a .npz of arrays named by tensor)")


def _load_graph_job(args: argparse.Namespace, num: Numerics) -> GraphJob:
    if args.kernel and args.graph:
        raise UserError("give either a graph file or --kernel, not both")
    if args.kernel:
        return _kernel_job(args, num)
    _reject_kernel_operand_options(args)
    if not args.graph:
        raise UserError("no graph: give GRAPH.json or --kernel NAME")
    try:
        g = load_graph(args.graph)
    except GraphError as exc:
        raise UserError(str(exc)) from None
    if args.data and Path(args.data).suffix == ".mtx":
        ops = _matrix_operands(g, _data_file(args), args.seed, num)
    elif args.data:
        path = _data_file(args)
        try:
            with np.load(path) as npz:
                ops = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, EOFError) as exc:
            raise UserError(f"--data {str(path)!r}: not a readable .npz of arrays: {exc}") from None
        missing = set(g.input_tensors()) - set(ops)
        if missing:
            raise UserError(f"data file {str(path)!r} has no array for tensor(s) "
                            f"{', '.join(map(repr, sorted(missing)))}; it has "
                            f"{', '.join(map(repr, sorted(ops))) or 'none'}")
    else:
        ops = drawn_operands(g, args.seed, operand_density(args))
    data = {}
    for t in g.input_tensors():
        spec = g.tensors[t]
        kind = getattr(getattr(ops[t], "dtype", None), "kind", "")
        if kind not in ("b", "i", "u", "f"):
            raise UserError(f"tensor {t!r}: data of type {getattr(ops[t], 'dtype', type(ops[t]))} is not "
                            "real numbers (integers, floats or booleans)")
        if tuple(ops[t].shape) != spec.operand_shape:
            raise UserError(f"tensor {t!r}: data shape {tuple(ops[t].shape)} does not match the graph's {spec.operand_shape}")
        if num.mode is Mode.INT or spec.block is not None:
            data[t] = spec.data(ops[t])
        else:
            try:
                data[t] = quantized_input(t, ops[t], spec.operand_shape, num, spec.fmt)
            except ValueError as exc:
                raise UserError(str(exc)) from None
    return GraphJob(g, data, None, f"graph {args.graph}", numerics=num, operands=ops,
                    program=graph_reference(g, f"graph {args.graph}"))


def parse_max_nnz(items: list[str] | None, graph: Graph) -> tuple[tuple[str, int], ...]:
    """The ``--max-nnz TENSOR=N`` options as ``HwConfig.max_nnz``: (tensor, capacity) pairs
    sorted by tensor (a tensor given twice is an error)."""
    caps: dict[str, int] = {}
    for item in items or []:
        tensor, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise UserError(f"--max-nnz {item!r}: expected TENSOR=N, e.g. B=512")
        if tensor in caps:
            raise UserError(f"--max-nnz {item}: tensor {tensor} is given twice; give it once")
        if tensor not in graph.tensors:
            raise UserError(
                f"--max-nnz {item!r}: graph {graph.name!r} has no tensor {tensor!r}; "
                f"tensors: {', '.join(graph.tensors)}"
            )
        if int(value) < 1:
            raise UserError(f"--max-nnz {item!r}: the capacity must be at least 1")
        if not sparse_in(graph, tensor):
            raise UserError(f"--max-nnz {item!r}: tensor {tensor!r} of graph {graph.name!r} is dense "
                            f"(its memories hold its dense size, {math.prod(graph.tensors[tensor].shape):,} values)")
        caps[tensor] = int(value)
    return tuple(sorted(caps.items()))


def sparse_in(graph: Graph, tensor: str) -> bool:
    """Whether ``tensor`` has a compressed level in ``graph`` (``--max-nnz`` sizes only those)."""
    return any(f is not Format.DENSE for f in graph.tensors[tensor].fmt.levels)


def table(rows: list[list], header: list[str]) -> str:
    cells = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_numerics_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--numerics", help="value arithmetic of the RTL: int (default for graphs and "
                   "kernels) or a fixed-point format such as q16.16 (default for --model); sets "
                   "the value width")


def with_numerics(cfg: HwConfig, text: str | None, model: bool) -> HwConfig:
    """``cfg`` with the ``--numerics`` of the command line (Q16.16 for a model-zoo graph when
    none is given; unchanged for a graph or kernel without one)."""
    text = text or ("q16.16" if model else None)
    if text is None:
        return cfg
    try:
        num = Numerics.parse(text)
    except ValueError as exc:
        raise UserError(f"--numerics {text}: {exc}") from None
    if num.mode is Mode.FLOAT:
        raise UserError(f"--numerics {text}: float is sw_sim only; the RTL needs int or fixed point")
    return replace(cfg, vw=num.width, numerics=num)


MAX_CW = 63  # the widest crd/ref word the Verilator harness and sw_sim carry


def add_width_args(p: argparse.ArgumentParser, *, vw_help: str = "value data width in bits (default 32)") -> None:
    """``--vw BITS`` and ``--cw BITS|auto`` (the crd/ref width; auto: what the graph needs)."""
    p.add_argument("--vw", type=int_range(2, 64), default=None, help=vw_help)
    p.add_argument("--cw", default="auto", metavar="BITS|auto",
                   help="crd/ref data width in bits (default auto: the narrowest that holds the "
                   "graph's coordinates and references at the --max-nnz capacities, at least 10)")


def resolve_widths(args: argparse.Namespace, graph: Graph,
                   max_nnz: tuple[tuple[str, int], ...] = (), numerics: Numerics | None = None) -> tuple[int, int]:
    """``(cw, vw)`` of ``--cw`` / ``--vw``: ``--cw auto`` is the narrowest crd/ref width
    ``graph`` needs at the ``max_nnz`` capacities; a narrower explicit width is refused naming
    the tensor that needs more.  Fixed-point ``numerics`` set the value width (a different
    ``--vw`` is refused)."""
    vw = getattr(args, "vw", None)
    if numerics is not None and numerics.mode is Mode.FIXED:
        if vw is not None and vw != numerics.width:
            raise UserError(f"--vw {vw} and --numerics {numerics}: the format's values are {numerics.width} "
                            f"bits wide; give one of them")
        vw = numerics.width
    vw = 32 if vw is None else vw
    if vw < 10:
        raise UserError(f"--vw {vw}: values need at least 10 bits (control words use bits 9..0)")
    need, tensor, top = crd_width_needed(graph, max_nnz)
    cw_arg = str(getattr(args, "cw", "auto"))
    if cw_arg == "auto":
        return need, vw
    if not cw_arg.isdigit():
        raise UserError(f"--cw {cw_arg!r}: give a width in bits or 'auto'")
    cw = int(cw_arg)
    if cw > MAX_CW:
        raise UserError(f"--cw {cw}: at most {MAX_CW} bits (the simulators' stream words are 64-bit integers)")
    if cw < need:
        raise UserError(f"--cw {cw}: too narrow for graph {graph.name!r}; tensor {tensor!r} has "
                        f"coordinates or references up to {top}, which need {need} bits")
    return cw, vw
