"""The FuseFlow heuristic: FLOPs, bytes and cycles of a graph, a program or a model without
simulating.

Each stream of a graph gets a :class:`Stat`: its expected tree sizes (``n[k]`` = elements at
nesting depth ``k``; ``n[-1]`` is the data tokens), the ``N`` tokens among them, and where it is
cheap a histogram ``h`` of the data values (coordinates over the index's dimension, or positions
of the level a reference stream points into).  A rule per primitive kind maps input stats to
output stats and counts the operations and memory words of the node:

* scanners of an input tensor weight each fibre by the histogram of the references that open
  it (a row opened by many references counts that often), so chains of scans are exact;
* intersections multiply per-coordinate presence rates (``h / fibres``), unions combine them
  (independence between operands: the one assumption; ``rates`` overrides it per index);
* reductions and accumulators fold fibres (an accumulator's output is the expected union of
  the fibres it merges);
* writers turn their input stats into the stats of the tensor they write, which later graphs
  read (their fibre lengths are then taken as uniform).

``cycles`` is a bound, not a schedule: the busiest stream's tokens (every node moves one token
per cycle), per graph.  With an off-chip memory it is the larger of that plus the slowest read
port's stalls (runs that miss its two lines wait whole accesses; streamed lines wait what the
next-line prefetch cannot hide; accesses cost a row conflict at the rate the bank model gives,
see ``conflicts``) and the bytes moved over the bandwidth, plus the bus cycles turnarounds
and bank switches lose between transfers (``bus_gaps``).  The counters have the names of
``sw_sim.counters`` so the two compare directly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..compiler.runner import initial_tensors
from ..ir.memory import IDEAL, MemoryModel, Placement
from ..ir.samml import Graph, NodeKind
from ..ir.tensor import Format, TensorData
from ..ir.tokens import CRD_WIDTH, VAL_WIDTH
from .context import ANY_PLACEMENT, Ctx
from .dram import bus_gaps, conflicts, port_stall
from .rules import RULES
from .stats import Estimate, LevelStats, Stat, TensorStats, fanout, stats_of, uniform_stats

__all__ = ["Estimate", "TensorStats", "estimate_graph", "estimate_program", "stats_of", "uniform_stats"]


# ----------------------------------------------------------------------------- graphs, programs
def _written_stats(graph: Graph, tensor: str, crds: dict[int, Stat]) -> TensorStats:
    """Statistics of a tensor a graph writes, from its writers' input streams (fibre lengths
    uniform, coordinate histograms kept)."""
    spec = graph.tensors[tensor]
    levels = []
    parents = 1.0
    for lvl, fmt in enumerate(spec.fmt.levels):
        dim = spec.level_dim(lvl)
        s = crds.get(lvl)
        nnz = s.data if s is not None and fmt is Format.COMPRESSED else parents * dim
        hist = s.h if s is not None and s.h is not None and len(s.h) == dim else None
        fan = fanout(s.lens, -1) if s is not None and fmt is Format.COMPRESSED else None
        levels.append(LevelStats(dim, fmt is Format.DENSE, parents, nnz, None, None, None,
                                 hist if fmt is Format.COMPRESSED else np.full(dim, parents),
                                 fan=None if fan is None else fan.copy()))
        parents = nnz
    return TensorStats(levels)


def estimate_graph(graph: Graph, tensors: Mapping[str, TensorStats | TensorData], *,
                   memory: MemoryModel = IDEAL, placement: Placement = ANY_PLACEMENT,
                   cw: int = CRD_WIDTH, vw: int = VAL_WIDTH, rates: Mapping[str, float] | None = None,
                   est: Estimate | None = None) -> tuple[Estimate, dict[str, TensorStats]]:
    """Estimate one graph (its input tensors as data or statistics); returns the estimate (added
    to ``est`` if given) and the statistics of the tensors it writes."""
    t0 = time.perf_counter()
    est = est if est is not None else Estimate()
    stats = {t: (stats_of(v) if isinstance(v, TensorData) else v) for t, v in tensors.items()}
    ctx = Ctx(graph, stats, memory, placement, cw, vw, rates or {}, est)
    before = {k: dict(a) for k, a in est.arrays.items()}
    streams: dict[Any, Stat] = {}
    driver = graph.driver()
    busiest = 0.0
    # an order-2 accumulator takes its inputs before it flushes: the merge of lanes' partial
    # results (merge2) starts when they flush, so it is busy for that long plus its own output
    accumulating: dict[str, float] = {}
    for name in graph.topo_order():
        node = graph.nodes[name]
        ins = {}
        for port in node.inputs():
            e = driver.get(node[port])
            if e is not None and not graph.is_feedback(e):
                ins[port] = streams[e.src]
        if len(ins) < sum(1 for port in node.inputs() if not _is_feedback_port(node, port)):
            raise ValueError(f"estimate: node {name!r} has unconnected inputs")
        outs = RULES.lookup(node.kind)(ctx, node, ins)
        for port, s in outs.items():
            streams[node[port]] = s
        work = _work(node, ins, outs)
        if node.kind is NodeKind.SPACC2:
            accumulating[name] = max((st.tokens for st in ins.values()), default=0.0)
        elif node.kind is NodeKind.MERGE2:
            accumulating[name] = max(accumulating.get(driver[node[p]].src.node, 0.0) for p in node.inputs())
            work += accumulating[name]
        busiest = max(busiest, work)
    for e in graph.edges:
        if e.src in streams:
            key = f"{graph.name}:{e}"
            est.tokens[key] = est.tokens.get(key, 0.0) + streams[e.src].tokens
    cycles = busiest
    if not memory.ideal:
        moved = 0.0
        for key, a in est.arrays.items():
            old = before.get(key, {})
            if a["offchip"]:
                new = (a["bytes_read"] - old.get("bytes_read", 0.0)) + (a["bytes_written"] - old.get("bytes_written", 0.0))
                lines = math.ceil(new / memory.burst_bytes) + (1 if new else 0)
                a["lines"] = a.get("lines", 0.0) + lines
                a["bytes_moved"] = a.get("bytes_moved", 0.0) + lines * memory.burst_bytes
                moved += lines * memory.burst_bytes
        conflict = conflicts(ctx)
        stall = max((port_stall(memory, r, busiest, conflict.get(r.array, 0.0)) for r in ctx.reads), default=0.0)
        bus = moved / memory.bytes_per_cycle + bus_gaps(ctx)
        cycles = max(busiest + stall, bus) + memory.t_rcd + memory.t_cl + memory.latency
    est.cycles += cycles
    est.graphs.append((graph.name, cycles))
    est.seconds += time.perf_counter() - t0
    # a tensor written by its value writer alone (a scalar, all-dense levels) has no coordinate
    # statistics: its levels are full
    written = dict(ctx.written)
    for t, banks in graph.banks.items():  # a banked output: its banks' levels, added up
        levels = {lv for b in banks for lv in written.get(b, {})}
        written[t] = {**written.get(t, {}), **{lv: _added([written[b][lv] for b in banks if lv in written.get(b, {})])
                                               for lv in levels}}
    out = {t: _written_stats(graph, t, written.get(t, {})) for t in {*written, *graph.output_tensors()}}
    return est, out


def _added(stats: list[Stat]) -> Stat:
    """One stream's statistics from those of its parts (the lanes' banks of one level): counts
    and histograms added."""
    def add(arrays):
        if any(a is None for a in arrays):
            return None
        size = max(len(a) for a in arrays)
        return sum(np.pad(np.asarray(a, dtype=float), (0, size - len(a))) for a in arrays)

    first = stats[0]
    n = tuple(sum(s.n[d] for s in stats) for d in range(len(first.n)))
    lens = None
    if all(s.lens is not None and len(s.lens) == len(first.lens) for s in stats):
        lens = tuple(add([s.lens[d] for s in stats]) if first.lens[d] is not None else None
                     for d in range(len(first.lens)))
    h = add([s.h for s in stats]) if all(s.h is not None for s in stats) else None
    return replace(first, n=n, lens=lens, h=h, nn=sum(s.nn for s in stats))


def _work(node, ins: dict[str, Stat], outs: dict[str, Stat]) -> float:
    """Cycles a node is busy (one token per cycle on its busiest port): a join walks its
    inputs' coordinates (those matched move together), an accumulator takes its inputs then
    flushes its outputs."""
    t_in = max((s.tokens for s in ins.values()), default=0.0)
    t_out = max((s.tokens for s in outs.values()), default=0.0)
    if node.kind in (NodeKind.INTERSECT, NodeKind.UNION):
        # copies of one stream (a broadcast to several inputs) always match: walked once
        crds = [s.tokens for s in {id(s): s for p, s in ins.items() if p.startswith("crd")}.values()]
        return max(sum(crds) - outs["crd"].tokens * (len(crds) - 1), t_out)
    if node.kind in (NodeKind.SPACC1, NodeKind.SPACC2):
        return t_in + t_out
    if node.kind is NodeKind.MERGE2:  # a cycle per merged entry or row end, and one per row opened
        return outs["crd1"].tokens + outs["crd0"].data
    return max(t_in, t_out)


def _is_feedback_port(node, port: str) -> bool:
    return port in node.spec.feedback


def estimate_program(compiled, data: Mapping[str, Any], *,
                     graph_inputs: dict[str, dict[str, Any]] | None = None, **kw) -> Estimate:
    """Estimate every graph of a compiled program in order (intermediates' statistics handed
    on; permuted copies keep their source's counts with uniform fibres).  ``graph_inputs``:
    filled with each graph's inputs (data or statistics) by graph name."""
    t0 = time.perf_counter()
    record = graph_inputs if graph_inputs is not None else {}
    tensors: dict[str, TensorStats | TensorData] = dict(initial_tensors(compiled, data))
    est = Estimate()
    for cg in compiled.groups:
        g = cg.graph
        record[g.name] = {t: tensors[t] for t in g.input_tensors()}
        _, written = estimate_graph(g, record[g.name], est=est, **kw)
        tensors.update(written)
        for p in compiled.permuted:
            if p.source in written:
                tensors[p.name] = _permuted(written[p.source], g, p)
    est.seconds = time.perf_counter() - t0
    return est


def _permuted(src: TensorStats, graph: Graph, p) -> TensorStats:
    shape = graph.tensors[p.source].shape
    return uniform_stats(shape, p.fmt, src.levels[-1].nnz if src.levels else 0.0)
