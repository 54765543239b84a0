"""Sparse accumulators of order 1 and 2."""

from __future__ import annotations

from dataclasses import dataclass

from .base import PrimitiveSpec, ReduceOp, StreamKind, doc

C, V = StreamKind.CRD, StreamKind.VAL


@dataclass(frozen=True)
class SpAcc1Params:
    dim: int = doc("size of the accumulated (inner) dimension")
    op: ReduceOp = doc("accumulation", ReduceOp.ADD)

    def check(self) -> list[str]:
        return [] if self.dim >= 1 else [f"dim={self.dim} must be at least 1"]


@dataclass(frozen=True)
class SpAcc2Params:
    dim0: int = doc("size of the first accumulated dimension")
    dim1: int = doc("size of the second accumulated dimension")
    op: ReduceOp = doc("accumulation", ReduceOp.ADD)

    def check(self) -> list[str]:
        return [f"{k}={v} must be at least 1" for k, v in (("dim0", self.dim0), ("dim1", self.dim1)) if v < 1]


DECLARATIONS = (
    PrimitiveSpec("spacc1", "accumulate", SpAcc1Params,
                  lambda p: {"outer": C, "inner": C, "val": V}, lambda p: {"crd": C, "val": V},
                  "sparse accumulator, order 1 (inner dimension dim)"),
    PrimitiveSpec("spacc2", "accumulate", SpAcc2Params,
                  lambda p: {"outer": C, "inner0": C, "inner1": C, "val": V},
                  lambda p: {"crd0": C, "crd1": C, "val": V},
                  "sparse accumulator, order 2 (inner dimensions dim0 x dim1)"),
)
