"""The values of the ATen lowering (:mod:`fuseflow.models.export_trace`, the op table
:mod:`fuseflow.models.aten_ops`): tensors with their stored and virtual axes, constants,
tuple-valued ops, and the graph-break signal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["_C", "_G", "_T", "_Multi", "_Unsupported", "_letters", "_scalar"]


@dataclass(frozen=True)
class _T:
    """A tensor value: IR tensor ``name`` holds the ATen axes ``keep`` (ascending) of a tensor
    of ATen shape ``shape``; the other axes are virtual (the value is constant along them)."""

    name: str
    shape: tuple[int, ...]
    keep: tuple[int, ...]
    dtype: Any
    inverted: bool = False  # ~mask of a boolean input, not materialised
    sqrt: bool = False  # sqrt(name): only a divisor or a reciprocal takes it (as rsqrt)

    @property
    def full(self) -> bool:
        return self.keep == tuple(range(len(self.shape)))

    @property
    def ir_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[a] for a in self.keep)


@dataclass(frozen=True)
class _C:
    """A constant (folded from constant-only ops, or a lifted tensor constant)."""

    value: torch.Tensor


@dataclass(frozen=True)
class _Multi:
    """A tuple-valued op not yet indexed (``getitem`` picks one output)."""

    node: Any
    args: tuple
    kwargs: dict
    parts: tuple | None = None  # per-output values when the op is a split


@dataclass(frozen=True)
class _G:
    """A gather by a constant index not yet materialised (message passing's ``x_j``): row
    ``index[e]`` of node tensor ``src`` (its first axis), times the constant per-edge
    ``weight[e]`` (None: 1).  A scatter-add of it by a constant destination index is one
    product with the sparse matrix ``A[dst[e], index[e]] += weight[e]`` (an SpMM over the
    adjacency made from ``edge_index``); any other use materialises it as the product of a 0/1
    (weighted) selection matrix with ``src``."""

    src: _T
    index: torch.Tensor  # (E,) int64
    weight: torch.Tensor | None = None  # (E,) float64

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.index.numel()),) + tuple(self.src.shape[1:])

    @property
    def dtype(self) -> Any:
        return self.src.dtype


class _Unsupported(Exception):
    """The op has no dataflow form here: it becomes a host node (graph break)."""


def _letters(n: int, skip: str = "") -> str:
    return "".join(c for c in "abcdefghijklmnopqrstuvwxyz" if c not in skip)[:n]


def _scalar(v) -> float | None:
    """A Python number, or a one-element constant, as a float; None for anything else."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, _C) and v.value.numel() == 1 and v.value.dtype != torch.bool:
        return float(v.value.reshape(()))
    return None


