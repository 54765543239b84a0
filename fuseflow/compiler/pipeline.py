"""The compiler as a named, ordered pipeline of passes.

Each pass is a module of :mod:`fuseflow.compiler.passes` named after it, declaring a
:class:`~fuseflow.compiler.passes.base.Pass`: a name, a one-line description, the IR it reads and
the IR it writes, a run function, a text rendering of its output IR, its options and the passes
it needs.  :data:`PIPELINE` lists them in order::

    block   Program           -> Program            sparsity blocking (block={index: size})
    plan    Program           -> list[GroupPlan]    fusion regions -> graphs (region splits)
    fuse    GroupPlan         -> Group              fused einsum, views, POG, dataflow order
    table   Group             -> list[FusionTable]  one fusion table per group output
    locate  list[FusionTable] -> list[FusionTable]  dense levels under intersections located
    lower   list[FusionTable] -> samml.Graph        nodes from the tables' cells, fan-out
    skip    samml.Graph       -> samml.Graph        coordinate skipping (opt-in, skip=True)
    par     samml.Graph       -> samml.Graph        parallel lanes (par={index: factor})
    fifo    samml.Graph       -> samml.Graph        FIFO depths of reconvergent paths
    verify  samml.Graph       -> samml.Graph        Graph.verify()

``plan`` runs once per program; the others run per group (one graph each), group after group,
because a group reads the stored formats of the tensors earlier groups materialise.

No pass raises to ask for another schedule: a pass that cannot realise its input returns a
:class:`~fuseflow.compiler.program.Rejected` verdict (why not), and :func:`run_pipeline` raises
it.  The one choice between schedules, whether a fusion region is split where a reduced
intermediate is read under an addition, is decided up front by the ``plan`` pass: with factored
iteration it runs the analysis passes (``plan``, ``fuse``, ``table``) on the unsplit regions and
splits only when they reject the program with a reason a split resolves.

The compile options (:class:`Options`) are the passes' declared options, field for field;
:func:`pass_options` gives the declarations (for the schedule files, the command line and sweeps).
:func:`check_program` is the same check as a predicate (the model planner picks its fusion
granularity with it).

:func:`describe_pipeline` is the pass list as text; :func:`run_pipeline` with ``dump_after``
(or :func:`dump_ir`) gives the IR after any pass as text.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..ir.samml import Graph
from ..options import Kind, Option, Source
from .fused import Group
from .fusion import Fusion, GroupPlan
from .passes import block, fifo, fuse, locate, lower, par, plan, skip, table, verify
from .passes.base import Dump, GroupIR, Pass, ProgramIR, graph_text, run_passes
from .passes.lower import CompiledGroup, CompiledProgram
from .passes.par import check_par_used
from .passes.plan import ANALYSIS
from .program import Program
from .program_json import group_reference
from .table_records import FusionTable

__all__ = [
    "ANALYSIS",
    "PIPELINE",
    "GroupIR",
    "Options",
    "Pass",
    "ProgramIR",
    "UnknownPass",
    "check_par_used",
    "check_program",
    "compile_program",
    "describe_pipeline",
    "dump_ir",
    "graph_text",
    "lower_group",
    "pass_names",
    "pass_options",
    "run_pipeline",
]

PIPELINE: tuple[Pass, ...] = (block.PASS, plan.PASS, fuse.PASS, table.PASS, locate.PASS, lower.PASS,
                              skip.PASS, par.PASS, fifo.PASS, verify.PASS)


class UnknownPass(ValueError):
    """A pass name that is not in :data:`PIPELINE` (the message lists the names)."""


_BY_NAME = {p.name: p for p in PIPELINE}
_OPTIONS: dict[str, Option] = {o.name: o for p in PIPELINE for o in p.options}
assert len(_OPTIONS) == sum(len(p.options) for p in PIPELINE), "two passes declare one option name"
assert all(not p.per_group for p in PIPELINE[:2]) and all(p.per_group for p in PIPELINE[2:])
assert all(n in _BY_NAME and PIPELINE.index(_BY_NAME[n]) < PIPELINE.index(p)
           for p in PIPELINE for n in p.needs), "a pass needs a pass that does not run before it"


def _post_init(self) -> None:
    if isinstance(self.fusion, str):
        object.__setattr__(self, "fusion", Fusion(self.fusion))


Options = dataclasses.make_dataclass(
    "Options", [(o.name, Any, dataclasses.field(default=o.default)) for o in _OPTIONS.values()],
    namespace={"__post_init__": _post_init,
               "__doc__": "What :func:`compile_program` takes besides the program: one field per "
                          "option a pass of :data:`PIPELINE` declares (keywords only)."},
    frozen=True, kw_only=True)
Options.__module__ = __name__


def pass_options(source: Source | None = None) -> list[Option]:
    """The options the passes declare, in pipeline order (those that apply to ``source``)."""
    return [o for o in _OPTIONS.values() if source is None or source in o.sources]


def pass_names() -> list[str]:
    return [p.name for p in PIPELINE]


def _lookup(name: str) -> Pass:
    if name not in _BY_NAME:
        raise UnknownPass(f"unknown pass {name!r}; the passes are {', '.join(pass_names())}")
    return _BY_NAME[name]


def describe_pipeline() -> str:
    """The passes in order: number, name, input -> output IR, options, description (one line
    each)."""
    rows = [(str(k), p.name, f"{p.input_ir} -> {p.output_ir}",
             ", ".join(o.name for o in p.options) or "-", p.description)
            for k, p in enumerate(PIPELINE, 1)]
    head = ("#", "pass", "input -> output IR", "options", "description")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(4)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths)) + "  " + r[4] for r in (head, *rows)]
    return "\n".join(lines) + "\n"


def describe_options() -> str:
    """Every pass option, one line each: pass, name, type, range, default, flag, sources, help."""
    return "".join(f"{p.name:<7} {o.describe()}\n" for p in PIPELINE for o in p.options)


# ----------------------------------------------------------------------------- running
def run_pipeline(program: Program, options: Options | None = None, dump_after: str | None = None,
                 on_dump: Dump | None = None) -> CompiledProgram:
    """Compile ``program`` through :data:`PIPELINE`.  ``dump_after``: a pass name; after that
    pass ``on_dump(pass, graph, text)`` gets the text of its output IR, once per graph (once per
    program for a program pass).  A rejected program raises the rejecting pass's error
    (:class:`~fuseflow.compiler.program.FusionError`, ``LoweringError``, ...); an unknown pass
    name raises :class:`UnknownPass`."""
    if dump_after is not None:
        _lookup(dump_after)
    t0 = time.perf_counter()
    state = ProgramIR(program, options or Options())
    why = run_passes(state, PIPELINE, dump_after, on_dump)
    if why is not None:
        raise why.exception()
    groups = [CompiledGroup(g.group, g.tables, g.graph, {t.output.tensor: t.out_fmt for t in g.tables},
                            g.seconds, state.options.factored, g.parallel)
              for g in state.groups if g.group is not None and g.graph is not None]
    for cg in groups:
        _record_reference(cg, state)
    return CompiledProgram(state.program, state.options.fusion, groups, state.formats, state.permuted,
                           time.perf_counter() - t0, state.source)


def _record_reference(cg: CompiledGroup, state: ProgramIR) -> None:
    """The statements a graph computes, in its JSON (``Graph.reference``): a run of the graph
    file on any data is checked against them.  A permuted copy the graph reads stands for its
    source."""
    g = cg.graph
    aliases = {p.source: p.name for p in (*cg.group.permuted, *state.permuted)
               if p.name in g.tensors and p.source not in g.tensors}
    g.reference = group_reference(state.program, cg.group.statements, g.output_tensors(), aliases)


def dump_ir(program: Program, pass_name: str, options: Options | None = None) -> str:
    """The IR after pass ``pass_name`` as text: for a group pass one section per graph, each
    headed ``== <graph> after <pass>`` (a blank line between sections)."""
    _lookup(pass_name)
    parts: list[str] = []
    run_pipeline(program, options, pass_name,
                 lambda p, name, text: parts.append(f"== {name} after {p}\n{text}"))
    return "\n".join(parts)


def check_program(program: Program, options: Options | None = None) -> str | None:
    """None if ``program`` can be compiled with ``options``, else why not: the analysis passes
    (plan, fuse, table) as a predicate, nothing generated."""
    why = run_passes(ProgramIR(program, options or Options()), ANALYSIS)
    return None if why is None else why.reason


def _options(values: Mapping[str, Any]) -> Options:
    """:class:`Options` of ``values`` (declared names only).  A choice is checked by its
    declaration here; other values are their pass's to reject (with the error it names)."""
    unknown = sorted(set(values) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"unknown compiler option {', '.join(unknown)} (the options: "
                        f"{', '.join(_OPTIONS)})")
    checked = dict(values)
    for k, v in values.items():
        opt = _OPTIONS[k]
        if opt.kind is Kind.CHOICE:
            opt.check(v, k)
        elif opt.kind is Kind.INDEX_MAP:  # an {index: n} map is a dict, or None when empty
            checked[k] = dict(v) if v else None
    return Options(**checked)


def compile_program(program: Program, fusion: Fusion | str = Fusion.FULL,
                    orders: Mapping[str, str | Sequence[str]] | None = None,
                    fused_orders: Mapping[int, Sequence[str]] | None = None,
                    **options: Any) -> CompiledProgram:
    """Fuse and lower ``program``: one verified SAMML graph per group, in program order.

    ``orders`` maps a computed tensor to a dataflow order of its statement (its own letters);
    ``fused_orders`` maps a group number to a full fused order (checked against the POG).
    ``options`` are the other options the passes declare (:func:`pass_options`, ``fuseflow-hw
    compile --list-passes``):

    ``factored`` (default) lowers every reduced intermediate that qualifies with factored
    iteration (its own pipeline; its reducer's coordinates drive the consumer's levels and its
    values ride on the joiner's / repeat's value-typed reference ports); the others, and all of
    them with ``factored=False``, are inlined into one iteration space per output.
    ``locate`` (default) iterates the sparse operands of an intersection and locates into its
    dense levels (:mod:`.passes.locate`); ``locate=False`` scans and intersects them (for
    comparison).  ``skip`` lets every intersection of compressed fibres skip ahead by search
    (:func:`fuseflow.compiler.passes.skip.enable_skipping`; off by default: it costs scanner
    logic).  ``spacc_buffers``: 2 (default) double-buffers the sparse accumulators (a fiber's
    flush overlaps the next fiber's accumulation), 1 keeps one bank (half the sum words).
    ``par`` maps index variables to parallelization factors (:mod:`.passes.par`): each graph
    that iterates an index gets that many lanes below it, outer indices first (nested); a
    reduced index may be named as its statement wrote it.  ``block`` ({index: size}) cuts the
    dimension the index iterates into blocks whose entries are vector lanes (``lanes`` per
    vector, default the block size): :mod:`.passes.block`."""
    opts = _options({"fusion": Fusion(fusion) if isinstance(fusion, str) else fusion,
                     "orders": orders, "fused_orders": fused_orders, **options})
    cp = run_pipeline(program, opts)
    check_par_used(opts.par, [(g.group, g.graph) for g in cp.groups])
    return cp


def lower_group(group: Group, factored: bool = True,
                locate: bool = True) -> tuple[list[FusionTable], Graph]:
    """Tables and verified graph of one fused group: the pipeline's group passes after
    ``fuse``."""
    state = ProgramIR(Program(group.name), Options(factored=factored, locate=locate),
                      split_adds=False)
    g = GroupIR(0, GroupPlan(group.name, [], []), group)
    for p in PIPELINE[PIPELINE.index(table.PASS):]:
        why = p.run(state, g)
        if why is not None:
            raise why.exception()
    assert g.graph is not None
    return g.tables, g.graph
