"""Run a compiled program in sw_sim: every graph in order, intermediates handed from the graph
that writes them to the graphs that read them, permuted copies made on the host."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..tensor import TensorData, TensorFormat
from .codegen import CompiledProgram
from .program import ProgramError

__all__ = ["ProgramResult", "reference", "run_program"]


@dataclass
class ProgramResult:
    outputs: dict[str, TensorData]
    cycles: list[int]  # per graph, in order

    @property
    def total_cycles(self) -> int:
        return sum(self.cycles)

    def dense(self, name: str) -> np.ndarray:
        return self.outputs[name].to_dense()


def _as_data(name: str, value: np.ndarray | TensorData, fmt: TensorFormat,
             shape: tuple[int, ...]) -> TensorData:
    if isinstance(value, TensorData):
        if value.fmt == fmt:
            return value
        value = value.to_dense()
    arr = np.asarray(value)
    if tuple(arr.shape) != tuple(shape):
        raise ProgramError(f"input {name!r}: data shape {tuple(arr.shape)} != declared {shape}")
    return TensorData.from_dense(arr, fmt)


def run_program(compiled: CompiledProgram, data: Mapping[str, np.ndarray | TensorData],
                **sim_args) -> ProgramResult:
    """Simulate every graph; ``data`` maps input names to dense arrays (or TensorData)."""
    from sw_sim import run_graph

    program = compiled.program
    missing = [n for n in program.inputs() if n not in data]
    if missing:
        raise ProgramError(f"program {program.name!r}: no data for inputs {missing}")
    tensors: dict[str, TensorData] = {}
    for n in program.inputs():
        d = program.decls[n]
        tensors[n] = _as_data(n, data[n], d.fmt, d.shape)
    for name, value in compiled.consts.items():
        tensors[name] = TensorData.from_dense(np.array(value), TensorFormat(()))
    for p in compiled.permuted:  # host-side reformat: the primitive set has no sorter
        src = tensors[p.source]
        tensors[p.name] = TensorData.from_dense(src.to_dense(), p.fmt)
    cycles: list[int] = []
    for cg in compiled.groups:
        g = cg.graph
        inputs = {t: tensors[t] for t in g.input_tensors()}
        # factored graphs carry values on reference ports (see verify_routing); everything else
        # in them was verified at compile time
        res = run_graph(g, inputs, **({"verify": False} if cg.value_routing else {}), **sim_args)
        cycles.append(res.cycles)
        tensors.update(res.outputs)
        for p in compiled.permuted:
            if p.source in res.outputs:
                tensors[p.name] = TensorData.from_dense(res.outputs[p.source].to_dense(), p.fmt)
    outs = {n: tensors[n] for n in program.result_names()}
    return ProgramResult(outs, cycles)


def reference(compiled_or_program, data: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """numpy evaluation of the program's statements (the independent reference)."""
    from .program import Access, BinOp, Const, Op, Program, Sum

    program: Program = getattr(compiled_or_program, "program", compiled_or_program)
    env = {n: np.asarray(v.to_dense() if isinstance(v, TensorData) else v, dtype=np.int64)
           for n, v in data.items()}

    def ev(e, idx_sizes) -> tuple[np.ndarray, list[str]]:
        if isinstance(e, Access):
            return env[e.tensor], list(e.indices)
        if isinstance(e, Const):
            return np.array(e.value, dtype=np.int64), []
        if isinstance(e, Sum):
            arr, ids = ev(e.body, idx_sizes)
            keep = [i for i in ids if i not in e.indices]
            return np.einsum(arr, [_sym(i) for i in ids], [_sym(i) for i in keep]), keep
        assert isinstance(e, BinOp)
        a, ia = ev(e.lhs, idx_sizes)
        b, ib = ev(e.rhs, idx_sizes)
        ids = list(dict.fromkeys(ia + ib))
        a2 = _expand(a, ia, ids)
        b2 = _expand(b, ib, ids)
        fn = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply}[e.op]
        return fn(a2, b2), ids

    for s in program.statements:
        arr, ids = ev(s.rhs, {})
        shape = program.decls[s.out].shape
        full = _expand(arr, ids, list(s.indices))
        env[s.out] = np.broadcast_to(full, shape).copy()
    return {n: env[n] for n in program.result_names()}


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
