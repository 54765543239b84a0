"""Output tensors from their writers' arrays, banked ones assembled from their banks.

A *banked* output (``Graph.banks``, made by the ``par`` pass) is written by one set of writers
per lane of the graph's outermost split: lane ``k`` writes bank ``k``, a tensor of the same
format whose level 0 is dense and counts the lane's items.  The split deals the items of its
one fibre round-robin (item ``t`` to lane ``t mod n``, the lane's item ``t div n``), and the
items are the positions of the output's level 0 (its own writer's coordinates, or every
coordinate of a dense level 0).  So the tensor is rebuilt by walking its level-0 positions in
order and copying each one's subtree (levels 1 and below, and the values) from its bank; that
is what the serializer would have sent to one writer.  The level-0 arrays stay the output's
own (written unbanked, before the split).

:func:`assemble_outputs` is the one place every backend (sw_sim, the RTL's readback, the
board's host) turns written arrays into tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from .samml import Graph, Role
from .tensor import Format, TensorData, TensorFormat

__all__ = ["BankError", "Written", "assemble_outputs", "bank_format", "outputs_from_arrays", "written_tensors"]


class BankError(ValueError):
    """Banks that do not fit together (an item missing from its bank): a hardware or
    simulation fault, named with the tensor and the bank."""


@dataclass
class Written:
    """The arrays a tensor's writers filled: ``seg`` / ``crd`` per level (None where a level has
    none or nothing wrote it) and ``vals`` (None: no values writer)."""

    segs: list = field(default_factory=list)
    crds: list = field(default_factory=list)
    vals: object = None


def bank_format(fmt: TensorFormat) -> TensorFormat:
    """A bank's format: the tensor's with level 0 dense (the lane's items, counted)."""
    return replace(fmt, levels=(Format.DENSE, *fmt.levels[1:]))


def assemble_outputs(graph: Graph, written: Mapping[str, Written]) -> dict[str, TensorData]:
    """The graph's outputs (:meth:`Graph.output_tensors`) from ``written`` (every output-role
    tensor's arrays, banks included)."""
    out: dict[str, TensorData] = {}
    for name in graph.output_tensors():
        spec = graph.tensors[name]
        w = written[name]
        if name in graph.banks:
            segs, crds, vals = _merge(graph, name, w, [written[b] for b in graph.banks[name]])
        else:
            segs, crds, vals = list(w.segs), list(w.crds), w.vals
        if vals is None:
            raise ValueError(f"output tensor {name!r} has no values writer")
        out[name] = TensorData(spec.shape, spec.fmt, segs, crds, np.asarray(vals), spec.block)
    return out


def _children(f: Format, seg, dim: int, p: int) -> range:
    if f.has_seg:
        return range(int(seg[p]), int(seg[p + 1]))
    if f is Format.SINGLETON:
        return range(p, p + 1)
    return range(p * dim, (p + 1) * dim)


def _merge(graph: Graph, name: str, top: Written, banks: list[Written]) -> tuple[list, list, object]:
    spec = graph.tensors[name]
    fmt, n = spec.fmt, len(banks)
    order = fmt.order
    segs: list = [None] * order
    crds: list = [None] * order
    segs[0], crds[0] = (top.segs[0] if top.segs else None), (top.crds[0] if top.crds else None)
    items = len(crds[0]) if fmt.levels[0] is not Format.DENSE else spec.level_dim(0)
    if fmt.levels[0] is not Format.DENSE and crds[0] is None:
        raise BankError(f"banked output {name!r}: its level 0 was not written")
    # (bank, position in the bank's level) of every position of the current level, in order
    cur = [(t % n, t // n) for t in range(items)]
    for b, bank in enumerate(banks):  # each bank holds exactly its lane's items
        want = len(range(b, items, n))
        if order > 1 and fmt.levels[1].has_seg:
            have = len(bank.segs[1]) - 1 if bank.segs[1] is not None else 0
            if have < want:
                raise BankError(f"banked output {name!r}: bank {b} ({graph.banks[name][b]}) holds {have} "
                                f"items, its lane was dealt {want}")
    for lv in range(1, order):
        f, dim = fmt.levels[lv], spec.level_dim(lv)
        nxt: list[tuple[int, int]] = []
        seg = [0]
        crd: list[int] = []
        for b, p in cur:
            kids = _children(f, banks[b].segs[lv], dim, p)
            nxt += [(b, c) for c in kids]
            if f.has_crd:
                crd += [int(banks[b].crds[lv][c]) for c in kids]
            seg.append(seg[-1] + len(kids))
        if f.has_seg:
            segs[lv] = np.asarray(seg, dtype=np.int64)
        if f.has_crd:
            crds[lv] = np.asarray(crd, dtype=np.int64)
        cur = nxt
    if any(bank.vals is None for bank in banks):
        return segs, crds, None
    vals = [np.asarray(bank.vals) for bank in banks]
    for b, v in enumerate(vals):
        want = max((p + 1 for bb, p in cur if bb == b), default=0)
        if len(v) < want:
            raise BankError(f"banked output {name!r}: bank {b} ({graph.banks[name][b]}) holds {len(v)} values, "
                            f"its items need {want}")
    dtype = np.result_type(*vals) if vals else np.int64
    merged = np.asarray([vals[b][p] for b, p in cur], dtype=dtype)
    return segs, crds, merged


def written_tensors(graph: Graph) -> list[str]:
    """Every tensor writers fill: the outputs and their banks."""
    return [t for t, s in graph.tensors.items() if s.role is Role.OUTPUT]


def outputs_from_arrays(graph: Graph, arrays: Mapping[str, list[int]],
                        vals_of: Callable[[str, list[int]], object]) -> dict[str, TensorData]:
    """:func:`assemble_outputs` from the words read back from a memory map's regions
    (``"T.1.seg"``, ``"T.vals"``, ...; those no writer has are absent); ``vals_of(tensor,
    words)`` decodes a values region."""
    written: dict[str, Written] = {}
    for t in written_tensors(graph):
        fmt = graph.tensors[t].fmt
        w = written[t] = Written([None] * fmt.order, [None] * fmt.order)
        for lvl in range(fmt.order):
            for arr, into in (("seg", w.segs), ("crd", w.crds)):
                words = arrays.get(f"{t}.{lvl}.{arr}")
                if words is not None:
                    into[lvl] = np.asarray(words, dtype=np.int64)
        if f"{t}.vals" in arrays:
            w.vals = vals_of(t, arrays[f"{t}.vals"])
    return assemble_outputs(graph, written)
