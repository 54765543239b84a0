"""Graph passes shared by the compiler and the hand-built kernels."""

from __future__ import annotations

import networkx as nx

from .samml import Graph, node_latency

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
    """
    dg = nx.DiGraph()
    dg.add_nodes_from(g.nodes)
    cap: dict[tuple[str, str], int] = {}
    for e in g.edges:
        w = g.depth(e) + node_latency(g.nodes[e.dst.node]) + 1
        cap[(e.src.node, e.dst.node)] = max(cap.get((e.src.node, e.dst.node), 0), w)
    dg.add_weighted_edges_from((a, b, w) for (a, b), w in cap.items())
    topo = list(nx.topological_sort(dg))
    longest_cache: dict[str, dict[str, int]] = {}

    def longest_from(src: str) -> dict[str, int]:
        if src not in longest_cache:
            dist = {src: 0}
            for n in topo[topo.index(src):]:
                if n not in dist:
                    continue
                for _, m, w in dg.out_edges(n, data="weight"):
                    dist[m] = max(dist.get(m, -1), dist[n] + w)
            longest_cache[src] = dist
        return longest_cache[src]

    by_src: dict[str, list[int]] = {}
    for k, e in enumerate(g.edges):
        by_src.setdefault(e.src.node, []).append(k)
    new_edges = list(g.edges)
    for ks in by_src.values():
        if len(ks) < 2:
            continue
        for k in ks:
            c = g.edges[k].dst.node
            worst = 0
            for k2 in ks:
                c2 = g.edges[k2].dst.node
                if k2 == k or c2 == c:
                    continue
                d = longest_from(c2).get(c)
                if d is not None:
                    worst = max(worst, d + g.depth(g.edges[k2]) + 1)
            if worst:
                depth = 2 * worst + 2
                if depth > g.depth(g.edges[k]):
                    e = g.edges[k]
                    new_edges[k] = type(e)(e.src, e.dst, depth)
    g.edges = new_edges
