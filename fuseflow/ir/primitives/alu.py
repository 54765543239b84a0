"""Value arithmetic: the ALU (binary, and unary / nonlinear functions) and fiber reduction."""

from __future__ import annotations

from dataclasses import dataclass

from .base import (
    LANES_DOC,
    UNARY_ALU_OPS,
    AluOp,
    PrimitiveSpec,
    ReduceOp,
    ScalarPort,
    StreamKind,
    alu_latency,
    doc,
    lanes_problems,
)

V = StreamKind.VAL


@dataclass(frozen=True)
class AluParams:
    op: AluOp = doc("operation; unary ops (relu, neg, exp, ...) read port a only")
    scalar: float = doc("the constant of add_scalar / mul_scalar", 0.0)
    lanes: int = doc(LANES_DOC + "; lanewise operation", 1)
    scalar_port: ScalarPort = doc("a binary op's operand that carries one value per token, used for "
                                  "every lane (none: both are vectors of lanes values)", ScalarPort.NONE)
    identity_empty: bool = doc("max / min: an empty operand (N) is the op's identity, so the result is "
                               "the other operand (a merge of partial maxima, where a coordinate one "
                               "side lacks is not a 0); else N counts as 0", False)

    def check(self) -> list[str]:
        bad = lanes_problems(self.lanes)
        if self.identity_empty and self.op not in (AluOp.MAX, AluOp.MIN):
            bad.append(f"identity_empty needs op max or min, not {self.op.value}")
        if self.identity_empty and self.scalar_port is not ScalarPort.NONE:
            bad.append("identity_empty needs operands of the same width (no scalar_port)")
        if self.scalar_port is not ScalarPort.NONE:
            if self.op in UNARY_ALU_OPS:
                bad.append(f"scalar_port={self.scalar_port.value} needs a binary op, not {self.op.value}")
            elif self.lanes == 1:
                bad.append(f"scalar_port={self.scalar_port.value} needs a vector (lanes > 1)")
        return bad


@dataclass(frozen=True)
class ReduceParams:
    op: ReduceOp = doc("reduction")
    lanes: int = doc(LANES_DOC + "; lanewise reduction", 1)
    nonempty: bool = doc("a stop ``Sk`` (k >= 1) with no token since the last stop (a bare stop: an "
                         "empty outer fibre) gives ``S(k-1)`` and no value; for reductions whose fibres "
                         "are never empty (a dense reduced row) under sparse outer rows", False)

    def check(self) -> list[str]:
        return lanes_problems(self.lanes)


@dataclass(frozen=True)
class LaneReduceParams:
    op: ReduceOp = doc("reduction across the lanes of each vector (a pairwise tree: "
                       "(l0 op l1) op (l2 op l3) ...)")
    lanes: int = doc("lanes of the input vectors (2 to 64, a power of two)")

    def check(self) -> list[str]:
        bad = lanes_problems(self.lanes)
        if not bad and self.lanes < 2:
            bad.append(f"lanes={self.lanes}: a lane reduction takes vectors of 2 lanes or more")
        return bad


def lane_reduce_latency(p) -> int:
    """The adder tree's latency: the input register, then one registered level per halving."""
    return 1 + max(int(p.lanes), 1).bit_length() - 1


def _alu_inputs(p):
    return {"a": V} if p.op in UNARY_ALU_OPS else {"a": V, "b": V}


def _alu_lanes(p):
    scalar = ScalarPort(p.scalar_port) if isinstance(p.scalar_port, str) else p.scalar_port
    ins = {q: 1 if scalar.value == q else p.lanes for q in _alu_inputs(p)}
    return ins, {"val": p.lanes}


def _alu_latency(p) -> int:
    return 2 if p.op in UNARY_ALU_OPS else alu_latency(p.op)


DECLARATIONS = (
    PrimitiveSpec("alu", "alu", AluParams, _alu_inputs, lambda p: {"val": V},
                  "ALU: binary over two aligned value streams (a, b) or unary (a); latency by op",
                  latency=_alu_latency, lanes=_alu_lanes),
    PrimitiveSpec("reduce", "alu", ReduceParams, lambda p: {"val": V}, lambda p: {"val": V},
                  "reduces each innermost fiber to one value (vectors: lanewise)",
                  nesting=lambda p, lv: {"val": lv["val"] - 1}),
    PrimitiveSpec("lane_reduce", "alu", LaneReduceParams, lambda p: {"val": V}, lambda p: {"val": V},
                  "reduces each vector's lanes to one value (a pipelined tree); control tokens pass "
                  "in order, N -> 0", latency=lane_reduce_latency, latency_doc="1 + log2(lanes)",
                  lanes=lambda p: ({"val": p.lanes}, {"val": 1})),
)
