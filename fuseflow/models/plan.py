"""Model IR -> a sequence of steps (compiled Einsum programs, SAMML ML subgraphs, host reshapes)
-> sw_sim.

:func:`compile_model` cuts the traced model (:class:`~fuseflow.models.frontend.ModelIR`) into
steps, in model order:

* **compiler steps** — maximal runs of Einsum-expressible nodes (einsum, add / sub / mul, attention
  masks as a product with the 0/1 keep-mask, and — when the Program API has them — relu, gelu and
  scalar scale / shift) become one :class:`fuseflow.compiler.Program` compiled with the requested
  fusion: ``unfused`` (one graph per statement), ``partial`` (one fusion region per model region:
  a layer of the graph models and the SAE, a decoder block of GPT, further cut by the barriers
  below) or ``full`` (one region for the whole run).  If the compiler cannot lower a region, the
  run falls back to the next finer fusion and :attr:`CompiledModel.notes` says why;
* **ML steps** — softmax, layernorm and max over the last dimension (and relu / gelu / scalar ops
  when the Program API lacks them) are SAMML subgraphs built with :mod:`fuseflow.compiler.lowering`
  (scan → value load → ops → write).  They are fusion barriers.  Consecutive ML ops on one
  tensor form one subgraph unless the fusion is ``unfused``;
* **host steps** — reshapes, and transposes that read a reshaped / materialised tensor or feed a
  reshape: data movement on the host (a fusion barrier, as in the paper).

Masks: ``mask(M, s)`` is the product ``M ⊙ s`` with the 0/1 keep-mask ``M`` (compressed); its
result stores exactly ``M``'s entries, and the softmax subgraph normalises over the stored
entries of a row — the masked softmax (entries outside the mask are ``-inf``, i.e. 0 after
softmax).  A float scale between the scores and the mask is moved behind the mask (it
commutes) so that the masked product fuses with the score einsum (SDDMM).

:func:`run_model` runs every step in sw_sim (``numerics="float"`` by default) and sums the
cycles of all graphs; host steps cost no cycles.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from fuseflow.compiler import (
    Fusion,
    LoweringError,
    Options,
    Program,
    check_par_used,
    check_program,
    einsum,
    pass_options,
    run_pipeline,
)
from fuseflow.compiler import program as program_api
from fuseflow.compiler.lowering import reduce_rows, row_layernorm, row_softmax, unary
from fuseflow.compiler.program import UnOp
from fuseflow.ir.builder import GraphBuilder
from fuseflow.ir.samml import AluOp, ReduceOp, Role
from fuseflow.ir.tensor import Format, TensorFormat

from .ir import MKind, MNode, ModelIR
from .run import quantized_input, run_model, stored_words
from .steps import (
    _COMPILER,
    _ELEMENTWISE,
    _ML,
    FUSIONS,
    CompiledModel,
    CompilerStep,
    ConvertStep,
    HostOpStep,
    HostStep,
    MLStep,
    ModelRun,
    Step,
    _input_format,
    _masked_format,
    compiler_has_row_functions,
    compiler_has_unary,
    converted_name,
)

__all__ = ["FUSIONS", "CompiledModel", "CompilerStep", "ConvertStep", "HostOpStep", "HostStep", "MLStep",
           "ModelRun", "compile_model", "converted_name", "quantized_input", "stored_words",
           "run_model"]


# ----------------------------------------------------------------------------- planning
def _commute_scales(ir: ModelIR) -> list[MNode]:
    """Move a float scale that feeds only a mask behind the mask (so the mask fuses with the
    score einsum); returns the node list in a valid order."""
    nodes = list(ir.nodes)
    by = {n.name: n for n in nodes}
    users: dict[str, int] = {}
    for n in nodes:
        for a in n.args:
            users[a] = users.get(a, 0) + 1
    out: list[MNode] = []
    for n in nodes:
        if n.kind is MKind.MASK:
            m, x = n.args
            sc = by[x]
            if sc.kind is MKind.SCALE and users.get(x, 0) == 1 and x not in ir.outputs:
                out.remove(sc)
                masked = MNode(n.name + "_m", MKind.MASK, (m, sc.args[0]), n.shape, n.region, n.source)
                scaled = MNode(n.name, MKind.SCALE, (masked.name,), n.shape, n.region, sc.source,
                               dict(sc.attrs, masked=True))
                out += [masked, scaled]
                continue
        out.append(n)
    return out


def _expand_layernorms(nodes: list[MNode], consts: dict[str, np.ndarray]) -> list[MNode]:
    """layernorm over the last dimension (n) as Einsum statements the compiler fuses:
    ``mu = (1/n)·Σ_j x``, ``xc = x - mu ⊗ 1``, ``var = (1/n)·Σ_j xc·xc``,
    ``y = xc · rsqrt(var + eps)``; ``1`` is a ones vector input."""
    out: list[MNode] = []
    for n in nodes:
        if n.kind is not MKind.LAYERNORM:
            out.append(n)
            continue
        x = n.args[0]
        nd = len(n.shape)
        width = n.shape[-1]
        lead = "abcdefgh"[: nd - 1]
        ones = f"ones_{width}"
        if ones not in consts:
            consts[ones] = np.ones(width)
            out.append(MNode(ones, MKind.INPUT, (), (width,), "", "layernorm lowering"))
        row = n.shape[:-1]

        def mk(suffix: str, kind: MKind, args: tuple[str, ...], shape, ln: MNode = n, **attrs) -> MNode:
            node = MNode(f"{ln.name}_{suffix}", kind, args, tuple(shape), ln.region, ln.source, attrs)
            out.append(node)
            return node

        s = mk("sum", MKind.EINSUM, (x,), row, spec=f"{lead}z->{lead}")
        mu = mk("mean", MKind.SCALE, (s.name,), row, c=1.0 / width)
        mb = mk("meanb", MKind.EINSUM, (mu.name, ones), n.shape, spec=f"{lead},z->{lead}z")
        xc = mk("xc", MKind.SUB, (x, mb.name), n.shape)
        sq = mk("sq", MKind.MUL, (xc.name, xc.name), n.shape)
        vs = mk("vsum", MKind.EINSUM, (sq.name,), row, spec=f"{lead}z->{lead}")
        var = mk("var", MKind.SCALE, (vs.name,), row, c=1.0 / width)
        ve = mk("veps", MKind.ADD_SCALAR, (var.name,), row, c=float(n.attrs["eps"]))
        inv = mk("inv", MKind.UNARY, (ve.name,), row, op="rsqrt")
        out.append(MNode(n.name, MKind.EINSUM, (xc.name, inv.name), n.shape, n.region, n.source,
                         {"spec": f"{lead}z,{lead}->{lead}z"}))
    return out


# the compiler options the planner chooses itself, per step
_PLANNED = frozenset({"fusion", "orders", "fused_orders", "factored"})


def compile_model(ir: ModelIR, fusion: str = "partial", factored: bool | None = None,
                  elementwise_in_compiler: bool | None = None,
                  layernorm_in_compiler: bool = False,
                  row_functions_in_compiler: bool | None = None, strict: bool = False,
                  **options: Any) -> CompiledModel:
    """Cut ``ir`` into steps and compile them (see the module docstring).

    ``options``: the compiler's pass options (:func:`fuseflow.compiler.pipeline.pass_options`)
    for every compiled step, e.g. ``locate`` (default on: the compiler locates into dense levels
    under intersections; off: it scans and intersects them, for comparison), ``skip``
    (intersections of compressed fibres skip ahead), ``spacc_buffers`` (2 double-buffers the
    sparse accumulators, 1 keeps one bank of sums), ``par`` (parallel lanes per index).

    ``elementwise_in_compiler``: relu / gelu / scalar ops become Program statements (fused by
    the compiler) instead of ML subgraphs; default: when the Program API has them.
    ``row_functions_in_compiler`` (default: when the Program API has them): layernorm and the
    softmax of a masked tensor become the compiler's row functions, fused into the graph that
    computes their operand (:func:`fuseflow.compiler.softmax`); off: ML subgraphs, fusion
    barriers.  ``layernorm_in_compiler``: layernorm as plain Einsum statements instead
    (:func:`_expand_layernorms`; slower: GPT 16x16, partial: 214 k vs 151 k cycles with ML
    subgraphs).

    Compiler nodes are gathered across host steps and ML subgraphs where the data allow it
    (:func:`_gather_compiler_runs`): the query, key and value projections of an attention block
    become one program even though each is followed by a reshape.

    Graph breaks: a host node of the frontend (an op without a dataflow form), and a node the
    compiler cannot lower at any fusion even alone, run on the host (:class:`HostOpStep`); a
    run the compiler rejects only for an operand's format gets that operand converted on the
    host first (:class:`ConvertStep`, CSC → CSR, DCSR → CSR, COO → CSR …).  Both are in
    :meth:`CompiledModel.explain`; ``strict`` makes a graph break an error naming the op, its
    source line and why."""
    if fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {fusion!r}: use one of {', '.join(FUSIONS)}")
    t0 = time.perf_counter()
    elementwise_in_compiler = compiler_has_unary() if elementwise_in_compiler is None else elementwise_in_compiler
    row_functions_in_compiler = (compiler_has_row_functions() if row_functions_in_compiler is None
                                 else row_functions_in_compiler)
    in_compiler = _COMPILER | (_ELEMENTWISE if elementwise_in_compiler else set())
    nodes = _commute_scales(ir)
    consts: dict[str, np.ndarray] = {}
    if elementwise_in_compiler and layernorm_in_compiler:
        nodes = _expand_layernorms(nodes, consts)
    masked = {n.name for n in nodes if n.kind is MKind.MASK or n.attrs.get("masked")}
    row_fns = _row_function_nodes(nodes, masked) if row_functions_in_compiler and elementwise_in_compiler else set()

    def compiles(n: MNode) -> bool:
        return n.kind in in_compiler or n.name in row_fns

    nodes = _gather_compiler_runs(nodes, compiles)
    later_use: dict[str, int] = {}
    for k, n in enumerate(nodes):
        for a in n.args:
            later_use[a] = k
    formats = _input_formats(ir, nodes, consts)  # format of every materialised tensor
    steps: list[Step] = []
    notes: list[str] = []
    pending: list[MNode] = []
    shapes = {n.name: n.shape for n in nodes}

    extra = dict(options)
    unknown = sorted((set(extra) - {o.name for o in pass_options()}) | (set(extra) & _PLANNED))
    if unknown:
        raise TypeError(f"compile_model: {', '.join(unknown)}: not a compiler option it takes")

    def flush(upto: int) -> None:
        if not pending:
            return
        new = _compile_or_break(ir, list(pending), formats, shapes, fusion, (factored, extra),
                                lambda name: later_use.get(name, -1) >= upto or name in ir.outputs, notes)
        steps.extend(new)
        pending.clear()

    by = {n.name: n for n in nodes}
    for k, n in enumerate(nodes):
        if n.kind is MKind.INPUT:
            continue
        if _is_permute(n) and (n.args[0] not in {m.name for m in pending}
                               or all(by[u].kind is MKind.RESHAPE for u in _users(nodes, n.name))):
            flush(k)
            formats[n.name] = _permuted_format(n, formats.get(n.args[0]), n.args[0] in ir.formats, notes)
            steps.append(HostStep(n, formats[n.name]))
            continue
        if compiles(n):
            pending.append(n)
            continue
        flush(k)
        if n.kind in (MKind.RESHAPE, MKind.HOST):
            steps.append(_barrier_step(n, formats))
            continue
        assert n.kind in _ML, n.kind
        chained = fusion != "unfused" and _chains_onto(steps, n, later_use.get(n.args[0], -1) == k, ir)
        _add_ml_step(steps, n, chained, formats, shapes, masked)
    flush(len(nodes))
    if strict:
        _refuse_breaks(ir, steps)
    check_par_used(extra.get("par"), [(g.group, g.graph) for s in steps if isinstance(s, CompilerStep)
                         for g in s.compiled.groups])
    return CompiledModel(ir, fusion, steps, time.perf_counter() - t0, notes, consts)


def _row_function_nodes(nodes: list[MNode], masked: set[str]) -> set[str]:
    """The nodes that become the compiler's row functions: every layernorm, and the softmax of
    a masked tensor (a softmax of an unmasked one counts every coordinate of its row, as
    PyTorch does, which the row function guarantees only for fully iterated rows: it stays an
    ML subgraph)."""
    return {n.name for n in nodes if n.kind is MKind.LAYERNORM
            or (n.kind is MKind.SOFTMAX and n.args[0] in masked)}


def _gather_compiler_runs(nodes: list[MNode], compiles) -> list[MNode]:
    """``nodes`` in an order where compiler nodes form longer runs: a list schedule over the
    nodes whose operands are all computed, taken in model order.  While a run of compiler
    nodes is open it is extended by any compiler node that is ready; otherwise the host steps
    and ML subgraphs that are ready come first, so that the next run finds their results.
    Data dependences are kept, so the result is a valid model order (the query, key and value
    projections of a block, each followed by a reshape, become one run, and the attention
    that reads all three reshaped results another)."""
    done = {n.name for n in nodes if n.kind is MKind.INPUT}
    out = [n for n in nodes if n.kind is MKind.INPUT]
    left = [n for n in nodes if n.kind is not MKind.INPUT]
    while left:
        ready = [n for n in left if all(a in done for a in n.args)]
        open_run = out[-1].kind is not MKind.INPUT and compiles(out[-1])
        pick = next((n for n in ready if compiles(n) == open_run), ready[0])
        left.remove(pick)
        out.append(pick)
        done.add(pick.name)
    return out


def _input_formats(ir: ModelIR, nodes: list[MNode], consts: dict[str, np.ndarray]) -> dict[str, TensorFormat]:
    """The stored format of each model input (constants added by lowering are dense)."""
    return {n.name: _input_format(ir, n) if n.name not in consts else TensorFormat((Format.DENSE,) * len(n.shape))
            for n in nodes if n.kind is MKind.INPUT}


def _chains_onto(steps: list[Step], n: MNode, last_use_here: bool, ir: ModelIR) -> bool:
    """Whether ML node ``n`` joins the previous ML step (its input is that step's output, used
    only here, not a model output, and the two chain in one subgraph)."""
    prev = steps[-1] if steps else None
    return (isinstance(prev, MLStep) and prev.output == n.args[0] and last_use_here
            and prev.output not in ir.outputs and _chainable(prev.nodes + [n]))


def _add_ml_step(steps: list[Step], n: MNode, chained: bool, formats: dict[str, TensorFormat],
                 shapes: Mapping[str, tuple[int, ...]], masked: set[str]) -> None:
    """Append ML node ``n`` as a new step or chained onto the previous one; record the format of
    its output (a chained-over intermediate is no longer materialised)."""
    if chained:
        prev = steps[-1]
        assert isinstance(prev, MLStep)
        steps[-1] = _ml_step(prev.nodes + [n], prev.input, prev.in_fmt, shapes, masked)
        formats.pop(prev.output, None)
    else:
        steps.append(_ml_step([n], n.args[0], formats[n.args[0]], shapes, masked))
    formats[n.name] = steps[-1].graph.tensors[n.name].fmt


def _permuted_format(n: MNode, src: TensorFormat | None, declared: bool, notes: list[str]) -> TensorFormat:
    """The format of a host permute's result: a sparse matrix's transpose keeps the source's
    levels and mode order (a CSR matrix gives the CSR of its transpose, a format conversion
    made on the host); anything else is dense, and a tensor the user ``declared`` sparse (a
    model input's format) says so in the notes."""
    dense = TensorFormat((Format.DENSE,) * len(n.shape))
    if src is None or Format.COMPRESSED not in src.levels:
        return dense
    if len(n.shape) == 2:
        notes.append(f"{n.name}: the transpose of sparse {n.args[0]!r} ({src}) is converted on the host "
                     f"and stays sparse ({src})")
        return src
    if declared:
            notes.append(f"{n.name}: the permute of sparse {n.args[0]!r} ({src}) is stored dense on the host "
                     "(sparse permutes of order > 2 are not supported yet)")
    return dense


def _is_permute(n: MNode) -> bool:
    if n.kind is not MKind.EINSUM or len(n.args) != 1:
        return False
    lhs, out = n.attrs["spec"].split("->")
    return sorted(lhs) == sorted(out)


def _users(nodes: list[MNode], name: str) -> list[str]:
    return [m.name for m in nodes if name in m.args]


def _barrier_step(n: MNode, formats: dict[str, TensorFormat]) -> Step:
    """A reshape (host data movement) or a frontend host node (a graph break)."""
    if n.kind is MKind.HOST:
        return _host_op(n, n.attrs.get("reason", "no dataflow form"), formats)
    formats[n.name] = TensorFormat((Format.DENSE,) * len(n.shape))
    return HostStep(n)


def _refuse_breaks(ir: ModelIR, steps: list[Step]) -> None:
    """``strict``: a graph break is an error naming the op, its source line and why."""
    for st in steps:
        if isinstance(st, HostOpStep):
            n = st.node
            raise LoweringError(f"model {ir.name}: strict: {n.attrs.get('op', n.kind.value)} at {n.source} "
                                f"would run on the host ({st.why})")


def _host_op(n: MNode, why: str, formats: dict[str, TensorFormat], program: Program | None = None) -> HostOpStep:
    """A graph break for node ``n``; its result is stored dense."""
    sparse_reads = [a for a in dict.fromkeys(n.args)
                    if a in formats and any(f is not Format.DENSE for f in formats[a].levels)]
    formats[n.name] = (_masked_format(len(n.shape)) if n.kind is MKind.MASK
                       else TensorFormat((Format.DENSE,) * len(n.shape)))
    return HostOpStep(n, why, sparse_reads, program)


def _compile_or_break(ir: ModelIR, run: list[MNode], formats: dict[str, TensorFormat],
                      shapes: Mapping[str, tuple[int, ...]], fusion: str, choices: tuple[bool | None, dict],
                      needed_later, notes: list[str]) -> list[Step]:
    """The run compiled (:func:`_compile_run`); where the compiler cannot lower it, with its
    sparse operands converted to row-major CSR-like formats on the host; where it still cannot,
    the run split around the nodes the compiler rejects even alone, which become graph breaks
    (the compiler's reason in the step)."""
    try:
        return [_compile_run(ir, run, formats, shapes, fusion, choices, needed_later, notes)]
    except RegionOrderError:
        raise
    except LoweringError as exc:
        first = str(exc)
    conv = _conversions(ir, run, formats)
    if conv:
        trial = dict(formats)
        trial.update(conv)
        try:
            step = _compile_run(ir, run, trial, shapes, fusion, choices, needed_later, notes)
        except LoweringError:
            pass
        else:
            lines = first.split("\n")
            why = (lines[1] if len(lines) > 1 else lines[0]).strip()
            formats.update({k: v for k, v in trial.items() if k not in conv})
            step.converted = dict(conv)
            span = f"[{run[0].name} .. {run[-1].name}]"
            return [ConvertStep(t, formats[t], f, f"{span} does not compile with {t} stored {formats[t]} "
                                f"(first rejection: {why}); it does with {f}") for t, f in conv.items()] + [step]
    if len(run) == 1:
        n = run[0]
        reason = first.split("\n")[-1].strip()
        program, _, _ = _run_program(ir, run, formats, shapes, "unfused", lambda name: True, False)
        return [_host_op(n, f"the compiler cannot lower it: {reason}", formats, program)]
    out: list[Step] = []
    part: list[MNode] = []

    def needed(upto: int):
        """A split's outputs: what the caller needs, and what the nodes of ``run`` from
        ``upto`` on read (a later part of the split)."""
        reads = {a for m in run[upto:] for a in m.args}
        return lambda name: needed_later(name) or name in reads

    for k, n in enumerate(run):
        alone_ok = _compiles_alone(ir, n, formats, shapes)
        if alone_ok:
            part.append(n)
            continue
        if part:
            out += _compile_or_break(ir, part, formats, shapes, fusion, choices, needed(k), notes)
            part = []
        out += _compile_or_break(ir, [n], formats, shapes, fusion, choices, needed(k + 1), notes)
    if part:
        if part == run:  # every node compiles alone, but not together: unfused, one by one
            for k, n in enumerate(run):
                out += _compile_or_break(ir, [n], formats, shapes, "unfused", choices, needed(k + 1), notes)
        else:
            out += _compile_or_break(ir, part, formats, shapes, fusion, choices, needed_later, notes)
    return out


def _compiles_alone(ir: ModelIR, n: MNode, formats: dict[str, TensorFormat],
                    shapes: Mapping[str, tuple[int, ...]]) -> bool:
    """Whether the compiler accepts node ``n`` as a one-statement program (its operands in
    their current formats; an operand made earlier in the same run: dense)."""
    trial = dict(formats)
    for a in n.args:
        trial.setdefault(a, TensorFormat((Format.DENSE,) * len(shapes[a])))
    program, _, _ = _run_program(ir, [n], trial, shapes, "unfused", lambda name: True, False)
    return check_program(program, Options(fusion=Fusion.UNFUSED)) is None


def _conversions(ir: ModelIR, run: list[MNode], formats: dict[str, TensorFormat]) -> dict[str, TensorFormat]:
    """Sparse operands of ``run`` not stored row-major with a dense outer level, and the
    row-major format with the same sparsity to convert them to (CSC / DCSR / DCSC / COO → CSR)."""
    produced = {n.name for n in run}
    out: dict[str, TensorFormat] = {}
    for a in dict.fromkeys(a for n in run for a in n.args):
        f = formats.get(a)
        if a in produced or f is None or all(lv is Format.DENSE for lv in f.levels):
            continue
        target = TensorFormat((Format.DENSE,) + (Format.COMPRESSED,) * (f.order - 1))
        if f.order >= 2 and f != target:
            out[a] = target
    return out


def _compile_run(ir: ModelIR, run: list[MNode], formats: dict[str, TensorFormat],
                 shapes: Mapping[str, tuple[int, ...]], fusion: str,
                 choices: tuple[bool | None, dict], needed_later, notes: list[str]) -> CompilerStep:
    """Compile with the compiler's formats for intermediates, or, where their mode orders
    conflict (a POG cycle), with every intermediate stored row-major (dense outer levels,
    compressed rows); at the requested fusion, or, where the compiler cannot lower it, the next
    finer one (full → partial → unfused), recording why in ``notes``.  Each candidate is
    decided up front by the compiler's check (:func:`fuseflow.compiler.check_program`), which
    says why a rejected one cannot be compiled.  ``choices``: factored, and the other
    compiler options (:class:`~fuseflow.compiler.Options` fields)."""
    factored, extra = choices
    chain = {"full": ("full", "partial", "unfused"), "partial": ("partial", "unfused"),
             "unfused": ("unfused",)}[fusion]
    rejected: list[str] = []
    for mode in chain:
        for row_major in (False, True):
            program, inputs, outputs = _run_program(ir, run, formats, shapes, mode, needed_later,
                                                    row_major)
            options = Options(fusion=Fusion.PARTIAL if mode != "unfused" else Fusion.UNFUSED,
                              factored=True if factored is None else factored, **extra)
            why = check_program(program, options)
            if why is not None:
                rejected.append(f"{mode}{' (row-major intermediates)' if row_major else ''}: {why}")
                continue
            if mode != fusion:
                notes.append(f"[{run[0].name} .. {run[-1].name}] compiled {mode}, not {fusion}: "
                             + rejected[0])
            compiled = run_pipeline(program, options)
            produced = {n.name for n in run}
            formats.update({k: v for k, v in compiled.formats.items() if k in produced})
            return CompilerStep(run, compiled, inputs, outputs, options)
    raise LoweringError(f"model {ir.name}: cannot compile [{run[0].name} .. {run[-1].name}]:\n  "
                        + "\n  ".join(rejected))


# Program expressions of the compiler's node kinds: (operand handles, node, shapes) -> expression
_EXPRESSIONS = {
    MKind.EINSUM: lambda ops, n, shapes: einsum(n.attrs["spec"], *ops, reduce=n.attrs.get("reduce", "add")),
    MKind.DIV: lambda ops, n, shapes: ops[0] / ops[1],
    MKind.MAXIMUM: lambda ops, n, shapes: program_api.maximum(ops[0], ops[1]),
    MKind.MINIMUM: lambda ops, n, shapes: program_api.minimum(ops[0], ops[1]),
    MKind.ADD: lambda ops, n, shapes: ops[0] + ops[1],
    MKind.SUB: lambda ops, n, shapes: ops[0] - ops[1],
    MKind.MUL: lambda ops, n, shapes: ops[0] * ops[1],
    MKind.MASK: lambda ops, n, shapes: _broadcast_mask(ops[0], ops[1], shapes),
    MKind.SCALE: lambda ops, n, shapes: ops[0] * float(n.attrs["c"]),
    MKind.ADD_SCALAR: lambda ops, n, shapes: ops[0] + float(n.attrs["c"]),
    MKind.UNARY: lambda ops, n, shapes: getattr(program_api, n.attrs["op"])(ops[0]),
    MKind.SOFTMAX: lambda ops, n, shapes: program_api.softmax(ops[0]),
    MKind.LAYERNORM: lambda ops, n, shapes: program_api.layernorm(ops[0], float(n.attrs["eps"])),
}


def _run_program(ir: ModelIR, run: list[MNode], formats: dict[str, TensorFormat],
                 shapes: Mapping[str, tuple[int, ...]], fusion: str, needed_later,
                 row_major: bool) -> tuple[Program, list[str], list[str]]:
    """The run as an Einsum program (one region per model region; one region in all for
    ``full``), with its input and output tensor names."""
    produced = {n.name for n in run}
    p = Program(f"{ir.name}_{run[0].name}")
    handles: dict = {}
    inputs: list[str] = []
    for a in (a for n in run for a in n.args):
        if a not in produced and a not in handles:
            handles[a] = p.tensor(a, shapes[a], formats[a])
            inputs.append(a)
    _check_regions_follow_data(ir, run)
    regions: dict[str, list] = {}
    outputs: list[str] = []
    for n in run:
        ops = [handles[a] for a in n.args]
        if n.kind is MKind.MASK and _may_leave_out(n.args[1], run, formats):
            ops[1] = ops[1] + ops[0] * 0.0  # the union visits every coordinate of the mask
        expr = _EXPRESSIONS[n.kind](ops, n, shapes)
        row = "d" * (len(n.shape) - 1) + "c" if row_major and n.shape else None  # a 0-d value: no level
        handles[n.name] = p.let(n.name, expr, fmt=row)
        regions.setdefault(n.region, []).append(handles[n.name])
        if needed_later(n.name):
            outputs.append(n.name)
    outputs = outputs or [run[-1].name]
    p.output(*[handles[o] for o in outputs])
    for members in regions.values():
        p.region(*members)
    if fusion == "full":
        p.regions.clear()
        p.region(*[handles[n.name] for n in run])
    return p, inputs, outputs


class RegionOrderError(LoweringError):
    """A node reads a tensor a later fusion region computes (a frontend bug, never a graph break)."""


def _check_regions_follow_data(ir: ModelIR, run: list[MNode]) -> None:
    """Every node reads tensors of its own region or of regions that come before it (regions
    are fused and run in the order they first appear): otherwise a fusion region would read a
    later region's output."""
    order: dict[str, int] = {}
    made_in: dict[str, str] = {}
    for n in run:
        order.setdefault(n.region, len(order))
        made_in[n.name] = n.region
    for n in run:
        late = [a for a in n.args if a in made_in and order[made_in[a]] > order[n.region]]
        if late:
            raise RegionOrderError(f"model {ir.name}: node {n.name!r} ({n.source or n.kind.value}) in region "
                                f"{n.region!r} reads {late[0]!r}, which region {made_in[late[0]]!r} computes "
                                "later; put the op in that region (or a later one)")


def _may_leave_out(name: str, run: list[MNode], formats: Mapping[str, TensorFormat]) -> bool:
    """Whether tensor ``name`` may store fewer coordinates than its shape has: an operand of
    ``run`` with a compressed level, or computed in ``run`` from one (or from a mask).  The
    mask product ``M ⊙ x`` intersects coordinates, so such an ``x`` is read as ``x + 0·M``:
    inside the mask an implicit zero of ``x`` is the score 0, not a masked-out entry."""
    made = {n.name: n for n in run}
    todo, seen = [name], set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        p = made.get(t)
        if p is None:
            f = formats.get(t)
            if f is None or any(lv is not Format.DENSE for lv in f.levels):
                return True
        elif p.kind is MKind.MASK:
            return True
        else:
            todo.extend(p.args)
    return False


def _broadcast_mask(mask, x, shapes):
    """``M ⊙ x`` with the keep-mask over the trailing dimensions of ``x`` (``M`` first, so its
    coordinates drive the iteration)."""
    xs = shapes[x.name] if hasattr(x, "name") else x.shape
    nd = len(xs)
    letters = "abcdefgh"[:nd]
    return einsum(f"{letters[nd - len(mask.shape):]},{letters}->{letters}", mask, x)


def _chainable(nodes: list[MNode]) -> bool:
    """An ML chain keeps one row shape: only the last op may reduce (max)."""
    return all(n.kind is not MKind.MAX for n in nodes[:-1])


def _keeps_zero_rows(n: MNode) -> bool:
    """An all-zero row stays all-zero under ML node ``n`` (a row of the dense tensor that a
    sparse input does not store may be left out)."""
    if n.kind is MKind.UNARY:
        return UnOp(n.attrs["op"]).zero_preserving
    if n.kind is MKind.ADD_SCALAR:
        return float(n.attrs["c"]) == 0.0
    return n.kind is not MKind.SOFTMAX


def _ml_step(nodes: list[MNode], src: str, in_fmt: TensorFormat, shapes: Mapping[str, tuple[int, ...]],
             masked: set[str]) -> MLStep:
    """scan every level of ``src`` → load → the ops of ``nodes`` → write the last node's tensor."""
    out = nodes[-1].name
    shape = shapes[src]
    nd = len(shape)
    # rows innermost (the host reorders if needed); a COO input's duplicates are summed by that
    # conversion too (non-unique and singleton levels become compressed ones)
    levels = tuple(Format.DENSE if lv is Format.DENSE else Format.COMPRESSED for lv in in_fmt.levels)
    fmt = TensorFormat(levels, tuple(range(nd)))
    if src not in masked and any(not _keeps_zero_rows(n) for n in nodes):
        # softmax of an all-zero row is uniform and f(0) != 0 of a missing entry is f(0): every
        # element of the dense tensor is visited
        fmt = TensorFormat((Format.DENSE,) * nd, fmt.mode_order)
    elif src not in masked and any(n.kind in (MKind.SOFTMAX, MKind.LAYERNORM, MKind.MAX) for n in nodes):
        # an unmasked row op needs every element of a row (implicit zeros count): dense rows
        fmt = TensorFormat(fmt.levels[:-1] + (Format.DENSE,), fmt.mode_order)
    b = GraphBuilder(f"ml_{out}")
    g = b.g
    g.tensor(src, shape, fmt)
    reduces = nodes[-1].kind is MKind.MAX
    out_shape = shapes[out]
    out_fmt = TensorFormat(fmt.levels[:-1] if reduces else fmt.levels, tuple(range(len(out_shape))))
    g.tensor(out, out_shape, out_fmt, Role.OUTPUT)
    ref = b.root(src)
    crds = []
    for lvl in range(nd):
        crd, ref = b.scan(src, lvl, ref)
        crds.append(crd)
    val = b.load(src, ref)
    row = shape[-1]
    for n in nodes:
        if n.kind is MKind.SCALE:
            val = unary(b, AluOp.MUL_SCALAR, val, float(n.attrs["c"]))
        elif n.kind is MKind.ADD_SCALAR:
            val = unary(b, AluOp.ADD_SCALAR, val, float(n.attrs["c"]))
        elif n.kind is MKind.UNARY:
            val = unary(b, AluOp(n.attrs["op"]), val)
        elif n.kind is MKind.SOFTMAX:
            val = row_softmax(b, val, row)
        elif n.kind is MKind.LAYERNORM:
            val = row_layernorm(b, val, row, n.attrs["eps"])
        else:
            val = reduce_rows(b, ReduceOp.MAX, val)
    if reduces:
        g.discard(crds[-1])
        crds = crds[:-1]
    for lvl, crd in enumerate(crds):
        b.write(out, lvl, crd)
    b.write_vals(out, val)
    g.verify()
    return MLStep(nodes, g, src, out, fmt)
