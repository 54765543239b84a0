"""Coordinate-mask predicates for attention (causal, band/window, block pattern), written once
and used by sw_sim's and hw's ``crd_mask`` primitives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .samml import MaskPred

__all__ = ["mask_keep", "mask_params"]


def mask_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Checked coordinate-mask parameters (``pred``, ``before``, ``after``, ``block``, ``pattern``)."""
    pred = params["pred"]
    pred = MaskPred(pred) if isinstance(pred, str) else pred
    where = f"node {name!r} (crd_mask {pred.value})"
    before, after, block = int(params.get("before", 0)), int(params.get("after", 0)), int(params.get("block", 1))
    pattern = tuple(tuple(int(bool(x)) for x in row) for row in params.get("pattern", ()))
    if pred is MaskPred.BAND and (before < 0 or after < 0):
        raise ValueError(f"{where}: before={before} and after={after} must be >= 0")
    if pred is MaskPred.BLOCK:
        if block < 1 or block & (block - 1):
            raise ValueError(f"{where}: block={block} must be a power of two")
        if not pattern or len({len(r) for r in pattern}) != 1 or not pattern[0]:
            raise ValueError(f"{where}: pattern must be a non-empty rectangular 0/1 matrix, got {pattern!r}")
    return {"pred": pred, "before": before, "after": after, "block": block, "pattern": pattern}


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
