"""Level primitives: the root, level scanners and level / value writers."""

from __future__ import annotations

from dataclasses import dataclass

from ..tensor import Format
from .base import (
    LANES_DOC,
    NoParams,
    Ports,
    PrimitiveSpec,
    StreamKind,
    TensorUse,
    doc,
    lanes_problems,
)

C, R, V = StreamKind.CRD, StreamKind.REF, StreamKind.VAL


# The search of a skipping scanner (sw_sim.level.SkipScan, hw.level.Scan): its first
# SKIP_LINEAR probes are the next positions; it then gallops (1, 3, 7, ... positions ahead, then
# a binary search) only if the coordinates seen predict the target at least
# 2**SKIP_GALLOP_SHIFT * SKIP_LINEAR positions on; otherwise it keeps probing position by
# position, which never costs more than streaming there.
SKIP_LINEAR = 2
SKIP_GALLOP_SHIFT = 2


@dataclass(frozen=True)
class LevelParams:
    """What names one level of a tensor: the scanners' and the level writers' parameters."""

    tensor: str = doc("the tensor whose level this node reads (a scanner) or writes (a level writer)")
    level: int = doc("storage level (0 = outermost)")


@dataclass(frozen=True)
class ScanParams(LevelParams):
    skip: bool = doc("input skip takes coordinate-skip requests from an intersect (skip=true) and "
                     "jumps ahead by a search within the fiber; compressed levels only", False)
    offset: int = doc("dense levels: the first coordinate of each fiber emitted (a lane's share of a "
                      "split fiber: offset, offset + stride, ...)", 0)
    stride: int = doc("dense levels: the step between the coordinates emitted (the lanes of a split)", 1)

    def check(self) -> list[str]:
        bad = []
        if self.stride < 1:
            bad.append(f"stride={self.stride} must be at least 1")
        elif not 0 <= self.offset < self.stride:
            bad.append(f"offset={self.offset} must be in 0..stride-1 ({self.stride - 1})")
        return bad


def _scan_inputs(p) -> Ports:
    return {"ref": R, "skip": C} if p.skip else {"ref": R}


def _scan_in_graph(g, node) -> list[str]:
    """A skipping scanner reads a compressed level, and its skip requests come from the
    intersect that pops its own crd / ref streams (the freshness rule of the requests relies on
    it: see fuseflow.compiler.passes.skip)."""
    p = node.typed()
    if p.stride > 1 and g.tensors[p.tensor].fmt.levels[p.level] is not Format.DENSE:
        return [(f"parameters 'offset' / 'stride' split a dense level, and level {p.level} of tensor "
                 f"{p.tensor!r} is {g.tensors[p.tensor].fmt.levels[p.level].value}")]
    if not p.skip:
        return []
    fmt = g.tensors[p.tensor].fmt.levels[p.level]
    if fmt is not Format.COMPRESSED:
        return [(f"parameter 'skip' needs a compressed level, and level {p.level} of tensor "
                f"{p.tensor!r} is {fmt.value}")]
    drivers = g.driver()
    e = drivers.get(node["skip"])
    if e is None:
        return []  # reported as a dangling input
    src, i = g.nodes.get(e.src.node), e.src.port.removeprefix("skip")
    straight = (src is not None and src.kind.value == "intersect" and e.src.port.startswith("skip")
                and all(getattr(drivers.get(src[f"{port}{i}"]), "src", None) == node[port]
                        for port in ("crd", "ref")))
    if not straight:
        return [(f"input skip comes from {e.src}, which is not the skip output of an intersect whose "
                "matching crd and ref inputs this scanner drives")]
    return []


def _write_in_graph(g, node) -> list[str]:
    """A level writer fills a dense or compressed level (the compiler writes outputs in those;
    COO levels are input formats)."""
    p = node.typed()
    t = g.tensors.get(p.tensor)
    if t is None or not 0 <= p.level < t.fmt.order:
        return []  # reported by the tensor-use checks
    fmt = t.fmt.levels[p.level]
    if fmt in (Format.DENSE, Format.COMPRESSED):
        return []
    return [(f"level {p.level} of tensor {p.tensor!r} is {fmt.value}: a level writer fills dense or "
             "compressed levels only (write the result as CSR / DCSR and convert it on the host)")]


@dataclass(frozen=True)
class WriteParams(LevelParams):
    skip_empty: bool = doc("a stop closes a fiber only if a coordinate came since the last stop "
                           "(under a compressed parent whose empty fibers were dropped)", False)


@dataclass(frozen=True)
class ValsParams:
    tensor: str = doc("the tensor whose values this node reads or writes")
    lanes: int = doc(LANES_DOC + "; W lanes move the W values vals[p*W .. p*W+W-1] of position p", 1)

    def check(self) -> list[str]:
        return lanes_problems(self.lanes)


def vector_vals_in_graph(g, node) -> list[str]:
    """A vector load or values writer (lanes W > 1) moves the W values of one position of the
    tensor's parent level: its innermost level must be dense with W entries."""
    p = node.typed()
    if p.lanes == 1:
        return []
    spec = g.tensors[p.tensor]
    last = spec.fmt.order - 1
    if last < 0 or spec.fmt.levels[last] is not Format.DENSE or spec.level_dim(last) != p.lanes:
        what = (f"{spec.fmt.levels[last].value} with {spec.level_dim(last)} entries" if last >= 0
                else "missing (a scalar)")
        return [(f"lanes={p.lanes} moves the {p.lanes} values under one position, so the innermost level "
                 f"of tensor {p.tensor!r} must be dense with {p.lanes} entries; it is {what}")]
    return []


DECLARATIONS = (
    PrimitiveSpec("root", "level", NoParams, lambda p: {}, lambda p: {"ref": R},
                  "emits the root reference stream 0,D after start", source=True,
                  nesting=lambda p, lv: {"ref": 0}),
    PrimitiveSpec("scan", "level", ScanParams, _scan_inputs, lambda p: {"crd": C, "ref": R},
                  "level scanner (format from the tensor): ref -> fiber crd/ref", latency=2,
                  tensor=TensorUse.READS_LEVEL, feedback=("skip",), graph_check=_scan_in_graph,
                  nesting=lambda p, lv: {"crd": lv["ref"] + 1, "ref": lv["ref"] + 1}),
    PrimitiveSpec("write", "level", WriteParams, lambda p: {"crd": C}, lambda p: {},
                  "level writer: fills seg/crd of a compressed level", tensor=TensorUse.WRITES_LEVEL,
                  graph_check=_write_in_graph),
    PrimitiveSpec("vals_write", "level", ValsParams, lambda p: {"val": V}, lambda p: {},
                  "values writer: fills vals (W lanes: W values per token)", tensor=TensorUse.WRITES_VALS,
                  graph_check=vector_vals_in_graph),
)
