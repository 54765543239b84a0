"""Memory primitives: value loads from a tensor's values array."""

from __future__ import annotations

from .base import PrimitiveSpec, StreamKind, TensorUse
from .level import ValsParams, vector_vals_in_graph

DECLARATIONS = (
    PrimitiveSpec("array_load", "memory", ValsParams, lambda p: {"ref": StreamKind.REF},
                  lambda p: {"val": StreamKind.VAL},
                  "value load vals[ref] (block-RAM read, then a register); N -> 0; W lanes: "
                  "vals[ref*W+l], l < W, from a W-lane-wide memory", latency=2,
                  tensor=TensorUse.READS_VALS, graph_check=vector_vals_in_graph),
)
