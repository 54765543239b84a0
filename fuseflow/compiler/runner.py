"""Run a compiled program in a simulator (``sw_sim.run_graph``, passed in): every graph in order,
intermediates handed from the graph that writes them to the graphs that read them, permuted
copies made on the host."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..ir.overflow import Overflow, check_policy
from ..ir.samml import Graph
from ..ir.simulator import SimRun, Simulator, graph_overflow_records, graph_overflows
from ..ir.tensor import TensorData, TensorFormat
from .densify import is_iteration_tensor, iteration_data
from .evaluate import dense_of, evaluate, expand_axes
from .passes.lower import CompiledProgram
from .program import BinOp, Op, Program, ProgramError, Unary, UnOp, VectorLayout
from .semantics import check_denominators

__all__ = ["ProgramResult", "converted_outputs", "graph_runs", "initial_tensors", "program_result", "reference", "reference_all", "run_program"]


@dataclass
class ProgramResult:
    outputs: dict[str, TensorData]
    cycles: list[int]  # per graph, in order
    counters: list[dict] = field(default_factory=list)  # per graph (sw_sim.counters), if reported
    # "graph/node" -> results wrapped or saturated (sw_sim's SimResult.overflows), nodes with none left out
    overflows: dict[str, int] = field(default_factory=dict)
    overflow_records: list[Overflow] = field(default_factory=list)  # the same, with magnitudes and format
    written: dict[str, TensorData] = field(default_factory=dict)  # every tensor a graph wrote (results too)

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


def permuted_copy(data: TensorData, fmt: TensorFormat) -> TensorData:
    """``data`` stored in ``fmt`` (a permuted copy), keeping every stored entry: an explicit
    zero stays stored, because a softmax normalises over the coordinates the iteration visits
    (``TensorData.convert`` goes through scipy, which drops explicit zeros)."""
    if data.blocking is not None or fmt.order != data.fmt.order or fmt.order < 2:
        return data.convert(fmt)
    prefix, vals = data._stored_coords()
    if np.all(vals != 0):  # nothing explicit to keep: the sparse path, never dense
        return data.convert(fmt)
    coords = np.empty_like(prefix)
    coords[:, list(data.fmt.mode_order)] = prefix  # storage order -> mode order
    present = np.zeros(data.shape, dtype=bool)
    present[tuple(coords.T)] = True
    order = list(fmt.mode_order)
    return TensorData._from_present(np.transpose(data.to_dense(), order), np.transpose(present, order),
                                    fmt, tuple(data.shape))


def converted_outputs(compiled: CompiledProgram, outputs: Mapping[str, TensorData]) -> dict[str, TensorData]:
    """The computed tensors a graph writes in another format than the declared one, converted
    on the host (:func:`.pog._convert_output`): their declared name -> the converted data."""
    computed = {s.out for s in compiled.program.statements}
    return {p.name: permuted_copy(outputs[p.source], p.fmt) for p in compiled.permuted
            if p.source in outputs and p.name in computed}


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
            tensors[p.name] = permuted_copy(tensors[p.source], p.fmt)
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
                tensors[p.name] = permuted_copy(res.outputs[p.source], p.fmt)


def run_program(compiled: CompiledProgram, data: Mapping[str, np.ndarray | TensorData], *,
                simulate: Simulator, on_overflow: str = "raise", **sim_args) -> ProgramResult:
    """Simulate every graph with ``simulate`` (e.g. ``sw_sim.run_graph``); ``data`` maps input
    names to dense arrays (or TensorData); ``sim_args`` go to ``simulate`` (e.g.
    ``numerics="float"``).  A result wrapped or saturated by the arithmetic raises
    :class:`~fuseflow.ir.overflow.NumericOverflowError` (the simulator raises it, naming the graph
    and nodes); ``on_overflow="report"`` returns the results with the counts
    (:attr:`ProgramResult.overflows`) and a warning instead."""
    check_policy(on_overflow)
    return program_result(compiled, ((g, res) for g, _, res in
                                     graph_runs(compiled, data, simulate=simulate, on_overflow=on_overflow,
                                                **sim_args)))


def program_result(compiled: CompiledProgram, runs: Iterable[tuple[Graph, SimRun]]) -> ProgramResult:
    """The program's result from its graphs' runs ``(graph, result)`` in order."""
    cycles: list[int] = []
    counters: list[dict] = []
    written: dict[str, TensorData] = {}
    overflows: dict[str, int] = {}
    records: list[Overflow] = []
    for g, res in runs:
        cycles.append(res.cycles)
        if getattr(res, "counters", None):
            counters.append(res.counters)
        overflows.update(graph_overflows(g.name, res))
        records += graph_overflow_records(g.name, res)
        written.update(res.outputs)
        written.update(converted_outputs(compiled, res.outputs))
    outs = {n: written[n] for n in compiled.program.result_names()}
    return ProgramResult(outs, cycles, counters, overflows, records, written)



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
    """numpy evaluation of every statement: inputs and every computed tensor by name
    (:func:`~fuseflow.compiler.evaluate.evaluate` with numpy arithmetic in ``dtype``): softmax
    normalises over the visited coordinates of each fibre (entries outside count as ``-inf``),
    layernorm over the whole fibre."""
    assert isinstance(program, Program)
    return evaluate(program, data, _NumpyArithmetic(dtype))


class _NumpyArithmetic:
    """The reference's arithmetic: numpy arrays of ``dtype``."""

    def __init__(self, dtype: type) -> None:
        self.dtype = dtype

    def leaf(self, name: str, value) -> np.ndarray:
        return np.asarray(dense_of(value), dtype=self.dtype)  # scipy sums a COO's duplicates

    def pattern(self, value):
        return value

    def unary(self, e: Unary, a: np.ndarray) -> np.ndarray:
        if e.op is UnOp.SCALE:
            return a * np.asarray(e.scalar, dtype=self.dtype)
        if e.op is UnOp.SHIFT:
            return a + np.asarray(e.scalar, dtype=self.dtype)
        return _NUMPY_UNARY[e.op.value](a).astype(self.dtype)

    def row(self, e: Unary, a: np.ndarray, axis: int, visited: np.ndarray | None) -> np.ndarray:
        return _row_function(e, a.astype(np.float64), axis, visited).astype(self.dtype)

    def reduce(self, op: Op, a: np.ndarray, ids: list[str], keep: list[str]) -> np.ndarray:
        if op is not Op.ADD:  # over every coordinate, implicit zeros included
            axes = tuple(k for k, i in enumerate(ids) if i not in keep)
            return (np.max if op is Op.MAX else np.min)(a, axis=axes)
        return np.einsum(a, [_sym(i) for i in ids], [_sym(i) for i in keep])

    def contract(self, a: np.ndarray, ia: list[str], b: np.ndarray, ib: list[str], keep: list[str]) -> np.ndarray:
        return np.einsum(a, [_sym(i) for i in ia], b, [_sym(i) for i in ib], [_sym(i) for i in keep])

    def binop(self, e: BinOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if e.op is Op.DIV:
            return _divide(a, b, e)
        return {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.MAX: np.maximum,
                Op.MIN: np.minimum}[e.op](a, b)

    expand = staticmethod(expand_axes)

    def store(self, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(a, shape).copy()


def _row_function(e: Unary, x: np.ndarray, ax: int, m: np.ndarray | None) -> np.ndarray:
    """softmax along axis ``ax`` of ``x`` over the visited ``m`` (a masked softmax); layernorm
    over the whole fibre."""
    if e.op is UnOp.SOFTMAX:
        visited = np.ones(x.shape, dtype=bool) if m is None else np.broadcast_to(m, x.shape)
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
