"""Level primitives: the root, level scanners and level / value writers."""

from __future__ import annotations

from dataclasses import dataclass

from .base import NoParams, PrimitiveSpec, StreamKind, TensorUse, doc

C, R, V = StreamKind.CRD, StreamKind.REF, StreamKind.VAL


@dataclass(frozen=True)
class LevelParams:
    tensor: str = doc("the tensor whose level this node reads")
    level: int = doc("storage level (0 = outermost)")


@dataclass(frozen=True)
class WriteParams:
    tensor: str = doc("the output tensor")
    level: int = doc("storage level (0 = outermost)")
    skip_empty: bool = doc("a stop closes a fiber only if a coordinate came since the last stop "
                           "(under a compressed parent whose empty fibers were dropped)", False)


@dataclass(frozen=True)
class ValsParams:
    tensor: str = doc("the tensor whose values this node reads or writes")


DECLARATIONS = (
    PrimitiveSpec("root", "level", NoParams, lambda p: {}, lambda p: {"ref": R},
                  "emits the root reference stream 0,D after start", source=True),
    PrimitiveSpec("scan", "level", LevelParams, lambda p: {"ref": R}, lambda p: {"crd": C, "ref": R},
                  "level scanner (format from the tensor): ref -> fiber crd/ref", latency=2,
                  tensor=TensorUse.READS_LEVEL),
    PrimitiveSpec("write", "level", WriteParams, lambda p: {"crd": C}, lambda p: {},
                  "level writer: fills seg/crd of a compressed level", tensor=TensorUse.WRITES_LEVEL),
    PrimitiveSpec("vals_write", "level", ValsParams, lambda p: {"val": V}, lambda p: {},
                  "values writer: fills vals", tensor=TensorUse.WRITES_VALS),
)
