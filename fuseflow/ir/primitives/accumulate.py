"""Sparse accumulators of order 1 and 2.

``buffers``: 1 keeps one bank of sums (accumulate an outer fiber, then flush it; the phases
do not overlap).  2 keeps two banks: while one flushes fiber k in coordinate order, the other
accumulates fiber k+1.  Fiber k+1's end (its closing stops at the input heads) waits until
fiber k's flush ends: the banks swap in the cycle that emits fiber k's stop, or later.  The
output stream is the same token for token; only the timing differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import LANES_DOC, PrimitiveSpec, ReduceOp, StreamKind, doc, lanes_problems

C, V = StreamKind.CRD, StreamKind.VAL

BUFFERS_DOC = ("banks of sums: 1 accumulates a fiber, then flushes it; 2 flushes a fiber while "
               "the next one accumulates (twice the sum words)")


def _buffers_problems(buffers: int) -> list[str]:
    return [] if buffers in (1, 2) else [f"buffers={buffers} must be 1 or 2"]


@dataclass(frozen=True)
class SpAcc1Params:
    dim: int = doc("size of the accumulated (inner) dimension")
    op: ReduceOp = doc("accumulation", ReduceOp.ADD)
    buffers: int = doc(BUFFERS_DOC, 1)
    lanes: int = doc(LANES_DOC + "; sums kept lanewise, W lanes per word", 1)

    def check(self) -> list[str]:
        dim = [] if self.dim >= 1 else [f"dim={self.dim} must be at least 1"]
        return dim + _buffers_problems(self.buffers) + lanes_problems(self.lanes)


@dataclass(frozen=True)
class SpAcc2Params:
    dim0: int = doc("size of the first accumulated dimension")
    dim1: int = doc("size of the second accumulated dimension")
    op: ReduceOp = doc("accumulation", ReduceOp.ADD)
    buffers: int = doc(BUFFERS_DOC, 1)

    def check(self) -> list[str]:
        dims = [f"{k}={v} must be at least 1" for k, v in (("dim0", self.dim0), ("dim1", self.dim1)) if v < 1]
        return dims + _buffers_problems(self.buffers)


@dataclass(frozen=True)
class Merge2Params:
    op: ReduceOp = doc("how two values at the same (i, j) combine (max: a coordinate one side "
                       "lacks keeps the other side's value)", ReduceOp.ADD)


# the two sides of a merge2: ``<port>_a`` and ``<port>_b``
MERGE2_SIDES = ("a", "b")


DECLARATIONS = (
    PrimitiveSpec("spacc1", "accumulate", SpAcc1Params,
                  lambda p: {"outer": C, "inner": C, "val": V}, lambda p: {"crd": C, "val": V},
                  "sparse accumulator, order 1 (inner dimension dim)",
                  nesting=lambda p, lv: {"crd": lv["inner"] - 1, "val": lv["inner"] - 1}),
    PrimitiveSpec("spacc2", "accumulate", SpAcc2Params,
                  lambda p: {"outer": C, "inner0": C, "inner1": C, "val": V},
                  lambda p: {"crd0": C, "crd1": C, "val": V},
                  "sparse accumulator, order 2 (inner dimensions dim0 x dim1)",
                  nesting=lambda p, lv: {"crd0": lv["inner0"] - 1, "crd1": lv["inner1"] - 1,
                                         "val": lv["inner1"] - 1}),
    PrimitiveSpec("merge2", "accumulate", Merge2Params,
                  lambda p: {f"{port}_{s}": k for s in MERGE2_SIDES
                             for port, k in (("crd0", C), ("crd1", C), ("val", V))},
                  lambda p: {"crd0": C, "crd1": C, "val": V},
                  "merge of two order-2 sparse results (as spacc2 emits them) in (i, j) order, "
                  "the values at the same (i, j) combined by op",
                  nesting=lambda p, lv: {"crd0": lv["crd0_a"], "crd1": lv["crd1_a"], "val": lv["crd1_a"]}),
)
