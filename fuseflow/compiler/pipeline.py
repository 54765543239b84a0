"""The compiler as a named, ordered pipeline of passes.

Each :class:`Pass` has a name, a one-line description, the IR it reads and the IR it writes, a
run function and a text rendering of its output IR.  :data:`PIPELINE` lists them in order::

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
:func:`check_program` is the same check as a predicate (the model planner picks its fusion
granularity with it).

:func:`describe_pipeline` is the pass list as text; :func:`run_pipeline` with ``dump_after``
(or :func:`dump_ir`) gives the IR after any pass as text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .passes.par import ParallelError, ParallelRegion, parallelize
from .passes.fifo import set_accumulator_buffers, size_fifos
from ..ir.samml import Graph
from .passes.skip import enable_skipping
from ..ir.tensor import TensorFormat
from .passes.block import block_program
from .emit import CompiledGroup, CompiledProgram, emit_graph
from .fusion import Fusion, Group, GroupPlan, PermutedCopy, fuse, order_problem, plan_groups
from .passes.locate import locate_dense_levels, nonunique_join_problem
from .program import FusionError, LoweringError, Program, ProgramError, Rejected
from .table import FusionTable, table_or_rejection

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
    "run_pipeline",
]


class UnknownPass(ValueError):
    """A pass name that is not in :data:`PIPELINE` (the message lists the names)."""


@dataclass(frozen=True)
class Options:
    """What :func:`compile_program` takes besides the program (see there)."""

    fusion: Fusion = Fusion.FULL
    orders: Mapping[str, str | Sequence[str]] | None = None
    fused_orders: Mapping[int, Sequence[str]] | None = None
    factored: bool = True
    locate: bool = True
    skip: bool = False
    spacc_buffers: int = 2
    par: Mapping[str, int] | None = None
    block: Mapping[str, int] | None = None  # {index: block size}: the block pass
    lanes: int | None = None  # vector lanes of the blocked dimension (default: the block size)


@dataclass
class GroupIR:
    """One graph's IR as the group passes rewrite it: each pass fills the next field."""

    index: int
    plan: GroupPlan
    group: Group | None = None
    tables: list[FusionTable] = field(default_factory=list)
    graph: Graph | None = None
    seconds: float = 0.0
    parallel: list[ParallelRegion] = field(default_factory=list)


@dataclass
class ProgramIR:
    """The whole compilation: the program, its options, the plan pass's decision and the groups.
    ``formats``: the stored format of every tensor a graph so far reads or writes."""

    program: Program
    options: Options
    source: Program | None = None  # the program as written, when the block pass rewrote it
    split_adds: bool | None = None  # None: the plan pass decides
    split_reason: str = ""
    groups: list[GroupIR] = field(default_factory=list)
    formats: dict[str, TensorFormat] = field(default_factory=dict)
    permuted: list[PermutedCopy] = field(default_factory=list)


Run = Callable[[ProgramIR, GroupIR], Rejected | None]
Text = Callable[[ProgramIR, GroupIR], str]


@dataclass(frozen=True)
class Pass:
    """One compiler pass: ``run`` rewrites the IR in place and returns None, or the reason its
    input cannot be realised; ``text`` renders its output IR.  A program pass (``per_group``
    false) runs once, with the first group as a placeholder argument; the others once per
    group."""

    name: str
    description: str
    input_ir: str
    output_ir: str
    run: Run
    text: Text
    per_group: bool = True


# ----------------------------------------------------------------------------- block
def _block(state: ProgramIR, _: GroupIR) -> Rejected | None:
    opts = state.options
    if not opts.block or state.source is not None:
        return None
    try:
        blocked = block_program(state.program, opts.block, opts.lanes)
    except ProgramError as exc:
        return Rejected(str(exc), ProgramError)
    state.source, state.program = state.program, blocked
    return None


def _block_text(state: ProgramIR, _: GroupIR) -> str:
    if state.source is None:
        return f"program {state.program.name}: nothing blocked\n"
    lines = [(f"program {state.program.name}: blocked {dict(state.options.block or {})}"
             f" (lanes {state.options.lanes or next(iter((state.options.block or {}).values()))})")]
    for name, d in state.program.decls.items():
        if d.vector is not None:
            lines.append(f"  {name}: mode {d.vector.mode} in blocks of {d.vector.block}, vectors of "
                         f"{d.vector.lanes}; iterated shape {d.shape}")
    lines += [f"  {st}" for st in state.program.statements]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- plan
def _plan(state: ProgramIR, _: GroupIR) -> Rejected | None:
    opts = state.options
    if state.split_adds is None:
        why = _split_check(state)
        if why is not None and not why.split:
            return why
        state.split_adds = why is not None
        state.split_reason = why.reason if why is not None else ""
    program = state.program
    state.formats = {n: d.fmt for n, d in program.decls.items()
                     if d.fmt is not None and n not in {s.out for s in program.statements}}
    plans = plan_groups(program, opts.fusion, opts.orders, state.split_adds)
    state.groups = [GroupIR(k, p) for k, p in enumerate(plans)]
    return None


def _split_check(state: ProgramIR) -> Rejected | None:
    """Whether the fusion regions must be split where a reduced intermediate is read under an
    addition: always without factored iteration (one iteration space per output needs a sum of
    products); with it, only if the analysis passes reject the unsplit regions (the verdict,
    with ``split`` set when a split resolves it)."""
    if not state.options.factored:
        return Rejected("factored iteration is off: a reduction under an addition needs its own "
                        "graph", split=True)
    trial = ProgramIR(state.program, state.options, state.source, split_adds=False)
    return _run(trial, ANALYSIS)


def _plan_text(state: ProgramIR, _: GroupIR) -> str:
    split = f"yes ({state.split_reason})" if state.split_adds else "no"
    lowering = "factored iteration" if state.options.factored else "one iteration space"
    lines = [f"program {state.program.name}: fusion {state.options.fusion.value}, {lowering}",
             f"region split under additions: {split}"]
    for g in state.groups:
        lines.append(f"graph {g.plan.name}: " + "; ".join(s.text for s in g.plan.part))
        lines.append("  materialises " + ", ".join(s.out for s in g.plan.outs))
        if g.plan.note:
            lines.append(f"  note: {g.plan.note}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- fuse
def _fuse(state: ProgramIR, g: GroupIR) -> Rejected | None:
    group = fuse(state.program, g.plan, state.formats)
    if isinstance(group, Rejected):
        return group
    fused_orders = state.options.fused_orders
    if fused_orders and g.index in fused_orders:
        why = order_problem(group, fused_orders[g.index])
        if why:
            return Rejected(why, FusionError)
        group.order = tuple(fused_orders[g.index])
    g.group = group
    state.permuted += group.permuted
    return None


def _fuse_text(_: ProgramIR, g: GroupIR) -> str:
    group = g.group
    assert group is not None
    capped = "+ (capped)" if group.orders_capped else ""
    lines = ["fused einsum:", _indent(group.fused_einsum()),
             "partial order graph:", _indent(group.pog_text()),
             f"valid dataflow orders: {group.orders_count}{capped} ({group.lowerable_count} lowerable)",
             f"order: {' -> '.join(group.order)}"]
    lines += [f"permuted copy: {p.name} = {p.source} stored as {p.fmt} ({p.reason})"
              for p in group.permuted]
    lines += [f"note: {n}" for n in group.notes]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- table
def _table(state: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.group is not None
    for o in g.group.outputs:
        t = table_or_rejection(g.group, o, state.options.factored)
        if isinstance(t, Rejected):
            return t
        g.tables.append(t)
    state.formats.update({t.output.tensor: t.out_fmt for t in g.tables})
    for v in g.group.views.values():
        state.formats.setdefault(v.tensor, v.fmt)
    return None


def _table_text(_: ProgramIR, g: GroupIR) -> str:
    return "".join(f"fusion table for {t.output.tensor} (stored as {t.out_fmt}):\n{t.render()}\n"
                   for t in g.tables)


def _locate(state: ProgramIR, g: GroupIR) -> Rejected | None:
    if state.options.locate:
        for t in g.tables:
            locate_dense_levels(t)
    for t in g.tables:  # COO: a non-unique level meets located dense levels only
        why = nonunique_join_problem(t, state.options.locate)
        if why:
            return Rejected(f"graph {g.plan.name}: {why}", LoweringError)
    return None


# ----------------------------------------------------------------------------- graph passes
def _lower(state: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.group is not None
    g.graph = emit_graph(g.group, g.tables)
    set_accumulator_buffers(g.graph, state.options.spacc_buffers)
    return None


def _skip(state: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.graph is not None
    if state.options.skip:
        enable_skipping(g.graph, in_place=True)
    return None


def _par(state: ProgramIR, g: GroupIR) -> Rejected | None:
    """Parallel lanes for the ``par`` indices this graph iterates (a reduced index may be named
    as its statement wrote it, when that names one fresh index of the graph).  A key
    ``GRAPH:INDEX`` applies to that graph only and overrides a plain ``INDEX``."""
    assert g.graph is not None and g.group is not None
    par = dict(state.options.par or {})
    if not par:
        return None
    mine = {}
    for key, factor in sorted(par.items(), key=lambda kv: ":" in kv[0]):
        graph, _, index = key.rpartition(":")
        fused = _fused_index(g.group, index)
        if graph in ("", g.graph.name) and fused in g.graph.indices:
            mine[fused] = factor
    try:
        g.parallel = parallelize(g.graph, mine, resize=False)
    except ParallelError as exc:
        return Rejected(f"graph {g.graph.name}: {exc}", FusionError)
    return None


def check_par_used(par: Mapping[str, int] | None, groups: Sequence[tuple[Group, Graph]]) -> None:
    """:class:`FusionError` if an index of ``par`` is iterated by none of the graphs (for a key
    ``GRAPH:INDEX``: by graph GRAPH)."""
    def used(key: str) -> bool:
        name, _, index = key.rpartition(":")
        return any(_fused_index(grp, index) in graph.indices for grp, graph in groups
                   if name in ("", graph.name))

    unused = [i for i in (par or {}) if not used(i)]
    if unused:
        have = sorted({i for _, graph in groups for i in graph.indices})
        raise FusionError(f"par: no graph iterates index {', '.join(map(repr, unused))} (the "
                          f"graphs iterate {', '.join(have) or 'nothing'}; see --explain)")


def _fused_index(group: Group, index: str) -> str:
    """``index`` as the graph names it: itself, or the one fresh index (``u0``, …) that stands
    for the reduced index ``index`` of a statement."""
    fresh = [u for u, origin in group.origins.items() if origin.startswith(f"index {index} of ")]
    return fresh[0] if len(fresh) == 1 else index


def _size_fifos(_: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.graph is not None
    size_fifos(g.graph)
    return None


def _verify(_: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.graph is not None
    g.graph.verify()
    return None


def _graph_text(_: ProgramIR, g: GroupIR) -> str:
    assert g.graph is not None
    return graph_text(g.graph)


def graph_text(g: Graph) -> str:
    """A graph as text: tensors, nodes with their parameters, edges with FIFO depths, discarded
    ports (the text form of the ``lower``, ``fifo`` and ``verify`` passes' output)."""
    lines = [f"graph {g.name}"]
    for name, t in g.tensors.items():
        lines.append(f"tensor {name} {t.role.value} {list(t.shape)} {t.fmt}")
    for n in g.nodes.values():
        params = " ".join(f"{k}={v.value if hasattr(v, 'value') else v}" for k, v in n.params.items())
        lines.append(f"node {n.name} {n.kind.value} {params}".rstrip())
    for e in g.edges:
        lines.append(f"edge {e}" + (f" depth={e.depth}" if e.depth is not None else ""))
    for d in sorted(map(str, g.discards)):
        lines.append(f"discard {d}")
    return "\n".join(lines) + "\n"


def _indent(text: str) -> str:
    return "\n".join("  " + ln for ln in text.splitlines())


PIPELINE: tuple[Pass, ...] = (
    Pass("block", "sparsity blocking: one dimension cut into blocks whose entries become vector "
         "lanes (block={index: size}; nothing otherwise)", "Program", "Program", _block,
         _block_text, per_group=False),
    Pass("plan", "split the program into fusion regions and those into graphs (region splits "
         "decided up front)", "Program", "list[GroupPlan]", _plan, _plan_text, per_group=False),
    Pass("fuse", "cross-expression fusion: fresh indices, inlining, tensor views, partial order "
         "graph, permuted copies, dataflow order", "GroupPlan", "Group", _fuse, _fuse_text),
    Pass("table", "one fusion table per group output (factoring choice, cells, merges, "
         "reducers, stored format)", "Group", "list[FusionTable]", _table, _table_text),
    Pass("locate", "iterate the sparse operands and locate into dense levels under "
         "intersections (off with locate=False)", "list[FusionTable]", "list[FusionTable]",
         _locate, _table_text),
    Pass("lower", "SAMML nodes from the tables' cells, broadcasts for fan-out, level and value "
         "writers, accumulator buffering", "list[FusionTable]", "samml.Graph", _lower, _graph_text),
    Pass("skip", "let intersections of compressed fibres skip ahead by search (opt-in: "
         "skip=True / --skip)", "samml.Graph", "samml.Graph", _skip, _graph_text),
    Pass("par", "parallel lanes: split an index's coordinates across lanes, copy the subgraph "
         "below it, merge the lanes back (par={index: factor})", "samml.Graph", "samml.Graph",
         _par, _graph_text),
    Pass("fifo", "deepen the FIFOs of short paths that reconverge with longer ones",
         "samml.Graph", "samml.Graph", _size_fifos, _graph_text),
    Pass("verify", "check the graph (ports, stream types, parameters)", "samml.Graph",
         "samml.Graph", _verify, _graph_text),
)
_BY_NAME = {p.name: p for p in PIPELINE}
ANALYSIS: tuple[Pass, ...] = tuple(_BY_NAME[n] for n in ("block", "plan", "fuse", "table"))
assert all(not p.per_group for p in PIPELINE[:2]) and all(p.per_group for p in PIPELINE[2:])


def pass_names() -> list[str]:
    return [p.name for p in PIPELINE]


def _lookup(name: str) -> Pass:
    if name not in _BY_NAME:
        raise UnknownPass(f"unknown pass {name!r}; the passes are {', '.join(pass_names())}")
    return _BY_NAME[name]


def describe_pipeline() -> str:
    """The passes in order: number, name, input -> output IR, description (one line each)."""
    rows = [(str(k), p.name, f"{p.input_ir} -> {p.output_ir}", p.description)
            for k, p in enumerate(PIPELINE, 1)]
    head = ("#", "pass", "input -> output IR", "description")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(3)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths)) + "  " + r[3] for r in (head, *rows)]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- running
Dump = Callable[[str, str, str], None]  # (pass name, graph name or program name, text)


def _run(state: ProgramIR, passes: Sequence[Pass], dump_after: str | None = None,
         on_dump: Dump | None = None) -> Rejected | None:
    """Run ``passes`` (program passes first, then the group passes group by group); None, or
    the first pass's rejection."""
    def after(p: Pass, g: GroupIR, name: str) -> None:
        if p.name == dump_after and on_dump is not None:
            on_dump(p.name, name, p.text(state, g))

    placeholder = GroupIR(-1, GroupPlan(state.program.name, [], []))
    for p in (p for p in passes if not p.per_group):
        why = p.run(state, placeholder)
        if why is not None:
            return why
        after(p, placeholder, state.program.name)
    group_passes = [p for p in passes if p.per_group]
    for g in state.groups:
        t0 = time.perf_counter()
        for p in group_passes:
            why = p.run(state, g)
            if why is not None:
                return why
            after(p, g, g.plan.name)
        g.seconds = time.perf_counter() - t0
    return None


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
    why = _run(state, PIPELINE, dump_after, on_dump)
    if why is not None:
        raise why.exception()
    groups = [CompiledGroup(g.group, g.tables, g.graph, {t.output.tensor: t.out_fmt for t in g.tables},
                            g.seconds, state.options.factored, g.parallel)
              for g in state.groups if g.group is not None and g.graph is not None]
    return CompiledProgram(state.program, state.options.fusion, groups, state.formats, state.permuted,
                           time.perf_counter() - t0, state.source)


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
    why = _run(ProgramIR(program, options or Options()), ANALYSIS)
    return None if why is None else why.reason


def _options(fusion: Fusion | str, orders, fused_orders, factored: bool,
             locate: bool = True, skip: bool = False, spacc_buffers: int = 2,
             par: Mapping[str, int] | None = None, block: Mapping[str, int] | None = None,
             lanes: int | None = None) -> Options:
    if spacc_buffers not in (1, 2):
        raise ValueError(f"spacc_buffers={spacc_buffers}: must be 1 or 2")
    return Options(Fusion(fusion) if isinstance(fusion, str) else fusion, orders, fused_orders,
                   factored, locate, skip, spacc_buffers, dict(par) if par else None,
                   dict(block) if block else None, lanes)


def compile_program(program: Program, fusion: Fusion | str = Fusion.FULL,
                    orders: Mapping[str, str | Sequence[str]] | None = None,
                    fused_orders: Mapping[int, Sequence[str]] | None = None,
                    factored: bool = True, locate: bool = True,
                    skip: bool = False, spacc_buffers: int = 2,
                    par: Mapping[str, int] | None = None, block: Mapping[str, int] | None = None,
                    lanes: int | None = None) -> CompiledProgram:
    """Fuse and lower ``program``: one verified SAMML graph per group, in program order.

    ``orders`` maps a computed tensor to a dataflow order of its statement (its own letters);
    ``fused_orders`` maps a group number to a full fused order (checked against the POG).
    ``factored`` (default) lowers every reduced intermediate that qualifies with factored
    iteration (its own pipeline; its reducer's coordinates drive the consumer's levels and its
    values ride on the joiner's / repeat's value-typed reference ports); the others, and all of
    them with ``factored=False``, are inlined into one iteration space per output.
    ``locate`` (default) iterates the sparse operands of an intersection and locates into its
    dense levels (:mod:`.locate`); ``locate=False`` scans and intersects them (for comparison).
    ``skip`` lets every intersection of compressed fibres skip ahead by search
    (:func:`fuseflow.compiler.passes.skip.enable_skipping`; off by default: it costs scanner logic).
    ``spacc_buffers``: 2 (default) double-buffers the sparse accumulators (a fiber's flush
    overlaps the next fiber's accumulation), 1 keeps one bank (half the sum words).
    ``par`` maps index variables to parallelization factors (:mod:`fuseflow.compiler.passes.par`): each
    graph that iterates an index gets that many lanes below it, outer indices first (nested);
    a reduced index may be named as its statement wrote it.
    ``block`` ({index: size}) cuts the dimension the index iterates into blocks whose entries
    are vector lanes (``lanes`` per vector, default the block size): :mod:`.blocking`."""
    cp = run_pipeline(program, _options(fusion, orders, fused_orders, factored, locate, skip,
                                        spacc_buffers, par, block, lanes))
    check_par_used(par, [(g.group, g.graph) for g in cp.groups])
    return cp


def lower_group(group: Group, factored: bool = True,
                locate: bool = True) -> tuple[list[FusionTable], Graph]:
    """Tables and verified graph of one fused group: the pipeline's group passes after
    ``fuse``."""
    state = ProgramIR(Program(group.name), Options(factored=factored, locate=locate),
                      split_adds=False)
    g = GroupIR(0, GroupPlan(group.name, [], []), group)
    for p in PIPELINE[PIPELINE.index(_BY_NAME["table"]):]:
        why = p.run(state, g)
        if why is not None:
            raise why.exception()
    assert g.graph is not None
    return g.tables, g.graph
