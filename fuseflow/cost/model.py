"""The heuristic (:mod:`fuseflow.cost`) over a compiled model: every step in order, as
:func:`fuseflow.models.plan.run_model` runs them, without simulating."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..compiler.densify import is_iteration_tensor, iteration_data
from ..ir.tensor import Format, TensorData, TensorFormat
from ..models.ir import MKind
from ..models.steps import CompiledModel, CompilerStep, ConvertStep, MLStep, _input_format
from .graph import Estimate, TensorStats, estimate_graph, stats_of, uniform_stats

__all__ = ["estimate_model"]


def estimate_model(cm: CompiledModel, *, graph_inputs: dict[str, dict[str, TensorStats]] | None = None,
                   **kw: Any) -> Estimate:
    """FLOPs, bytes and a cycle bound of every graph of ``cm`` (``kw``: memory, placement, cw,
    vw, rates — see :func:`fuseflow.cost.estimate_graph`).  Input statistics come from the
    traced inputs; host steps (reshapes, transposes) produce dense tensors, as they do when run.
    ``graph_inputs``: filled with each graph's input statistics by graph name (to estimate the
    graph again on its own, e.g. parallelized: :mod:`fuseflow.cost.par_search`)."""
    record = graph_inputs if graph_inputs is not None else {}
    t0 = time.perf_counter()
    ir = cm.ir
    tensors: dict[str, tuple[TensorStats, tuple[int, ...], TensorFormat]] = {}
    for n in ir.nodes:
        if n.kind is MKind.INPUT:
            fmt = _input_format(ir, n)
            tensors[n.name] = (stats_of(TensorData.from_array(ir.data[n.name], fmt)), n.shape, fmt)
    for name, arr in cm.consts.items():
        fmt = TensorFormat((Format.DENSE,) * arr.ndim)
        tensors[name] = (stats_of(TensorData.from_dense(np.ones(arr.shape), fmt)), arr.shape, fmt)
    est = Estimate()
    for s in cm.steps:
        if isinstance(s, CompilerStep):
            prog = s.compiled
            local = {a: _as(tensors[a], prog.program.decls[a].fmt) for a in s.inputs}
            for p in prog.permuted:
                if p.source in local:
                    local[p.name] = uniform_stats(prog.program.decls[p.source].shape, p.fmt,
                                                  local[p.source].levels[-1].nnz)
            for cg in prog.groups:
                g = cg.graph
                _add_iteration_tensors(local, g.input_tensors())
                record[g.name] = {t: local[t] for t in g.input_tensors()}
                _, written = estimate_graph(g, record[g.name], est=est, **kw)
                local.update(written)
                for t, st in written.items():
                    tensors[t] = (st, g.tensors[t].shape, g.tensors[t].fmt)
                for p in prog.permuted:
                    if p.source in written:
                        local[p.name] = uniform_stats(g.tensors[p.source].shape, p.fmt, written[p.source].levels[-1].nnz)
        elif isinstance(s, MLStep):
            record[s.graph.name] = {s.input: _as(tensors[s.input], s.in_fmt)}
            _, written = estimate_graph(s.graph, record[s.graph.name], est=est, **kw)
            for t, st in written.items():
                tensors[t] = (st, s.graph.tensors[t].shape, s.graph.tensors[t].fmt)
        elif isinstance(s, ConvertStep):  # a host format conversion: the same entries in other levels
            tensors[s.output] = (_as(tensors[s.tensor], s.dst), tensors[s.tensor][1], s.dst)
        else:
            n = s.node
            fmt = TensorFormat((Format.DENSE,) * len(n.shape))
            total = float(np.prod(n.shape))
            tensors[n.name] = (uniform_stats(tuple(n.shape), fmt, total), tuple(n.shape), fmt)
    est.seconds = time.perf_counter() - t0
    return est


def _as(entry: tuple[TensorStats, tuple[int, ...], TensorFormat], fmt: TensorFormat) -> TensorStats:
    st, shape, have = entry
    if have == fmt:
        return st
    return uniform_stats(tuple(shape), fmt, st.levels[-1].nnz if st.levels else 0.0)


def _add_iteration_tensors(local: dict, inputs: list[str]) -> None:
    """The compiler's dense iteration tensors among ``inputs`` (``compiler.densify``), which no
    model input provides: one dense level, as the runner makes them."""
    for t in inputs:
        if is_iteration_tensor(t) and t not in local:
            local[t] = stats_of(iteration_data(t))
