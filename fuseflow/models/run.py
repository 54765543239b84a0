"""Running a compiled model: every step in order, compiled programs and ML subgraphs in the
simulator passed in, host steps on the host (:func:`run_model`)."""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp

from fuseflow.compiler import (
    run_program,
)
from fuseflow.ir.numerics import Numerics
from fuseflow.ir.overflow import Overflow, check_policy
from fuseflow.ir.quantize import quantized_input
from fuseflow.ir.simulator import Simulator, graph_overflow_records, graph_overflows
from fuseflow.ir.tensor import Format, TensorData, TensorFormat

from .ir import MKind
from .steps import (
    WORD_BYTES,
    CompiledModel,
    CompilerStep,
    ConvertStep,
    MLStep,
    ModelRun,
    Step,
    _input_format,
    converted_name,
)


# ----------------------------------------------------------------------------- running
def _to_fmt(td: TensorData, fmt: TensorFormat) -> TensorData:
    return td.convert(fmt)


def run_model(cm: CompiledModel, data: Mapping[str, np.ndarray] | None = None,
              numerics: str = "float", max_cycles: int | None = None, *,
              simulate: Simulator, saturate: bool = False, on_overflow: str = "raise",
              program_runner=None, **sim_args) -> ModelRun:
    """Run every step with ``simulate`` (``sw_sim.run_graph``); ``data`` overrides the traced
    input values; ``max_cycles`` raises the simulator's per-graph cycle limit (default: its own).

    A result the arithmetic saturated (fixed point) or wrapped raises
    :class:`~fuseflow.ir.overflow.NumericOverflowError` naming the graph, nodes, count, largest
    magnitude and format; ``on_overflow="report"`` returns the run with
    :attr:`ModelRun.overflows` and a warning instead.

    ``numerics``: ``"float"`` (default), or a fixed-point format such as ``"q16.16"`` — inputs
    are quantised (``Numerics.quantize``), host steps move raw values, and the outputs are
    dequantised back to floats.  An input or weight outside the numerics' range is an error,
    unless ``saturate``: then it is clamped and counted in :attr:`ModelRun.saturated`.

    ``program_runner(compiled, data, numerics=, **sim_args)`` runs the graphs of each compiler
    step instead of :func:`run_program` with ``simulate`` (a board that runs them back to back:
    :meth:`fpga.model_run.BoardModel.run_program`)."""
    t0 = time.perf_counter()
    num = Numerics.parse(numerics)
    limit = {} if max_cycles is None else {"max_cycles": max_cycles}
    limit.update(sim_args)  # e.g. memory=, onchip= (sw_sim.run_graph)
    limit["on_overflow"] = check_policy(on_overflow)
    counters: list[tuple[str, dict]] = []
    ir = cm.ir
    tensors: dict[str, TensorData] = {}
    saturated: dict[str, int] = {}
    _check_data_names(ir, data)
    for n in ir.nodes:
        if n.kind is MKind.INPUT:
            value = (data or {}).get(n.name, ir.data[n.name])
            tensors[n.name] = quantized_input(n.name, value, n.shape, num, _input_format(ir, n),
                                              saturate=saturate, saturated=saturated)
    for name, arr in cm.consts.items():
        tensors[name] = quantized_input(name, arr, arr.shape, num, TensorFormat((Format.DENSE,) * arr.ndim),
                                        saturate=saturate, saturated=saturated)
    cycles: list[tuple[str, int]] = []
    overflows: dict[str, int] = {}
    records: list[Overflow] = []
    host: list[dict] = []
    for s in cm.steps:
        if isinstance(s, CompilerStep):
            data_in = {a: tensors[converted_name(a, s.converted[a])] if a in s.converted else tensors[a]
                       for a in s.inputs}
            if program_runner is None:
                res = run_program(s.compiled, data_in, simulate=simulate, numerics=numerics, **limit)
            else:
                res = program_runner(s.compiled, data_in, numerics=numerics, **limit)
            for g, c in zip(s.graphs, res.cycles):
                cycles.append((g.name, c))
            counters += [(g.name, c) for g, c in zip(s.graphs, res.counters)]
            overflows.update(res.overflows)
            records += res.overflow_records
            tensors.update(res.written)  # the results, and the intermediates graphs materialised
        elif isinstance(s, MLStep):
            r = simulate(s.graph, {s.input: _to_fmt(tensors[s.input], s.in_fmt)}, numerics=numerics,
                         **limit)
            cycles.append((s.graph.name, r.cycles))
            if getattr(r, "counters", None):
                counters.append((s.graph.name, r.counters))
            overflows.update(graph_overflows(s.graph.name, r))
            records += graph_overflow_records(s.graph.name, r)
            tensors.update(r.outputs)
        else:
            out = s.run(tensors, num)
            name = s.output if isinstance(s, ConvertStep) else s.node.name
            tensors[name] = out
            host.append(_host_record(s, name, [tensors[a] for a in s.reads], out))
    outs = {o: np.asarray(num.dequantize(tensors[o].to_dense()), dtype=np.float64) for o in ir.outputs}
    return ModelRun(outs, cycles, time.perf_counter() - t0, tensors, counters, saturated, overflows, records,
                    host)


def _check_data_names(ir, data: Mapping[str, np.ndarray] | None) -> None:
    """``data`` may only override the model's inputs: a name that is none of them, or an input
    fixed at trace time (an integer input such as ``edge_index``, or an attention mask, compiled
    in as constants) given
    another value, would be ignored silently."""
    if not data:
        return
    inputs = {n.name for n in ir.nodes if n.kind is MKind.INPUT}
    fixed = getattr(ir, "fixed_inputs", {}) or {}
    for name, value in data.items():
        if name in fixed:
            traced = np.asarray(fixed[name])
            given = np.asarray(value.toarray() if hasattr(value, "toarray") else value)
            if given.shape != traced.shape or not np.array_equal(given, traced):
                raise ValueError(f"input {name!r} was fixed when the model was traced (an integer input or an "
                                 f"attention mask, compiled in as constants); trace the model again with the new {name}")
        elif name in getattr(ir, "fixed_patterns", {}):
            _check_pattern(name, ir.fixed_patterns[name], value)
        elif name not in inputs:
            raise ValueError(f"data for {name!r}: the model {ir.name!r} has no such input "
                             f"(its inputs: {', '.join(sorted(inputs)) or 'none'})")


def _check_pattern(name: str, pattern: tuple[np.ndarray, np.ndarray], value) -> None:
    """New values of a sparse input whose pattern the trace compiled in keep that pattern."""
    m = sp.csr_array(value) if sp.issparse(value) else sp.csr_array(np.asarray(value, dtype=np.float64))
    m.sum_duplicates()
    m.sort_indices()
    indptr, indices = pattern
    if m.shape[0] + 1 != len(indptr) or not (np.array_equal(m.indptr, indptr) and np.array_equal(m.indices, indices)):
        raise ValueError(f"input {name!r}: its sparsity pattern was fixed when the model was traced (its indices, "
                         f"or a softmax over its entries, compiled in as constants); trace the model again with "
                         f"the new {name}")


def stored_words(td: TensorData) -> int:
    """Words a tensor occupies as stored: segment and coordinate arrays and values."""
    words = len(td.vals)
    for lvl, f in enumerate(td.fmt.levels):
        if f.has_seg:
            words += len(td.seg[lvl])
        if f.has_crd:
            words += len(td.crd[lvl])
    return words


def _host_record(s: Step, name: str, reads: list[TensorData], out: TensorData) -> dict:
    """A host step as a materialisation: what it read and wrote (bytes of stored words)."""
    return {"step": name, "kind": s.kind, "label": s.label(),
            "bytes_read": WORD_BYTES * sum(stored_words(t) for t in reads),
            "bytes_written": WORD_BYTES * stored_words(out)}
