"""Run a compiled program in a simulator (``sw_sim.run_graph``, passed in): every graph in order,
intermediates handed from the graph that writes them to the graphs that read them, permuted
copies made on the host."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..samml import Graph
from ..simulation import SimRun, Simulator, graph_overflows
from ..tensor import TensorData, TensorFormat
from .codegen import CompiledProgram
from .densify import is_iteration_tensor, iteration_data
from .program import Access, BinOp, Op, Program, ProgramError, Sum, Unary, UnOp, VectorLayout
from .semantics import check_denominators

__all__ = ["ProgramResult", "graph_runs", "reference", "reference_all", "run_program"]


@dataclass
class ProgramResult:
    outputs: dict[str, TensorData]
    cycles: list[int]  # per graph, in order
    counters: list[dict] = field(default_factory=list)  # per graph (sw_sim.counters), if reported
    # "graph/node" -> results wrapped or saturated (sw_sim's SimResult.overflows), nodes with none left out
    overflows: dict[str, int] = field(default_factory=dict)

    @property
    def total_cycles(self) -> int:
        return sum(self.cycles)

    def dense(self, name: str) -> np.ndarray:
        return self.outputs[name].to_dense()


def _as_data(name: str, value, fmt: TensorFormat,
             shape: tuple[int, ...], vector: VectorLayout | None = None) -> TensorData:
    if vector is not None:  # blocked: data in the original shape, stored in blocks
        shape = vector.shape
    if tuple(value.shape) != tuple(shape):
        raise ProgramError(f"input {name!r}: data shape {tuple(value.shape)} != declared {shape}")
    if vector is not None:
        bf = vector.block_format(fmt)
        if isinstance(value, TensorData):
            return value.convert(bf)
        dense = value.toarray() if hasattr(value, "toarray") else np.asarray(value)
        return TensorData.from_blocks(dense, bf, name=name)
    if isinstance(value, TensorData):
        return value.convert(fmt)
    return TensorData.from_array(value, fmt)


def initial_tensors(compiled: CompiledProgram, data: Mapping[str, np.ndarray | TensorData]
                     ) -> dict[str, TensorData]:
    program = compiled.program
    missing = [n for n in program.inputs() if n not in data]
    if missing:
        raise ProgramError(f"program {program.name!r}: no data for inputs {missing}")
    tensors: dict[str, TensorData] = {}
    for n in program.inputs():
        d = program.decls[n]
        tensors[n] = _as_data(n, data[n], d.fmt, d.shape, d.vector)
    for p in compiled.permuted:  # host-side reformat: the primitive set has no sorter
        if p.source in tensors:
            tensors[p.name] = tensors[p.source].convert(p.fmt)
    check_denominators(program, tensors)
    for g in compiled.graphs:  # densified iteration (.densify): made on the host, never read
        for t in g.input_tensors():
            if is_iteration_tensor(t) and t not in tensors:
                tensors[t] = iteration_data(t)
    return tensors


def graph_runs(compiled: CompiledProgram, data: Mapping[str, np.ndarray | TensorData], *,
               simulate: Simulator, **sim_args) -> Iterator[tuple[Graph, dict[str, TensorData], SimRun]]:
    """Simulate the graphs in order with ``simulate`` (e.g. ``sw_sim.run_graph``), yielding each
    graph, the tensors it read and its result (intermediates are handed on, permuted copies made
    on the host)."""
    tensors = initial_tensors(compiled, data)
    for cg in compiled.groups:
        g = cg.graph
        inputs = {t: tensors[t] for t in g.input_tensors()}
        res = simulate(g, inputs, **sim_args)
        yield g, inputs, res
        tensors.update(res.outputs)
        for p in compiled.permuted:
            if p.source in res.outputs:
                tensors[p.name] = res.outputs[p.source].convert(p.fmt)


def run_program(compiled: CompiledProgram, data: Mapping[str, np.ndarray | TensorData], *,
                simulate: Simulator, **sim_args) -> ProgramResult:
    """Simulate every graph with ``simulate`` (e.g. ``sw_sim.run_graph``); ``data`` maps input
    names to dense arrays (or TensorData); ``sim_args`` go to ``simulate`` (e.g.
    ``numerics="float"``)."""
    cycles: list[int] = []
    counters: list[dict] = []
    written: dict[str, TensorData] = {}
    overflows: dict[str, int] = {}
    for g, _, res in graph_runs(compiled, data, simulate=simulate, **sim_args):
        cycles.append(res.cycles)
        if getattr(res, "counters", None):
            counters.append(res.counters)
        overflows.update(graph_overflows(g.name, res))
        written.update(res.outputs)
    outs = {n: written[n] for n in compiled.program.result_names()}
    return ProgramResult(outs, cycles, counters, overflows)



def reference(compiled_or_program, data: Mapping[str, np.ndarray | TensorData],
              dtype: type = np.int64) -> dict[str, np.ndarray]:
    """numpy evaluation of the program's outputs (the independent reference); ``dtype``
    int64 (wrapping like the integer hardware only beyond 2**63) or float64."""
    program = (getattr(compiled_or_program, "source", None)
               or getattr(compiled_or_program, "program", compiled_or_program))
    env = reference_all(program, data, dtype)
    return {n: env[n] for n in program.result_names()}


_NUMPY_UNARY = {
    "relu": lambda x: np.maximum(x, 0),
    "neg": np.negative,
    "exp": np.exp,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1.0 + np.vectorize(math.erf, otypes=[float])(x / math.sqrt(2.0))),
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
}


def reference_all(program, data: Mapping[str, np.ndarray | TensorData],
                  dtype: type = np.int64) -> dict[str, np.ndarray]:
    """numpy evaluation of every statement: inputs and every computed tensor by name.

    Alongside the values it tracks which coordinates the iteration visits (the stored entries
    of sparse inputs; products visit the intersection, sums the union, a reduction every
    coordinate some term reaches), which only row functions read: softmax normalises over the
    visited coordinates of each fibre (entries outside count as ``-inf``)."""
    assert isinstance(program, Program)
    env = {n: np.asarray(v.to_dense() if isinstance(v, TensorData)
                         else v.toarray() if sp.issparse(v) else v, dtype=dtype)  # scipy sums duplicates
           for n, v in data.items()}
    seen: dict[str, np.ndarray | None] = {n: _visited(program, n, v) for n, v in data.items()}

    def ev(e) -> tuple[np.ndarray, list[str], np.ndarray | None]:
        if isinstance(e, Access):
            return env[e.tensor], list(e.indices), seen.get(e.tensor)
        if isinstance(e, Unary):
            a, ia, ma = ev(e.arg)
            if e.op is UnOp.LAYERNORM:  # over the whole fibre: every coordinate visited
                return _row_function(e, a.astype(np.float64), ia, None).astype(dtype), ia, None
            if e.op.row:
                return _row_function(e, a.astype(np.float64), ia, ma).astype(dtype), ia, ma
            if e.op is UnOp.SCALE:
                return a * np.asarray(e.scalar, dtype=dtype), ia, ma
            if e.op is UnOp.SHIFT:
                return a + np.asarray(e.scalar, dtype=dtype), ia, ma
            return _NUMPY_UNARY[e.op.value](a).astype(dtype), ia, ma
        if isinstance(e, Sum):
            arr, ids, m = ev(e.body)
            keep = [i for i in ids if i not in e.indices]
            axes = tuple(k for k, i in enumerate(ids) if i in e.indices)
            if e.op is not Op.ADD:  # over every coordinate, implicit zeros included
                out = (np.max if e.op is Op.MAX else np.min)(arr, axis=axes)
            else:
                out = np.einsum(arr, [_sym(i) for i in ids], [_sym(i) for i in keep])
            if m is not None:
                m = np.any(np.broadcast_to(m, arr.shape), axis=axes)
            return out, keep, m
        assert isinstance(e, BinOp)
        a, ia, ma = ev(e.lhs)
        b, ib, mb = ev(e.rhs)
        ids = list(dict.fromkeys(ia + ib))
        a2 = _expand(a, ia, ids)
        b2 = _expand(b, ib, ids)
        seen_ab = _combine(e.op, ma, ia, mb, ib, ids)
        if e.op is Op.DIV:
            return _divide(a2, b2, e), ids, seen_ab
        fn = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.MAX: np.maximum,
              Op.MIN: np.minimum}[e.op]
        return fn(a2, b2), ids, seen_ab

    for s in program.statements:
        arr, ids, m = ev(s.rhs)
        shape = program.decls[s.out].shape
        full = _expand(arr, ids, list(s.indices))
        env[s.out] = np.broadcast_to(full, shape).copy()
        seen[s.out] = None if m is None else np.broadcast_to(_expand(m, ids, list(s.indices)), shape)
    return env


def _visited(program: Program, name: str, value) -> np.ndarray | None:
    """The coordinates an input's iteration visits (None: all of them, a dense tensor)."""
    decl = program.decls.get(name)
    td = value if isinstance(value, TensorData) else None
    if td is None:
        if decl is None or decl.fmt is None or all(f.value == "dense" for f in decl.fmt.levels):
            return None
        td = TensorData.from_array(value if sp.issparse(value) else np.asarray(value), decl.fmt)
    prefix, _ = td._stored_coords()
    stored = np.zeros(tuple(td.shape[m] for m in td.fmt.mode_order), dtype=bool)
    stored[tuple(prefix.T)] = True
    return np.transpose(stored, np.argsort(td.fmt.mode_order))


def _combine(op: Op, ma, ia: list[str], mb, ib: list[str], ids: list[str]) -> np.ndarray | None:
    if op in (Op.MUL, Op.DIV):  # an intersection: what both visit
        if ma is None or mb is None:
            return None if ma is None and mb is None else _expand(ma if mb is None else mb,
                                                                   ia if mb is None else ib, ids)
        return _expand(ma, ia, ids) & _expand(mb, ib, ids)
    if ma is None or mb is None:  # a union: what either visits
        return None
    return _expand(ma, ia, ids) | _expand(mb, ib, ids)


def _row_function(e: Unary, x: np.ndarray, ids: list[str], m: np.ndarray | None) -> np.ndarray:
    """softmax along ``e.index`` of ``x`` (axes ``ids``) over the visited ``m`` (a masked
    softmax); layernorm over the whole fibre."""
    ax = ids.index(e.index)
    visited = np.ones(x.shape, dtype=bool) if m is None else np.broadcast_to(m, x.shape)
    if e.op is UnOp.SOFTMAX:
        xm = np.where(visited, x, -np.inf)
        top = np.max(xm, axis=ax, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        ex = np.where(visited, np.exp(xm - top), 0.0)
        tot = np.sum(ex, axis=ax, keepdims=True)
        return np.where(visited, ex / np.where(tot > 0, tot, 1.0), 0.0)
    n = x.shape[ax]  # layernorm: over every coordinate of the fibre, implicit zeros included
    mean = np.sum(x, axis=ax, keepdims=True) / n
    var = np.sum((x - mean) ** 2, axis=ax, keepdims=True) / n
    return (x - mean) / np.sqrt(var + float(e.scalar))


def _divide(a: np.ndarray, b: np.ndarray, e: BinOp) -> np.ndarray:
    """numpy's division (floor division for integers, as the integer ALU), a 0 in the
    denominator an error (the hardware's rule for it is not numpy's)."""
    b = np.broadcast_to(b, np.broadcast_shapes(a.shape, b.shape))
    if (b == 0).any():
        at = tuple(int(x) for x in np.argwhere(b == 0)[0])
        raise ProgramError(f"division by zero in {e}: the denominator {e.rhs} is 0 at {at}")
    return np.floor_divide(a, b) if np.issubdtype(b.dtype, np.integer) else np.true_divide(a, b)


_SYMS: dict[str, int] = {}


def _sym(i: str) -> int:
    return _SYMS.setdefault(i, len(_SYMS) % 52)


def _expand(a: np.ndarray, ids: list[str], target: list[str]) -> np.ndarray:
    """Transpose ``a`` (axes named ``ids``) to ``target`` order, with size-1 axes for missing."""
    perm = [ids.index(i) for i in target if i in ids]
    a = np.transpose(a, perm) if perm else a
    shape = []
    k = 0
    present = [i for i in target if i in ids]
    for i in target:
        if i in ids:
            shape.append(a.shape[present.index(i)])
            k += 1
        else:
            shape.append(1)
    return a.reshape(shape)
