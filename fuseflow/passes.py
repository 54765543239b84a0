"""Graph passes shared by the compiler (its ``fifo`` pass) and the hand-built kernels."""

from __future__ import annotations

import networkx as nx

from .samml import Edge, Graph, node_latency

__all__ = ["size_fifos"]


def size_fifos(g: Graph) -> None:
    """Deepen the FIFOs of short paths that reconverge with longer ones.

    A node with several output streams (a broadcast, a joiner, a scanner, an accumulator)
    stalls when any of its outputs is full.  When its streams reconverge at one consumer after
    different paths, the consumer-side edge of the short path must buffer what the long path
    can hold in flight, or the graph stalls (or deadlocks).  Each such edge gets ``2 * C + 2``
    slots, ``C`` being the largest token capacity (FIFO slots plus pipeline latency plus one per
    node) of any other path from the same node to that consumer; the factor 2 covers stop-token
    merging, which can consume two tokens per token emitted.

    Feedback edges (into a scanner's ``skip``) are left out, as paths and as siblings: their
    consumer pops every token in the cycle it arrives, so they never fill and never stall
    their producer.
    """
    longest = _LongestPaths(g)
    by_src: dict[str, list[int]] = {}
    for k, e in enumerate(g.edges):
        if not g.is_feedback(e):
            by_src.setdefault(e.src.node, []).append(k)
    new_edges = list(g.edges)
    for ks in (ks for ks in by_src.values() if len(ks) >= 2):
        for k in ks:
            worst = _reconvergent_capacity(g, ks, k, longest)
            e = g.edges[k]
            if worst and 2 * worst + 2 > g.depth(e):
                new_edges[k] = type(e)(e.src, e.dst, 2 * worst + 2)
    g.edges = new_edges


class _LongestPaths:
    """Longest token capacity between nodes: the graph with one edge per connected node pair,
    weighted by its largest capacity (FIFO slots + the consumer's latency + 1)."""

    def __init__(self, g: Graph) -> None:
        cap: dict[tuple[str, str], int] = {}
        for e in g.forward_edges():
            w = g.depth(e) + node_latency(g.nodes[e.dst.node]) + 1
            cap[(e.src.node, e.dst.node)] = max(cap.get((e.src.node, e.dst.node), 0), w)
        self.dg = nx.DiGraph()
        self.dg.add_nodes_from(g.nodes)
        self.dg.add_weighted_edges_from((a, b, w) for (a, b), w in cap.items())
        self.topo = list(nx.topological_sort(self.dg))
        self.cache: dict[str, dict[str, int]] = {}

    def source(self, src: str) -> dict[str, int]:
        """Node -> the longest capacity of a path from ``src`` to it (reachable nodes only)."""
        if src not in self.cache:
            dist = {src: 0}
            for n in self.topo[self.topo.index(src):]:
                if n in dist:
                    for _, m, w in self.dg.out_edges(n, data="weight"):
                        dist[m] = max(dist.get(m, -1), dist[n] + w)
            self.cache[src] = dist
        return self.cache[src]


def _reconvergent_capacity(g: Graph, siblings: list[int], k: int, longest: _LongestPaths) -> int:
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
