"""Data-parallel regions: the ``par`` graph pass (``par={index: factor}``).

Parallelizing index ``v`` by ``n`` rewrites a graph so that ``n`` copies (lanes) of the
subgraph below ``v`` run side by side:

* the **split**: ``v``'s coordinate stream and the streams aligned with it (the other outputs
  of the scanner or join that makes it, ``Graph.indices``) each pass a ``parallelize`` node,
  which deals their coordinates to the lanes round-robin (:mod:`fuseflow.ir.primitives.parallel`);
* the **region**: every node downstream of the split whose outputs stay at ``v``'s nesting
  level or deeper is copied once per lane (``<node>_l<k>``); a reducer of ``v`` (``reduce``, or
  a ``spacc1`` / ``spacc2`` by add or max) stays in the lanes as a lane-local partial reduction;
* **inputs from outer levels** (a reference or value of an enclosing index, which each lane
  repeats over its own coordinates) are broadcast to every lane;
* **outputs**: a stream at ``v``'s level or deeper leaving the region (to a writer, or to a
  node that drops below ``v``'s level such as a sparse accumulator) passes a ``serialize`` node,
  which restores the unsplit stream in the parallelizer's order; a lane-local partial reduction
  is combined across lanes by a tree of ALUs of the reduction's operator (sparse results: of
  unions and ALUs, a max one taking a lane's missing coordinate as no value; order-2 results:
  of ``merge2`` nodes, the same rule on each (i, j)), and broadcast back
  to the lanes if a lane reads it, as in a two-pass softmax.

Indices are parallelized outermost first, so a factor on an inner index nests: its region is
copied inside every lane of the outer one.  Values are those of the unsplit graph; when a
reduced index is parallelized, the lanes' partial sums are added in a different order than the
unsplit reducer adds them, which is exact for integers and fixed point without saturation and
may differ in the last bits for floats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...ir.banks import bank_format
from ...ir.memory import MAX_OUTPUT_ARRAYS
from ...ir.primitives import AluOp, NodeKind, ReduceOp, StreamKind
from ...ir.primitives.parallel import MAX_LANES
from ...ir.samml import Edge, Graph, GraphError, PortRef, Role, TensorUse
from ...ir.tensor import Format
from ...options import Kind, Option, Source
from ..fused import Group
from ..program import FusionError, Rejected
from .base import GroupIR, Pass, ProgramIR, graph_pass_text
from .fifo import size_fifos

__all__ = ["DEFAULT_PAR_BUDGET", "PAR", "PAR_BANKS", "PASS", "ParallelError", "ParallelRegion", "check_par_used", "parallelize", "stream_levels"]


class ParallelError(ValueError):
    """A ``par`` request that does not fit the graph (names the index and why)."""


@dataclass
class ParallelRegion:
    """What one split did: the index, its coordinate source, the lanes and the boundary."""

    index: str
    source: str
    factor: int
    nodes: list[str] = field(default_factory=list)  # the copied nodes (original names)
    broadcast: list[str] = field(default_factory=list)  # outer-level streams sent to every lane
    serialized: list[str] = field(default_factory=list)  # streams merged back in order
    combined: list[str] = field(default_factory=list)  # partial reductions combined
    banked: list[str] = field(default_factory=list)  # outputs written in one bank per lane
    range_split: bool = False  # each lane scans its own share of the index's dense level
    bank_note: str = ""  # why an output was serialized instead of banked
    merged: dict[PortRef, PortRef] = field(default_factory=dict)  # partial output -> its merge

    def describe(self) -> str:
        head = (f"par {self.index}={self.factor}: {self.source} split into {self.factor} "
                f"lanes of {len(self.nodes)} nodes")
        parts = [head]
        if self.range_split:
            parts.append(f"each lane scans its own coordinates (lane + {self.factor} x m)")
        if self.broadcast:
            parts.append(f"broadcast to the lanes: {', '.join(self.broadcast)}")
        if self.serialized:
            parts.append(f"serialized: {', '.join(self.serialized)}")
        if self.combined:
            parts.append(f"partial reductions combined: {', '.join(self.combined)}")
        if self.banked:
            parts.append(f"written in {self.factor} banks: {', '.join(self.banked)}")
        if self.bank_note:
            parts.append(self.bank_note)
        return "; ".join(parts)


def stream_levels(g: Graph) -> dict[PortRef, int]:
    """The nesting level of every output port (0 for the roots' references, one more below
    each scanner, one less after each reducer: the declarations' ``nesting`` rules)."""
    levels: dict[PortRef, int] = {}
    driver = g.driver()
    for name in g.topo_order():
        node = g.nodes[name]
        ins = {}
        for port in node.inputs():
            e = driver.get(node[port])
            if e is not None and not g.is_feedback(e) and e.src in levels:
                ins[port] = levels[e.src]
        for port, lv in node.spec.out_levels(node.typed(), ins).items():
            levels[node[port]] = lv
    return levels


def parallelize(g: Graph, par: Mapping[str, int], *, resize: bool = True, banks: bool = True) -> list[ParallelRegion]:
    """Rewrite ``g`` in place with ``par`` (index -> number of lanes; 1 leaves the index alone;
    a key ``GRAPH:INDEX`` applies only to the graph named GRAPH and overrides ``INDEX``).

    Raises :class:`ParallelError` for an index the graph does not iterate, a factor outside
    1..64 or larger than the index's dimension, or a region whose boundary cannot be split
    (the message names the index and the node).  ``resize``: size the FIFOs afterwards
    (:func:`~fuseflow.compiler.passes.fifo.size_fifos`); ``banks``: the lanes of an outermost
    split write the outputs in a bank each where they can (:func:`_bank_outputs`), else through
    serializers."""
    wanted = {}
    for key, f in sorted(par.items(), key=lambda kv: ":" in kv[0]):  # GRAPH:INDEX overrides
        graph, _, index = key.rpartition(":")
        if graph in ("", g.name):
            wanted[index] = f
    wanted = {v: f for v, f in wanted.items() if _checked_factor(g, v, f) > 1}
    if not wanted:
        return []
    levels = stream_levels(g)
    order = sorted(wanted, key=lambda v: (min(levels[p] for p in g.indices[v]), v))
    regions: list[ParallelRegion] = []
    for v in order:  # outermost first; an inner index's sources are then the lanes' copies
        for group in _source_groups(g, v, g.indices[v]):
            group = [_current(p, regions) for p in group]
            for port in group:
                if port.node not in g.nodes:
                    raise ParallelError(f"par {v}={wanted[v]}: index {v!r} is iterated again "
                                        f"inside its own parallel region ({port.node})")
            regions.append(_split(g, v, group, wanted[v], banks))
    try:
        g.verify()
    except GraphError as exc:  # a rewrite the checks above should have refused
        raise ParallelError(f"par {','.join(f'{i}={n}' for i, n in wanted.items())}: the parallel graph is not valid: {exc}") from None
    if resize:
        size_fifos(g)
    return regions


def _current(port: PortRef, regions: list[ParallelRegion]) -> PortRef:
    """``port``, or the merge of it that a split of the same index made (coordinates that a
    lane-local accumulator hands to the next pipeline)."""
    for r in regions:
        port = r.merged.get(port, port)
    return port


def _source_groups(g: Graph, index: str, ports: list[PortRef]) -> list[list[PortRef]]:
    """The coordinate streams of ``index`` to split, in groups split together.  A stream that
    only feeds another one's join at the same level (a factored intermediate's coordinates
    merged with others) is not split itself: the join's output is.  Streams whose regions meet
    (two pipelines over the index whose results are joined further down) are split together:
    they have the same fibres, so round-robin sends each coordinate to the same lane in both."""
    levels = stream_levels(g)
    reach = {}
    for p in ports:
        inside, partial = _region(g, _split_ports(g, p, levels), levels, levels[p])
        reach[p] = (inside, partial)
    keep = [p for p in ports
            if not any(q != p and q.node in reach[p][0] and q not in reach[p][1] for q in ports)]
    groups: list[list[PortRef]] = []
    for p in keep:
        hit = [grp for grp in groups if any(reach[p][0] & reach[q][0] for q in grp)]
        merged = [p] + [q for grp in hit for q in grp]
        groups = [grp for grp in groups if grp not in hit] + [merged]
    order = {p: k for k, p in enumerate(ports)}
    return sorted((sorted(grp, key=order.get) for grp in groups), key=lambda grp: order[grp[0]])


def _split_ports(g: Graph, source: PortRef, levels: dict[PortRef, int]) -> list[PortRef]:
    """The outputs of ``source``'s node at its level: the coordinates and the streams aligned
    with them."""
    node = g.nodes[source.node]
    return [node[p] for p in node.outputs() if levels.get(node[p]) == levels[source]]


# ----------------------------------------------------------------------------- checks
def _checked_factor(g: Graph, index: str, factor: object) -> int:
    if isinstance(factor, bool) or not isinstance(factor, int):
        raise ParallelError(f"par {index}={factor!r}: the factor must be a whole number")
    if not 1 <= factor <= MAX_LANES:
        raise ParallelError(f"par {index}={factor}: the factor must be 1 to {MAX_LANES}")
    if index not in g.indices:
        have = ", ".join(sorted(g.indices)) or "none recorded"
        raise ParallelError(f"par {index}={factor}: graph {g.name!r} does not iterate index "
                            f"{index!r} (its indices: {have})")
    dim = _index_dim(g, g.indices[index][0])
    if dim is not None and factor > dim:
        raise ParallelError(f"par {index}={factor}: index {index!r} has only {dim} coordinates "
                            f"in graph {g.name!r}; use a factor of at most {dim}")
    return factor


def _index_dim(g: Graph, port: PortRef) -> int | None:
    """The dimension of the index whose coordinates ``port`` carries (from a scanner's level)."""
    driver = g.driver()
    node = g.nodes[port.node]
    if node.kind is NodeKind.SPACC1:
        return node.param("dim")
    while node.kind is not NodeKind.SCAN:
        # a join, broadcast or FIFO carries the coordinates of its first coordinate input
        crd_in = next((p for p, kind in node.inputs().items() if kind is StreamKind.CRD), None)
        e = driver.get(node[crd_in]) if crd_in is not None else None
        if e is None:
            return None
        node = g.nodes[e.src.node]
    spec = g.tensors.get(node.param("tensor"))
    return None if spec is None else spec.level_dim(node.param("level"))


# ----------------------------------------------------------------------------- the rewrite
def _split(g: Graph, index: str, sources: list[PortRef], n: int, banks: bool = True) -> ParallelRegion:
    levels = stream_levels(g)
    k = levels[sources[0]]
    names = " + ".join(s.node for s in sources)
    if any(levels[s] != k for s in sources):
        raise ParallelError(f"par {index}={n}: the coordinate streams {names} of index "
                            f"{index!r} are at different levels; it cannot be split here")
    split = [p for s in sources for p in _split_ports(g, s, levels)]
    inside, partial = _region(g, split, levels, k)
    region = ParallelRegion(index, names, n, sorted(inside))
    if not inside:
        raise ParallelError(f"par {index}={n}: nothing below index {index!r} at "
                            f"{names} to parallelize")
    boundary_in, boundary_out, internal = _boundary(g, inside, partial)
    scan = _range_scan(g, sources, split, inside, partial, boundary_out)
    if scan is not None:  # each lane scans its own coordinates: no parallelizer in front
        inside.add(scan)
        region.range_split = True
        boundary_in, boundary_out, internal = _boundary(g, inside, partial)
    _check_feedback(g, index, n, inside, boundary_in + boundary_out)
    for name in sorted(inside):
        node = g.nodes[name]
        for lane in range(n):
            share = {"offset": lane, "stride": n} if name == scan else {}
            g.add(node.kind, f"{name}_l{lane}", **{**node.params, **share})
    new_edges: list[Edge] = []
    for e in internal:
        new_edges += [Edge(lane_port(e.src, k_), lane_port(e.dst, k_), e.depth) for k_ in range(n)]
    sels = _entries(g, index, n, boundary_in, split, levels, k, region, new_edges)
    banked = _bank_outputs(g, n, [e for e in boundary_out if e.src not in partial], split, levels, k, region,
                           new_edges) if banks else set()
    _exits(g, index, n, [e for e in boundary_out if e not in banked], levels, k, region, new_edges, sels,
           inside, partial)
    for d in list(g.discards):
        if d.node in inside:
            g.discards.discard(d)
            g.discards.update(lane_port(d, lane) for lane in range(n))
    g.edges = [e for e in g.edges if e.src.node not in inside and e.dst.node not in inside]
    g.edges += new_edges
    for name in inside:
        del g.nodes[name]
    for v, ports in g.indices.items():
        g.indices[v] = [q for p in ports for q in
                        ([region.merged[p]] if p in region.merged else
                         [lane_port(p, lane) for lane in range(n)] if p.node in inside else [p])]
    return region


_ACCUMULATORS = (NodeKind.SPACC1, NodeKind.SPACC2)


def _boundary(g: Graph, inside: set[str], partial: set[PortRef]) -> tuple[list[Edge], list[Edge], list[Edge]]:
    """The edges into the region, out of it and inside it."""
    boundary_in, boundary_out, internal = [], [], []
    for e in g.edges:
        a, b = e.src.node in inside, e.dst.node in inside
        if a and (e.src in partial or not b):
            boundary_out.append(e)  # a partial reduction read back in the lanes leaves and re-enters
        elif a and b:
            internal.append(e)
        elif b:
            boundary_in.append(e)
    return boundary_in, boundary_out, internal


def _range_scan(g: Graph, sources: list[PortRef], split: list[PortRef], inside: set[str],
                partial: set[PortRef], boundary_out: list[Edge]) -> str | None:
    """The scanner of a dense level that makes the split index's coordinates, when the lanes
    can each scan a share of every fibre instead (scanner range splitting: coordinates
    ``lane, lane + n, ...``): the index is split right at its scanner, every stream out of the
    lanes is a partial reduction (no serializer needs the parallelizer's order) and nothing
    outside the lanes reads the scanner.  A scanner emits a coordinate a cycle, so a split
    after it gains nothing on an innermost index; split at the scanner, it scales."""
    names = {p.node for p in sources}
    if len(names) != 1 or any(e.src not in partial for e in boundary_out):
        return None
    [name] = names
    node = g.nodes[name]
    if node.kind is not NodeKind.SCAN or node.param("skip") or node.param("stride") != 1:
        return None
    if g.tensors[node.params["tensor"]].fmt.levels[node.params["level"]] is not Format.DENSE:
        return None
    outs = {node[p] for p in node.outputs()}
    if not outs <= set(split) or any(e.src in outs and e.dst.node not in inside for e in g.edges):
        return None
    return name


def _lane_local_spacc(node, levels, driver, k: int) -> bool:
    """A sparse accumulator that can run in the lanes of a split at level k: it reduces over
    the split index (its ``outer`` at level k: each lane holds partial sums or maxima), or it
    is keyed by the split index (its first inner coordinate at level k under an outer
    ``outer``: each lane holds the results of its own coordinates).  Either way a tree merges
    the lanes' outputs: for ``spacc1`` of unions and ALUs (:func:`_merge_sparse`: adders, or
    maxima for which a coordinate one lane lacks is no value, not a 0), for ``spacc2`` of
    ``merge2`` nodes (:func:`_merge_order2`, the same rule on (i, j))."""
    if node.kind not in _ACCUMULATORS:
        return False
    first = "inner" if node.kind is NodeKind.SPACC1 else "inner0"
    outer, inner = levels[driver[node["outer"]].src], levels[driver[node[first]].src]
    return outer == k or (outer < k and inner == k)


def lane_port(p: PortRef, lane: int) -> PortRef:
    """``p`` on the copy of its node in ``lane``."""
    return PortRef(f"{p.node}_l{lane}", p.port)


def _region(g: Graph, split: list[PortRef], levels: dict[PortRef, int],
            k: int) -> tuple[set[str], set[PortRef]]:
    """The nodes copied per lane: downstream of the split through streams at level >= k; not
    writers, not the serializers of an enclosing region, not a ``crd_drop`` of the split index's
    coordinates (it removes items the serializers' ``sel`` deals), not nodes with an output below
    level k other than a reducer of the split index.  Also the *partial* outputs: those of the reducers
    of the split index in the lanes (a ``reduce`` whose output is above level k, a ``spacc1``
    adding over it), which are combined across the lanes, not followed."""
    cons: dict[PortRef, list[Edge]] = {}
    for e in g.forward_edges():
        cons.setdefault(e.src, []).append(e)
    driver = g.driver()
    inside: set[str] = set()
    partial: set[PortRef] = set()
    todo = [e.dst.node for p in split for e in cons.get(p, [])]
    while todo:
        name = todo.pop()
        if name in inside:
            continue
        node = g.nodes[name]
        outs = [node[p] for p in node.outputs()]
        if node.spec.sink or node.kind is NodeKind.SERIALIZE:
            continue  # writers, and the merge of an enclosing region's lanes
        if node.kind is NodeKind.CRD_DROP and levels[driver[node["outer"]].src] == k:
            continue  # drops coordinates of the split index: after the merge (sel deals them all)
        if node.kind in _ACCUMULATORS and levels[driver[node["outer"]].src] <= k:
            if not _lane_local_spacc(node, levels, driver, k):
                continue  # accumulates in two dimensions, or over an index outside the split
            partial.update(outs)  # lane-local sums, merged across the lanes
        elif node.kind is not NodeKind.REDUCE and any(levels[p] < k for p in outs):
            continue
        if node.kind is NodeKind.REDUCE and levels[node["val"]] < k:
            partial.update(outs)
        inside.add(name)
        todo += [e.dst.node for p in outs if levels[p] >= k and p not in partial
                 for e in cons.get(p, [])]
    return inside, partial


def _check_feedback(g: Graph, index: str, n: int, inside: set[str], edges: list[Edge]) -> None:
    for e in edges:
        if g.is_feedback(e):
            raise ParallelError(
                f"par {index}={n}: the skip requests {e} cross the parallel region's boundary; "
                f"parallelize without coordinate skipping or at another index")


def _entries(g, index, n, edges, split, levels, k, region, new_edges) -> list[PortRef]:
    """Streams into the lanes: split ports through parallelizers, outer levels broadcast.
    Returns the ``sel`` port of the first parallelizer (the serializers' order)."""
    sels: list[PortRef] = []
    for e in edges:
        kind, vec = g.edge_kind(e), _vec(g.edge_type(e).lanes)
        if e.src in split:
            p = g.add(NodeKind.PARALLELIZE, _fresh(g, f"par_{e.src.node}_{e.src.port}"), n=n,
                      stream=kind, **vec)
            new_edges.append(Edge(e.src, p["in"], None))
            new_edges += [Edge(p[f"out{lane}"], lane_port(e.dst, lane), e.depth) for lane in range(n)]
            sels.append(p["sel"])
        elif levels[e.src] < k:
            b = g.add(NodeKind.BROADCAST, _fresh(g, f"lanes_{e.src.node}_{e.src.port}"), n=n,
                      stream=kind, **vec)
            new_edges.append(Edge(e.src, b["in"], e.depth))
            new_edges += [Edge(b[f"out{lane}"], lane_port(e.dst, lane), None) for lane in range(n)]
            region.broadcast.append(str(e.src))
        else:
            raise ParallelError(
                f"par {index}={n}: node {e.dst.node!r} inside the region reads {e.src} at the "
                f"level of index {index!r} or deeper from outside it; this index cannot be "
                f"split in this dataflow order")
    for s in sels:
        g.discard(s)
    return sels


def _exits(g, index, n, edges, levels, k, region, new_edges, sels, inside, partial) -> None:
    """Streams out of the lanes: serialized (level >= k) or combined (partial reductions)."""
    serial = [e for e in edges if e.src not in partial]
    # A lane closes its item's fibres only when it sees its next token (next item or the
    # fibre's stop), which the parallelizer deals after the n - 1 items of the other lanes; the
    # serializers wait for that item, so ``sel`` must hold n items and their stops meanwhile.
    sel_depth = 2 * n + 4
    if serial:
        sel = sels[0]
        g.discards.discard(sel)
        if len(serial) > 1:
            b = g.add(NodeKind.BROADCAST, _fresh(g, f"sel_{index}"), n=len(serial),
                      stream=StreamKind.CRD)
            new_edges.append(Edge(sel, b["in"], sel_depth))
            sel_ports = [b[f"out{i}"] for i in range(len(serial))]
        else:
            sel_ports = [sel]
    for i, e in enumerate(serial):
        below = levels[e.src] - k
        s = g.add(NodeKind.SERIALIZE, _fresh(g, f"ser_{e.src.node}_{e.src.port}"), n=n,
                  stream=g.edge_kind(e), below=below, **_vec(g.edge_type(e).lanes))
        new_edges.append(Edge(sel_ports[i], s["sel"], sel_depth))
        # a lane's output FIFO holds one item's subtree, so the other lanes run on while the
        # serializer copies it (with two slots they would wait for it: no parallelism)
        depth = _unit_bound(g, levels, k, below) if below else None
        new_edges += [Edge(lane_port(e.src, lane), s[f"in{lane}"], depth) for lane in range(n)]
        new_edges.append(Edge(s["out"], e.dst, e.depth))
        region.serialized.append(str(e.src))
    merged: dict[str, dict[str, PortRef]] = {}  # sparse accumulator -> its merged outputs
    for e in (e for e in edges if e.src in partial):
        node = g.nodes[e.src.node]
        vec = _vec(g.edge_type(e).lanes)  # vector partial sums are combined lanewise
        if node.kind is NodeKind.SPACC1:
            vec = _vec(node.output_types()["val"].lanes)  # (e may be the coordinates' edge)
            if node.name not in merged:
                merged[node.name] = _merge_sparse(g, f"comb_{node.name}", [
                    (lane_port(node["crd"], lane), lane_port(node["val"], lane)) for lane in range(n)],
                    new_edges, vec, node.param("op"))
            total = merged[node.name][e.src.port]
        elif node.kind is NodeKind.SPACC2:
            if node.name not in merged:
                merged[node.name] = _merge_order2(g, f"comb_{node.name}", [
                    {p: lane_port(node[p], lane) for p in ("crd0", "crd1", "val")} for lane in range(n)],
                    new_edges, node.param("op"))
            total = merged[node.name][e.src.port]
        else:
            op = AluOp.ADD if node.param("op") is ReduceOp.ADD else AluOp.MAX
            total = _combine(g, f"comb_{e.src.node}", op,
                             [lane_port(e.src, lane) for lane in range(n)], new_edges, vec)
        region.merged[e.src] = total
        if e.dst.node in inside:
            b = g.add(NodeKind.BROADCAST, _fresh(g, f"lanes_{e.src.node}"), n=n,
                      stream=g.edge_kind(e), **_vec(g.edge_type(e).lanes))
            new_edges.append(Edge(total, b["in"], None))
            new_edges += [Edge(b[f"out{lane}"], lane_port(e.dst, lane), e.depth) for lane in range(n)]
        else:
            new_edges.append(Edge(total, e.dst, e.depth))
        region.combined.append(str(e.src))
    for name, outs in merged.items():  # an output nothing read (a total sum reads no crd)
        for port, total in outs.items():
            if g.nodes[name][port] in g.discards:  # the lanes' copies feed the merge: its output is
                g.discards.discard(g.nodes[name][port])  # discarded instead
                g.discard(total)


def _writes(node) -> bool:
    return node.spec.tensor is not None and node.spec.tensor.writes


def _writers_of(g: Graph, tensor: str) -> list[str]:
    return [n.name for n in g.nodes.values() if _writes(n) and n.params.get("tensor") == tensor]


def _bankable(g: Graph, tensor: str, exits: list[Edge], split: list[PortRef]) -> bool:
    """Every writer of ``tensor`` below its level 0 is fed by the lanes (``exits``), and its
    level 0's positions are the split's items: a compressed level 0 written from the split
    coordinates themselves, or a dense one every coordinate of which the split deals (a dense
    scan of as many coordinates)."""
    spec = g.tensors[tensor]
    driver = g.driver()
    level0 = {e.dst.node for e in exits if g.nodes[e.dst.node].params.get("level") == 0
              and _copies_split(g, e.src, split, driver)}
    fed = {e.dst.node for e in exits} - level0  # the level-0 writer stays serialized (one token an item)
    for name in fed:
        node = g.nodes[name]
        if node.spec.tensor is TensorUse.WRITES_LEVEL and (node.params["level"] == 0 or node.param("skip_empty")):
            return False
    rest = [w for w in _writers_of(g, tensor) if w not in fed]
    if rest:  # only the level-0 writer, fed the split's coordinates
        return rest == sorted(level0) or (len(rest) == 1 and g.nodes[rest[0]].params.get("level") == 0
                                          and _copies_split(g, driver[g.nodes[rest[0]]["crd"]].src, split, driver))
    # a dense level 0 nothing writes: the split deals every one of its coordinates
    return spec.fmt.levels[0] is Format.DENSE and all(
        sc.kind is NodeKind.SCAN and g.tensors[sc.params["tensor"]].fmt.levels[sc.params["level"]] is Format.DENSE
        and g.tensors[sc.params["tensor"]].level_dim(sc.params["level"]) == spec.level_dim(0)
        for sc in (g.nodes[p.node] for p in split))


def _copies_split(g: Graph, port: PortRef, split: list[PortRef], driver) -> bool:
    """``port`` carries the split's coordinates themselves (through broadcasts only)."""
    while port not in split:
        node = g.nodes[port.node]
        if node.kind is not NodeKind.BROADCAST:
            return False
        port = driver[node["in"]].src
    return True


def _bank_outputs(g: Graph, n: int, edges: list[Edge], split: list[PortRef], levels, k: int,
                  region: ParallelRegion, new_edges: list[Edge]) -> set[Edge]:
    """Banked outputs: when the split deals the items of one fibre (level 1) and the lanes'
    streams go straight to the writers of an output tensor, each lane writes its own bank (a
    tensor ``T__b<k>`` of T's format with a dense level 0 of the lane's items, declared in
    ``Graph.banks``) instead of one serializer and one writer taking a token a cycle.  ``edges``:
    the exits that are not partial reductions (those are combined across the lanes).  Returns
    the exit edges so handled."""
    if k != 1:
        return set()
    by_tensor: dict[str, list[Edge]] = {}
    for e in edges:
        node = g.nodes[e.dst.node]
        if _writes(node) and levels[e.src] >= k:
            by_tensor.setdefault(node.params["tensor"], []).append(e)
    done: set[Edge] = set()
    arrays = sum(1 if n_.spec.tensor is TensorUse.WRITES_VALS else 2 for n_ in g.nodes.values()
                 if _writes(n_))  # an upper bound on the output arrays (length registers)
    for tensor, exits in sorted(by_tensor.items()):
        spec = g.tensors[tensor]
        if spec.role is not Role.OUTPUT or tensor in g.banks or not _bankable(g, tensor, exits, split):
            continue
        exits = [e for e in exits if g.nodes[e.dst.node].params.get("level") != 0]
        per_bank = sum(1 if g.nodes[e.dst.node].spec.tensor is TensorUse.WRITES_VALS else 2
                       for e in {e.dst.node: e for e in exits}.values())
        if arrays + (n - 1) * per_bank > MAX_OUTPUT_ARRAYS:
            region.bank_note = (f"{tensor} serialized: {n} banks would need more than "
                                f"{MAX_OUTPUT_ARRAYS} output arrays")
            continue
        arrays += (n - 1) * per_bank
        d0 = spec.fmt.mode_order[0]
        shape = tuple(-(-s // n) if m == d0 else s for m, s in enumerate(spec.shape))
        names = [f"{tensor}__b{lane}" for lane in range(n)]
        for name in names:
            g.tensor(name, shape, bank_format(spec.fmt), Role.OUTPUT)
        g.banks[tensor] = names
        for w in sorted({e.dst.node for e in exits}):
            node = g.nodes.pop(w)
            for lane in range(n):
                g.add(node.kind, f"{w}_b{lane}", **{**node.params, "tensor": names[lane]})
        for e in exits:
            new_edges += [Edge(lane_port(e.src, lane), PortRef(f"{e.dst.node}_b{lane}", e.dst.port), e.depth)
                          for lane in range(n)]
            done.add(e)
        region.banked.append(tensor)
    return done


LANE_FIFO_MAX = 512


def _unit_bound(g: Graph, levels: dict[PortRef, int], k: int, below: int) -> int:
    """FIFO slots for one item's subtree ``below`` levels deep: the product of the largest
    dimensions of the indices at levels k+1 .. k+below, plus its stops (at most 512)."""
    size = 1
    for lv in range(k + 1, k + below + 1):
        dims = [_index_dim(g, p) or 0 for ps in g.indices.values() for p in ps
                if p in levels and levels[p] == lv]
        size *= max(dims, default=0) or 16
    return min(size + below + 2, LANE_FIFO_MAX)


def _vec(lanes: int) -> dict[str, int]:
    """The ``lanes`` parameter of a node on a vector stream (none on a scalar one, so scalar
    graphs are saved as before)."""
    return {"lanes": lanes} if lanes > 1 else {}


def _tree(items: list, join) -> object:
    """A balanced tree over ``items``: ``join(a, b, level, i)`` makes the ``i``-th node of tree
    level ``level`` from two items and returns its result; an odd item moves up a level."""
    level = 0
    while len(items) > 1:
        nxt = [join(items[i], items[i + 1], level, i // 2) for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            nxt.append(items[-1])
        items, level = nxt, level + 1
    return items[0]


def _combine(g: Graph, base: str, op: AluOp, ports: list[PortRef], new_edges: list[Edge],
             vec: dict[str, int] | None = None) -> PortRef:
    """A balanced tree of binary ALUs over ``ports`` (aligned value streams; ``vec``: their
    lanes)."""
    def join(pa, pb, level, i):
        a = g.add(NodeKind.ALU, _fresh(g, f"{base}_{level}_{i}"), op=op, **(vec or {}))
        new_edges.extend([Edge(pa, a["a"], None), Edge(pb, a["b"], None)])
        return a["val"]

    return _tree(ports, join)


def _merge_sparse(g: Graph, base: str, lanes: list[tuple[PortRef, PortRef]],
                  new_edges: list[Edge], vec: dict[str, int] | None = None,
                  op: ReduceOp = ReduceOp.ADD) -> dict[str, PortRef]:
    """A balanced tree of unions (values riding on their reference ports) and ALUs over the
    lanes' sparse partial results (coordinate and value streams): the total's ``crd`` and
    ``val``.  Adders (a coordinate one side lacks comes as ``N``, a 0), or for ``max`` ALUs
    that take ``N`` as the identity (the other side's value)."""
    alu = {"op": AluOp.ADD} if op is ReduceOp.ADD else {"op": AluOp.MAX, "identity_empty": True}

    def join(sa, sb, level, i):
        (ca, va), (cb, vb) = sa, sb
        u = g.add(NodeKind.UNION, _fresh(g, f"{base}_u{level}_{i}"), n=2, val_refs=(0, 1), **(vec or {}))
        a = g.add(NodeKind.ALU, _fresh(g, f"{base}_{level}_{i}"), **alu, **(vec or {}))
        new_edges.extend([Edge(ca, u["crd0"], None), Edge(va, u["ref0"], None),
                          Edge(cb, u["crd1"], None), Edge(vb, u["ref1"], None),
                          Edge(u["ref0"], a["a"], None), Edge(u["ref1"], a["b"], None)])
        return u["crd"], a["val"]

    crd, val = _tree(lanes, join)
    return {"crd": crd, "val": val}


def _merge_order2(g: Graph, base: str, lanes: list[dict[str, PortRef]], new_edges: list[Edge],
                  op: ReduceOp = ReduceOp.ADD) -> dict[str, PortRef]:
    """A balanced tree of ``merge2`` nodes over the lanes' order-2 partial results (each a
    ``crd0`` / ``crd1`` / ``val`` triple as ``spacc2`` emits it): the total's triple."""
    def join(sa, sb, level, i):
        mg = g.add(NodeKind.MERGE2, _fresh(g, f"{base}_{level}_{i}"), op=op)
        for side, part in zip("ab", (sa, sb)):
            new_edges.extend(Edge(part[p], mg[f"{p}_{side}"], None) for p in ("crd0", "crd1", "val"))
        return {p: mg[p] for p in ("crd0", "crd1", "val")}

    return _tree(lanes, join)


def _fresh(g: Graph, base: str) -> str:
    name, k = base, 1
    while name in g.nodes:
        name, k = f"{base}_{k}", k + 1
    return name


# ----------------------------------------------------------------------------- the pass
# the lane budget of ``--par auto`` without ``=L`` (fuseflow.cost.par_search)
DEFAULT_PAR_BUDGET = 16

PAR = Option("par", Kind.INDEX_MAP, None,
             "parallelize index INDEX into N lanes (1-64); repeatable, nested outermost first; "
             "added to --schedule's; auto[=L]: the factors the estimate predicts fastest under "
             f"--memory within L lanes (a power of two, default {DEFAULT_PAR_BUDGET}; at most two "
             "indices; docs/schedules.md)", sources=Source.ALL, low=1, high=MAX_LANES, units="lanes",
             metavar="INDEX=N")


PAR_BANKS = Option("par_banks", Kind.FLAG, True,
                   "merge the lanes' outputs through one serializer and writer per stream instead of "
                   "a bank per lane of an outermost split (banked outputs are reassembled by the host; "
                   "a later graph that reads the tensor from a board's DRAM needs them merged)",
                   sources=Source.ALL)


def _run(state: ProgramIR, g: GroupIR) -> Rejected | None:
    """Parallel lanes for the ``par`` indices this graph iterates (a reduced index may be named
    as its statement wrote it, when that names one fresh index of the graph).  A key
    ``GRAPH:INDEX`` applies to that graph only and overrides a plain ``INDEX``."""
    assert g.graph is not None and g.group is not None
    par = dict(state.options.par or {})
    if not par:
        return None
    mine = {}
    for key, factor in sorted(par.items(), key=lambda kv: ":" in kv[0]):
        graph, _, index = key.rpartition(":")
        fused = _fused_index(g.group, index, g.graph.indices)
        if graph in ("", g.graph.name) and fused in g.graph.indices:
            mine[fused] = factor
    try:
        g.parallel = parallelize(g.graph, mine, resize=False, banks=state.options.par_banks)
    except ParallelError as exc:
        return Rejected(f"graph {g.graph.name}: {exc}", FusionError)
    return None


def check_par_used(par: Mapping[str, int] | None, groups: list[tuple[Group, Graph]]) -> None:
    """:class:`FusionError` if an index of ``par`` is iterated by none of the graphs (for a key
    ``GRAPH:INDEX``: by graph GRAPH)."""
    def used(key: str) -> bool:
        name, _, index = key.rpartition(":")
        return any(_fused_index(grp, index, graph.indices) in graph.indices for grp, graph in groups
                   if name in ("", graph.name))

    unused = [i for i in (par or {}) if not used(i)]
    if unused:
        have = sorted({i for _, graph in groups for i in graph.indices})
        raise FusionError(f"par: no graph iterates index {', '.join(map(repr, unused))} (the "
                          f"graphs iterate {', '.join(have) or 'nothing'}; see --explain)")


def _fused_index(group: Group, index: str, indices) -> str:
    """``index`` as the graph (iterating ``indices``) names it: itself when the graph iterates
    it, else the one fresh index (``u0``, …) that stands for the reduced index ``index`` of a
    statement (a name the graph both iterates and reduces elsewhere was refused as unused)."""
    if index in indices:
        return index
    fresh = [u for u, origin in group.origins.items() if origin.startswith(f"index {index} of ")]
    return fresh[0] if len(fresh) == 1 else index


PASS = Pass("par", "parallel lanes: split an index's coordinates across lanes (or let each lane scan "
            "its share of a dense level), copy the subgraph below it, merge the lanes back or write "
            "the outputs in a bank per lane (par={index: factor})", "samml.Graph", "samml.Graph",
            _run, graph_pass_text, options=(PAR, PAR_BANKS), needs=("lower",))
