"""Coordinate-mask predicates for attention (causal, band/window, block pattern), written once
and used by sw_sim's and hw's ``crd_mask`` primitives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .primitives import PRIMITIVES, MaskPred, NodeKind, ParamError

__all__ = ["mask_keep", "mask_params"]


def mask_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Coordinate-mask parameters (``pred``, ``before``, ``after``, ``block``, ``pattern``) of
    node ``name``, typed and checked by the ``crd_mask`` declaration; ValueError names the node
    and every problem."""
    spec = PRIMITIVES[NodeKind("crd_mask")]
    try:
        p = spec.typed({k: params[k] for k in spec.hints() if k in params})
    except ParamError as exc:
        raise ValueError("; ".join(f"node {name!r} (crd_mask): {m}" for m in exc.problems)) from None
    return {f.name: getattr(p, f.name) for f in spec.fields()}


def mask_keep(pred: MaskPred, i: int, j: int, *, before: int = 0, after: int = 0, block: int = 1,
              pattern: tuple[tuple[int, ...], ...] = ()) -> bool:
    """Whether the entry (outer ``i``, inner ``j``) survives the mask.  Block coordinates outside
    ``pattern`` are masked."""
    if pred is MaskPred.CAUSAL:
        return j <= i
    if pred is MaskPred.BAND:
        return i - before <= j <= i + after
    bi, bj = i // block, j // block
    return bi < len(pattern) and bj < len(pattern[0]) and pattern[bi][bj] != 0
