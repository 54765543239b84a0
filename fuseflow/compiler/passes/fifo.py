"""Graph passes shared by the compiler (its ``fifo`` pass) and the hand-built kernels."""

from __future__ import annotations

import networkx as nx

from ...ir.samml import Edge, Graph, NodeKind, node_latency
from ..program import Rejected
from .base import GroupIR, Pass, ProgramIR, graph_pass_text

__all__ = ["PASS", "set_accumulator_buffers", "size_fifos"]


def set_accumulator_buffers(g: Graph, buffers: int) -> list[str]:
    """Set ``buffers`` on every sparse accumulator (``spacc1``, ``spacc2``) of ``g``: 2 flushes
    a fiber while the next one accumulates (twice the sum words), 1 accumulates, then flushes.
    Returns the names of the nodes whose setting changed."""
    if buffers not in (1, 2):
        raise ValueError(f"accumulator buffers={buffers}: must be 1 or 2")
    changed = []
    for n in g.nodes.values():
        if n.kind in (NodeKind.SPACC1, NodeKind.SPACC2) and n.all_params()["buffers"] != buffers:
            if buffers == n.spec.defaults["buffers"]:
                n.params.pop("buffers", None)
            else:
                n.params["buffers"] = buffers
            changed.append(n.name)
    return changed


def size_fifos(g: Graph) -> None:
    """Deepen the FIFOs of short paths that reconverge with longer ones.

    A node with several output streams (a broadcast, a joiner, a scanner, an accumulator)
    stalls when any of its outputs is full.  When its streams reconverge at one consumer after
    different paths, the consumer-side edge of the short path must buffer what the long path
    can hold in flight, or the graph stalls (or deadlocks).  Each such edge gets ``2 * C + 2``
    slots, ``C`` being the largest token capacity (FIFO slots plus pipeline latency plus one per
    node) of any other path from the same node to that consumer; the factor 2 covers stop-token
    merging, which can consume two tokens per token emitted.

    Where the short path has nodes of its own before it reconverges (a scanner's reference
    through a value load, its coordinate through a repeat and another load, both into one
    ALU), the edge by which the short path enters the reconvergence node gets the capacity the
    short path lacks, so the producer never waits for the long path to drain (without it such a
    pipeline sustains about 2 tokens every 3 cycles).

    Feedback edges (into a scanner's ``skip``) are left out, as paths and as siblings: their
    consumer pops every token in the cycle it arrives, so they never fill and never stall
    their producer.
    """
    longest, shortest, slowest = _Paths(g, max), _Paths(g, min), _Paths(g, max, _nominal)
    by_src: dict[str, list[int]] = {}
    for k, e in enumerate(g.edges):
        if not g.is_feedback(e):
            by_src.setdefault(e.src.node, []).append(k)
    depth = {k: g.depth(e) for k, e in enumerate(g.edges)}
    into: dict[str, list[int]] = {}  # node -> its forward in-edges (edge indices)
    for k, e in enumerate(g.edges):
        if not g.is_feedback(e):
            into.setdefault(e.dst.node, []).append(k)
    for ks in (ks for ks in by_src.values() if len(ks) >= 2):
        for k in ks:
            worst = _reconvergent_capacity(g, ks, k, longest)
            if worst:
                depth[k] = max(depth[k], 2 * worst + 2)
            for k_in, extra in _short_path_deficits(g, ks, k, slowest, shortest, into):
                depth[k_in] = max(depth[k_in], g.depth(g.edges[k_in]) + extra)
    g.edges = [type(e)(e.src, e.dst, depth[k]) if depth[k] != g.depth(e) else e
               for k, e in enumerate(g.edges)]


def _weight(g: Graph, e: Edge) -> int:
    """Token capacity of an edge: its FIFO slots + the consumer's latency + 1."""
    return g.depth(e) + node_latency(g.nodes[e.dst.node]) + 1


def _nominal(g: Graph, e: Edge) -> int:
    """Token capacity of an edge as if its FIFO had the graph's default depth.  Unlike the
    capacity it does not change when this pass deepens FIFOs, so sizing by it is idempotent."""
    return g.fifo_depth + node_latency(g.nodes[e.dst.node]) + 1


class _Paths:
    """Longest (``pick=max``) or shortest (``pick=min``) token capacity between nodes (or
    nominal capacity, with ``weight=_nominal``): the graph with one edge per connected node pair,
    weighted by its largest / smallest capacity."""

    def __init__(self, g: Graph, pick=max, weight=_weight) -> None:
        self.pick = pick
        cap: dict[tuple[str, str], int] = {}
        for e in g.forward_edges():
            w = weight(g, e)
            key = (e.src.node, e.dst.node)
            cap[key] = pick(cap[key], w) if key in cap else w
        self.dg = nx.DiGraph()
        self.dg.add_nodes_from(g.nodes)
        self.dg.add_weighted_edges_from((a, b, w) for (a, b), w in cap.items())
        self.topo = list(nx.topological_sort(self.dg))
        self.cache: dict[str, dict[str, int]] = {}

    def source(self, src: str) -> dict[str, int]:
        """Node -> the longest / shortest capacity of a path from ``src`` to it (reachable
        nodes only)."""
        if src not in self.cache:
            dist = {src: 0}
            pick = self.pick
            for n in self.topo[self.topo.index(src):]:
                if n in dist:
                    for _, m, w in self.dg.out_edges(n, data="weight"):
                        dist[m] = pick(dist[m], dist[n] + w) if m in dist else dist[n] + w
            self.cache[src] = dist
        return self.cache[src]


def _reconvergent_capacity(g: Graph, siblings: list[int], k: int, longest: _Paths) -> int:
    """The largest capacity of a path that leaves edge ``k``'s source through another of its
    edges (``siblings``) and reaches edge ``k``'s consumer (0 if none does)."""
    c = g.edges[k].dst.node
    worst = 0
    for k2 in siblings:
        e2: Edge = g.edges[k2]
        if k2 == k or e2.dst.node == c:
            continue
        d = longest.source(e2.dst.node).get(c)
        if d is not None:
            worst = max(worst, d + g.depth(e2) + 1)
    return worst


def _short_path_deficits(g: Graph, siblings: list[int], k: int, slowest: _Paths,
                         shortest: _Paths, into: dict[str, list[int]]) -> list[tuple[int, int]]:
    """For edge ``k`` (source ``s`` -> ``c``): every node ``m`` past ``c`` where a path through
    ``c`` reconverges with a longer path through another of ``s``'s edges, entering ``m`` by a
    different edge; returns (the short side's edges into ``m``, the capacity the short path
    lacks against the longer path's nominal capacity)."""
    c = g.edges[k].dst.node
    near = shortest.source(c)
    start = _weight(g, g.edges[k])
    out: list[tuple[int, int]] = []
    for m, d_short in near.items():
        if m == c:
            continue
        long_in = _longest_into(g, siblings, k, m, slowest, into)
        if long_in is None:
            continue
        long_cap, long_edge = long_in
        short_edge = min((j for j in into[m] if g.edges[j].src.node in near),
                         key=lambda j: near[g.edges[j].src.node] + _weight(g, g.edges[j]))
        if short_edge != long_edge and long_cap > start + d_short:
            # every edge from the same producer into m (a scanner's crd and ref into one
            # joiner) is popped together with this one: each needs the capacity
            p = g.edges[short_edge].src.node
            out += [(j, long_cap - start - d_short) for j in into[m] if g.edges[j].src.node == p]
    return out


def _longest_into(g: Graph, siblings: list[int], k: int, m: str,
                  slowest: _Paths, into: dict[str, list[int]]) -> tuple[int, int] | None:
    """The longest nominal capacity from edge ``k``'s source to ``m`` through another of its
    edges that does not pass ``k``'s consumer, and the edge by which that path enters ``m``."""
    c = g.edges[k].dst.node
    best: tuple[int, int] | None = None
    for k2 in siblings:
        e2 = g.edges[k2]
        if k2 == k or e2.dst.node == c:
            continue
        far = slowest.source(e2.dst.node)
        if m not in far or c in far:
            continue
        head = _nominal(g, e2)
        for j in into.get(m, ()):
            e = g.edges[j]
            if e.src.node in far:
                cap = head + far[e.src.node] + _nominal(g, e)
                if best is None or cap > best[0]:
                    best = (cap, j)
    return best


# ----------------------------------------------------------------------------- the pass
def _run(_: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.graph is not None
    size_fifos(g.graph)
    return None


PASS = Pass("fifo", "deepen the FIFOs of short paths that reconverge with longer ones",
            "samml.Graph", "samml.Graph", _run, graph_pass_text, needs=("lower",))
