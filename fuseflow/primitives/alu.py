"""Value arithmetic: the ALU (binary, and unary / nonlinear functions) and fiber reduction."""

from __future__ import annotations

from dataclasses import dataclass

from .base import UNARY_ALU_OPS, AluOp, PrimitiveSpec, ReduceOp, StreamKind, alu_latency, doc

V = StreamKind.VAL


@dataclass(frozen=True)
class AluParams:
    op: AluOp = doc("operation; unary ops (relu, neg, exp, ...) read port a only")
    scalar: float = doc("the constant of add_scalar / mul_scalar", 0.0)


@dataclass(frozen=True)
class ReduceParams:
    op: ReduceOp = doc("reduction")


def _alu_inputs(p):
    return {"a": V} if p.op in UNARY_ALU_OPS else {"a": V, "b": V}


def _alu_latency(p) -> int:
    return 2 if p.op in UNARY_ALU_OPS else alu_latency(p.op)


DECLARATIONS = (
    PrimitiveSpec("alu", "alu", AluParams, _alu_inputs, lambda p: {"val": V},
                  "ALU: binary over two aligned value streams (a, b) or unary (a); latency by op",
                  latency=_alu_latency),
    PrimitiveSpec("reduce", "alu", ReduceParams, lambda p: {"val": V}, lambda p: {"val": V},
                  "reduces each innermost fiber to one value",
                  nesting=lambda p, lv: {"val": lv["val"] - 1}),
)
