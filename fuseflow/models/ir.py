"""The model IR that the PyTorch frontend fills (:mod:`fuseflow.models.frontend`) and the model
planner (:mod:`fuseflow.models.plan`) reads: a small list of tensor ops with shapes, sparse
format annotations and constants.  It needs no torch."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["FrontendError", "MKind", "MNode", "ModelIR", "check_format_names"]


class FrontendError(ValueError):
    """A model the frontend cannot translate; the message names the op and its source line."""


class MKind(enum.Enum):
    INPUT = "input"
    EINSUM = "einsum"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    SCALE = "scale"
    ADD_SCALAR = "add_scalar"
    UNARY = "unary"
    SOFTMAX = "softmax"
    LAYERNORM = "layernorm"
    MAX = "max"
    MASK = "mask"
    RESHAPE = "reshape"
    DIV = "div"  # tensor / tensor (the divisor stored densely)
    MAXIMUM = "maximum"  # elementwise max / min of two tensors
    MINIMUM = "minimum"
    HOST = "host"  # a graph break: attrs["fn"] runs the op on the host (numpy in, numpy out)


@dataclass
class MNode:
    name: str
    kind: MKind
    args: tuple[str, ...]
    shape: tuple[int, ...]
    region: str
    source: str
    attrs: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        a = ", ".join(self.args)
        extra = "".join(f", {k}={v}" for k, v in self.attrs.items() if not callable(v))
        return f"{self.name}{list(self.shape)} = {self.kind.value}({a}{extra})  [{self.region}]"


@dataclass
class ModelIR:
    """Traced model: nodes in execution order, input data, formats of the sparse inputs."""

    name: str
    nodes: list[MNode]
    data: dict[str, np.ndarray]  # every INPUT node (inputs, parameters, buffers), dense float64
    formats: dict[str, str]  # INPUT name -> compiler format name; absent means dense
    outputs: list[str]
    reference: dict[str, np.ndarray] = field(default_factory=dict)  # PyTorch values (fx capture)
    notes: list[str] = field(default_factory=list)  # what capture converted (BSR -> CSR, ...)
    capture: str = "torch.export"  # or "torch.fx" (the fallback), "torch.compile (graph breaks)"
    # integer inputs (a graph's edge_index) compiled in as constants: name -> the traced value;
    # gathers / scatters by them are sparse matrices of the IR, so other values need a new trace
    fixed_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    # sparse inputs whose sparsity pattern is compiled in (adj.indices(), torch.sparse.softmax):
    # name -> (indptr, indices) of the traced CSR pattern; new values must keep it
    fixed_patterns: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def node(self, name: str) -> MNode:
        return self._by_name[name]

    def __post_init__(self) -> None:
        # nodes whose values reach no output (what the capture's decompositions leave of an
        # unused value: a graph with nothing to write) are dropped; inputs stay, and host steps
        # with what they read (a graph break's guard checks the branch the capture took)
        live = set(self.outputs) | {n.name for n in self.nodes if n.kind is MKind.HOST}
        for n in reversed(self.nodes):
            if n.name in live:
                live.update(n.args)
        self.nodes = [n for n in self.nodes if n.kind is MKind.INPUT or n.name in live]
        self._by_name = {n.name: n for n in self.nodes}

    def users(self, name: str) -> list[MNode]:
        return [n for n in self.nodes if name in n.args]

    def text(self) -> str:
        return "\n".join(str(n) for n in self.nodes) + f"\noutputs: {', '.join(self.outputs)}"


def check_format_names(module, inputs, fmts) -> None:
    """Every name of a formats annotation (dots written as ``_``) is an input, parameter or
    buffer of ``module``; otherwise a :class:`FrontendError` naming it and the known names."""
    known = {n.replace(".", "_") for n, _ in module.named_parameters()} | \
        {n.replace(".", "_") for n, _ in module.named_buffers()} | set(inputs)
    for k in fmts:
        if k not in known:
            raise FrontendError(f"formats annotation names {k!r}, which is not an input, parameter or "
                                f"buffer of {type(module).__name__}; known: {sorted(known)}")
