"""Checks of tensor data handed to the simulators: level arrays that do not describe a tensor
are an error naming the tensor, level, index and value, before any cycle is simulated."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .samml import Graph, GraphError
from .tensor import Format, TensorData

__all__ = ["check_inputs", "require_valid_inputs", "tensor_problems"]


def tensor_problems(self: TensorData) -> list[str]:
    """What is wrong with the level arrays (empty when they are consistent): per compressed
    level, ``seg`` starts at 0, never decreases and ends at ``len(crd)``, has one entry per
    parent position plus one; coordinates lie in the level's dimension and increase strictly
    within each segment; ``vals`` has one entry per stored position and no NaN."""
    out: list[str] = []
    if len(self.shape) != self.fmt.order:
        return [f"shape {tuple(self.shape)} has {len(self.shape)} dimensions, format {self.fmt} {self.fmt.order}"]
    if any(int(d) < 0 for d in self.shape):
        return [f"shape {tuple(self.shape)} has a negative dimension"]
    stored = [int(self.shape[m]) for m in self.fmt.mode_order]
    parents = 1
    for lvl, f in enumerate(self.fmt.levels):
        if f is Format.DENSE:
            parents *= stored[lvl]
            continue
        if lvl >= len(self.seg) or lvl >= len(self.crd) or self.seg[lvl] is None or self.crd[lvl] is None:
            return [f"level {lvl} is compressed but has no seg/crd arrays"]
        seg, crd = np.asarray(self.seg[lvl]), np.asarray(self.crd[lvl])
        if seg.ndim != 1 or crd.ndim != 1 or not (np.issubdtype(seg.dtype, np.integer) or seg.size == 0) \
                or not (np.issubdtype(crd.dtype, np.integer) or crd.size == 0):
            return [f"level {lvl}: seg and crd must be 1-D integer arrays"]
        if len(seg) != parents + 1:
            return [f"level {lvl}: seg has {len(seg)} entries, expected {parents + 1} (one per parent position, plus one)"]
        steps = np.diff(seg)
        if seg[0] != 0 or (steps < 0).any() or seg[-1] != len(crd):
            bad = "seg[0] is not 0" if seg[0] != 0 else (
                f"seg decreases at entry {int(np.flatnonzero(steps < 0)[0]) + 1}" if (steps < 0).any()
                else f"seg ends at {int(seg[-1])}, but crd has {len(crd)} entries")
            return [f"level {lvl}: {bad}"]
        if crd.size and (crd.min() < 0 or crd.max() >= stored[lvl]):
            i = int(np.flatnonzero((crd < 0) | (crd >= stored[lvl]))[0])
            out.append(f"level {lvl}: crd[{i}] = {int(crd[i])} is outside the dimension 0..{stored[lvl] - 1}")
        inside = np.ones(max(len(crd) - 1, 0), dtype=bool)
        inside[seg[1:-1][(seg[1:-1] > 0) & (seg[1:-1] < len(crd))] - 1] = False  # segment starts
        down = np.flatnonzero((np.diff(crd) <= 0) & inside) if crd.size > 1 else np.zeros(0, int)
        if down.size:
            i = int(down[0]) + 1
            out.append(f"level {lvl}: crd[{i}] = {int(crd[i])} does not increase within its segment "
                       f"(after {int(crd[i - 1])})")
        parents = len(crd)
    vals = np.asarray(self.vals)
    if vals.ndim != 1 or len(vals) != parents:
        out.append(f"vals has {vals.size} entries, expected {parents} (one per stored position)")
    elif np.issubdtype(vals.dtype, np.floating) and np.isnan(vals).any():
        out.append(f"vals[{int(np.flatnonzero(np.isnan(vals))[0])}] is NaN")
    return out


def check_inputs(graph: Graph, data: Mapping[str, TensorData]) -> list[str]:
    """Problems of the input tensors of ``graph`` in ``data`` (those present and of the declared
    format; :meth:`Graph.verify` reports missing ones and format mismatches)."""
    out = []
    for name in graph.input_tensors():
        td = data.get(name)
        if td is not None and td.fmt == graph.tensors[name].fmt:
            out += [f"tensor {name!r}: {p}" for p in tensor_problems(td)]
    return out


def require_valid_inputs(graph: Graph, data: Mapping[str, TensorData]) -> None:
    """:meth:`Graph.verify` with ``data``, then :func:`check_inputs`: a :class:`GraphError`
    listing every problem."""
    graph.verify(data)
    problems = check_inputs(graph, data)
    if problems:
        raise GraphError(f"graph {graph.name!r}: invalid input data:\n  - " + "\n  - ".join(problems))
