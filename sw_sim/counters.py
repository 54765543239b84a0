"""The counters of a run: FLOPs by operation, words and bytes per tensor array (on and off chip),
tokens per stream, arithmetic intensity (``docs/memory.md``, "Counters")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuseflow.ir.memory import MemoryModel, Placement, word_bytes
from fuseflow.ir.samml import Graph

from .engine import Channel, Primitive

__all__ = ["array_key", "collect_counters", "merge_counters"]


def array_key(tensor: str, array: str, level: int | None) -> str:
    """``B.crd1``, ``B.seg1``, ``x.vals``: the counters' name of one array."""
    return f"{tensor}.{array}" if level is None else f"{tensor}.{array}{level}"


def _op_name(node) -> str:
    """The operation a node's FLOPs count as: its ``op`` parameter (ALU, reduce, accumulators)."""
    op = node.all_params().get("op", node.kind.value)
    return getattr(op, "value", str(op))


def collect_counters(graph: Graph, prims: Mapping[str, Primitive], channels: Mapping[str, Channel],
                     model: MemoryModel, placement: Placement, ctrl, *, cw: int, vw: int) -> dict[str, Any]:
    """The counters of a finished run of ``graph`` (its nodes' models in ``prims``)."""
    flops: dict[str, int] = {}
    arrays: dict[str, dict[str, Any]] = {}

    def add(tensor: str, array: str, level: int | None, words: int, write: bool, width: int) -> None:
        key = array_key(tensor, array, level)
        a = arrays.setdefault(key, {"offchip": placement.offchip(model, tensor), "words_read": 0,
                                    "words_written": 0, "bytes_read": 0, "bytes_written": 0})
        wb = word_bytes(width)
        a["words_written" if write else "words_read"] += words
        a["bytes_written" if write else "bytes_read"] += words * wb

    for name, node in graph.nodes.items():
        p = prims[name]
        if p.flops:
            op = _op_name(node)
            flops[op] = flops.get(op, 0) + p.flops
        use = node.spec.tensor
        if use is None:
            continue
        t = node.params["tensor"]
        if use.level:
            lvl = node.params["level"]
            f = graph.tensors[t].fmt.levels[lvl]
            if not f.has_crd:
                continue
            if use.writes:
                add(t, "seg", lvl, len(p.seg), True, cw)
                add(t, "crd", lvl, len(p.crd), True, cw)
            else:
                if f.has_seg:  # a singleton level has no seg array
                    add(t, "seg", lvl, p.seg_reads, False, cw)
                add(t, "crd", lvl, p.crd_reads, False, cw)
        elif use.writes:
            add(t, "vals", None, len(p.vals), True, vw)
        else:
            add(t, "vals", None, p.reads, False, vw)
    if ctrl is not None:
        for port in ctrl.ports:
            s = port.spec
            a = arrays[array_key(s.tensor, s.array, s.level)]
            a["lines"] = a.get("lines", 0) + port.lines
            a["bytes_moved"] = a.get("bytes_moved", 0) + port.lines * model.burst_bytes
    out = {"flops": dict(sorted(flops.items())), "arrays": dict(sorted(arrays.items())),
           "tokens": {n: c.count for n, c in channels.items()}}
    if ctrl is not None:
        out["row_hits"], out["row_misses"], out["row_conflicts"] = ctrl.row_hits, ctrl.row_misses, ctrl.row_conflicts
        out["turnarounds"], out["bank_switches"] = ctrl.turnarounds, ctrl.bank_switches
    return totals(out)


def totals(c: dict[str, Any]) -> dict[str, Any]:
    """Add ``flops_total``, ``bytes_read``, ``bytes_written``, ``bytes_offchip`` (moved off
    chip) and ``intensity`` (FLOPs per byte read and written) to counters ``c``."""
    arrays = c["arrays"].values()
    c["flops_total"] = sum(c["flops"].values())
    c["bytes_read"] = sum(a["bytes_read"] for a in arrays)
    c["bytes_written"] = sum(a["bytes_written"] for a in arrays)
    c["bytes_offchip"] = sum(a.get("bytes_moved", 0) for a in arrays)
    moved = c["bytes_read"] + c["bytes_written"]
    c["intensity"] = round(c["flops_total"] / moved, 6) if moved else None
    return c


def merge_counters(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The counters of several runs (a program's graphs) added up; arrays by name, tokens
    prefixed by nothing (stream names are per graph, so they are summed under their names)."""
    flops: dict[str, int] = {}
    arrays: dict[str, dict[str, Any]] = {}
    tokens: dict[str, int] = {}
    extra: dict[str, int] = {}
    for c in parts:
        for k, v in c["flops"].items():
            flops[k] = flops.get(k, 0) + v
        for k, a in c["arrays"].items():
            m = arrays.setdefault(k, {"offchip": a["offchip"]})
            m["offchip"] = m["offchip"] or a["offchip"]
            for f, v in a.items():
                if f != "offchip":
                    m[f] = m.get(f, 0) + v
        for k, v in c["tokens"].items():
            tokens[k] = tokens.get(k, 0) + v
        for k in ("row_hits", "row_misses", "row_conflicts", "turnarounds", "bank_switches"):
            if k in c:
                extra[k] = extra.get(k, 0) + c[k]
    return totals({"flops": dict(sorted(flops.items())), "arrays": dict(sorted(arrays.items())),
                   "tokens": tokens, **extra})
