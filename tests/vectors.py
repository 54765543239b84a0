"""Stream vectors shared by the sw_sim and RTL primitive tests.

Random vectors are built from random *fibertrees* (nested lists) with :func:`fiber_stream`, an
independent statement of the SAM stream convention: a depth-1 fiber emits its elements then
``S0``; a deeper fiber emits its children's streams with the last stop raised by one; an empty
fiber of depth ``d`` emits ``S(d-1)``; the whole stream ends with ``D``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from fuseflow.ir.samml import Graph, NodeKind, Role
from fuseflow.ir.tensor import Blocking, row_blocked
from fuseflow.ir.tokens import DONE, EMPTY, REPEAT, Control, Stop, Token, Vec, stop

__all__ = ["Vector", "all_vectors", "design_vectors", "fiber_stream", "lane_numbers", "overflow_vectors",
           "random_vectors", "relu_blocks_graph", "split_round_robin"]


def _tokens(tree: list, depth: int) -> list[Token]:
    if depth == 1:
        return [*tree, stop(0)]
    if not tree:
        return [stop(depth - 1)]
    out: list[Token] = []
    for child in tree:
        out += _tokens(child, depth - 1)
    out[-1] = stop(out[-1].level + 1)
    return out


def fiber_stream(tree: list, depth: int) -> list[Token]:
    """The stream of the innermost level of ``tree`` (a fiber of nesting ``depth``), with ``D``."""
    return [*_tokens(tree, depth), DONE]


def split_round_robin(tree: list, depth: int, n: int) -> list[list]:
    """The ``n`` lane trees of a parallel region over the innermost level of ``tree`` (nesting
    ``depth``): item k of that level, counted in stream order over the whole tree, goes to lane
    ``k mod n``; every lane keeps every fiber (some of them empty in that lane)."""
    count = [0]

    def walk(t, d):
        if d == 1:
            lanes: list[list] = [[] for _ in range(n)]
            for x in t:
                lanes[count[0] % n].append(x)
                count[0] += 1
            return lanes
        kids = [walk(c, d - 1) for c in t]
        return [[k[i] for k in kids] for i in range(n)]

    return walk(tree, depth)


def lane_numbers(tree: list, depth: int, n: int) -> list:
    """``tree`` with each innermost item replaced by its lane (its index in stream order mod n)."""
    count = [-1]

    def lane(_):
        count[0] += 1
        return count[0] % n

    return _map_leaves(tree, depth, lane)


def _map_leaves(tree, depth, fn):
    if depth == 1:
        return [fn(x) for x in tree]
    return [_map_leaves(c, depth - 1, fn) for c in tree]


def _shape_like(tree, depth, rng, leaf_fn):
    """A tree with the same outer structure whose innermost fibers come from ``leaf_fn``."""
    if depth == 1:
        return leaf_fn(rng)
    return [_shape_like(c, depth - 1, rng, leaf_fn) for c in tree]


def _rand_tree(rng: random.Random, depth: int, leaf_fn, max_fanout: int = 4) -> list:
    if depth == 1:
        return leaf_fn(rng)
    return [_rand_tree(rng, depth - 1, leaf_fn, max_fanout) for _ in range(rng.randint(0, max_fanout))]


def _sorted_crds(rng: random.Random, dim: int = 12, p: float = 0.35) -> list[int]:
    return [c for c in range(dim) if rng.random() < p]


def _number_leaves(tree, depth, start=0):
    """Replace leaves by consecutive positions (references), as a scanner would."""
    counter = [start]

    def fn(_):
        counter[0] += 1
        return counter[0] - 1

    return _map_leaves(tree, depth, fn)


@dataclass
class Vector:
    kind: str
    inputs: dict[str, list[Token]]
    params: dict[str, Any] = field(default_factory=dict)  # structural (shared by a build)
    memory: dict[str, list[int]] = field(default_factory=dict)  # seg / crd / vals contents
    name: str = ""
    expected: dict[str, list[Token]] | None = None  # independent expectation, where known
    # independent expectation of whether the arithmetic wraps a result (int32), where known
    overflow: bool | None = None

    def key(self) -> tuple:
        return (self.kind, tuple(sorted((k, str(v)) for k, v in self.params.items())))


def design_vectors() -> list[tuple[Vector, dict[str, str]]]:
    """Worked examples of each primitive with outputs written by hand from the stream rules
    (README "Tokens and streams", the docstrings of the sw_sim models)."""
    V = Vector
    return [
        (V("scan", {"ref": "0,1,2,S0,D"}, {"format": "compressed"}, {"seg": [0, 2, 2, 5], "crd": [1, 3, 0, 2, 4]}),
         {"crd": "1,3,S0,S0,0,2,4,S1,D", "ref": "0,1,S0,S0,2,3,4,S1,D"}),
        (V("scan", {"ref": "0,1,S0,D"}, {"format": "dense", "dim": 3}),
         {"crd": "0,1,2,S0,0,1,2,S1,D", "ref": "0,1,2,S0,3,4,5,S1,D"}),
        # a non-unique level: every stored position is a coordinate of its own, repeats included
        (V("scan", {"ref": "0,1,S0,D"}, {"format": "compressed_nonunique"}, {"seg": [0, 3, 5], "crd": [2, 2, 5, 0, 0]}),
         {"crd": "2,2,5,S0,0,0,S1,D", "ref": "0,1,2,S0,3,4,S1,D"}),
        # a singleton level: reference r is the one-position fibre r (N: empty)
        (V("scan", {"ref": "2,0,N,S0,1,S1,D"}, {"format": "singleton"}, {"crd": [4, 7, 1]}),
         {"crd": "1,S0,4,S0,S1,7,S2,D", "ref": "2,S0,0,S0,S1,1,S2,D"}),
        (V("repeat", {"ref": "5,7,S0,D", "repsig": "R,R,S,R,S,D"}), {"ref": "5,5,S0,7,S1,D"}),
        (V("intersect", {"crd0": "0,2,5,S0,1,S1,D", "crd1": "2,3,5,S0,0,S1,D",
                         "ref0": "0,1,2,S0,3,S1,D", "ref1": "0,1,2,S0,3,S1,D"}, {"n": 2}),
         {"crd": "2,5,S0,S1,D", "ref0": "1,2,S0,S1,D", "ref1": "0,2,S0,S1,D"}),
        (V("union", {"crd0": "1,4,S0,D", "crd1": "0,4,S0,D", "ref0": "0,1,S0,D", "ref1": "0,1,S0,D"}, {"n": 2}),
         {"crd": "0,1,4,S0,D", "ref0": "N,0,1,S0,D", "ref1": "0,N,1,S0,D"}),
        (V("crd_drop", {"outer": "0,1,2,S0,D", "inner": "4,S0,S0,5,6,S1,D"}),
         {"outer": "0,2,S0,D", "inner": "4,S0,S0,5,6,S1,D"}),
        (V("locate", {"outer": "1,N,2,S0,D", "inner": "0,4,S0,1,S0,S1,D"}, {"dim": 5}),
         {"ref": "5,9,S0,N,S0,S1,D"}),
        (V("array_load", {"ref": "2,N,0,S0,D"}, {}, {"vals": [10, 20, 30]}), {"val": "30,0,10,S0,D"}),
        (V("alu", {"a": "1,2,S0,D", "b": "3,4,S0,D"}, {"op": "mul"}), {"val": "3,8,S0,D"}),
        (V("reduce", {"val": "1,2,S0,3,S1,D"}, {"op": "add"}), {"val": "3,3,S0,D"}),
        (V("spacc1", {"outer": "0,1,S0,D", "inner": "0,2,S0,2,3,S1,D", "val": "1,2,S0,10,20,S1,D"}, {"dim": 8}),
         {"crd": "0,2,3,S0,D", "val": "1,12,20,S0,D"}),
        # double-buffered: the same tokens; an empty fiber, and a fiber closed by a higher stop
        (V("spacc1", {"outer": "0,1,S0,S0,3,S1,D", "inner": "0,2,S0,2,3,S1,S1,1,S2,D",
                      "val": "1,2,S0,10,20,S1,S1,5,S2,D"}, {"dim": 8, "buffers": 2}),
         {"crd": "0,2,3,S0,S0,1,S1,D", "val": "1,12,20,S0,S0,5,S1,D"}),
        (V("repsig", {"in": "0,2,S0,5,S1,D"}), {"repsig": "R,R,S0,R,S0,D"}),
        # items 1,2,3,4,N go to lanes 0,1,0,1,0; every stop to both lanes and to sel
        (V("parallelize", {"in": "1,2,S0,S0,3,4,N,S1,D"}, {"n": 2}),
         {"out0": "1,S0,S0,3,N,S1,D", "out1": "2,S0,S0,4,S1,D", "sel": "0,1,S0,S0,0,1,0,S1,D"}),
        (V("serialize", {"sel": "0,1,S0,S0,0,1,0,S1,D", "in0": "1,S0,S0,3,N,S1,D", "in1": "2,S0,S0,4,S1,D"},
           {"n": 2}), {"out": "1,2,S0,S0,3,4,N,S1,D"}),
        # one level down: items a, b | c (lanes 0, 1 | 0) own the fibers [4, 5], [6] | [7]; lane 1
        # has no item in the second fiber, so it closes it with a lone S2
        (V("serialize", {"sel": "0,1,S0,0,S1,D", "in0": "4,5,S1,7,S2,D", "in1": "6,S1,S2,D"},
           {"n": 2, "below": 1}), {"out": "4,5,S0,6,S1,7,S2,D"}),
        # an empty merged fiber (no lane had an item): its stop is emitted once
        (V("serialize", {"sel": "0,S0,S1,D", "in0": "8,S1,S2,D", "in1": "S1,S2,D", "in2": "S1,S2,D"},
           {"n": 3, "below": 1}), {"out": "8,S1,S2,D"}),
        # two order-2 results: a = {(0,1): 5, (2,0): 1, (2,3): 2}, b = {(1,1): 7, (2,3): 4, (2,4): 9};
        # then a second outer fiber, empty on side a and {(3,3): -1} on side b
        (V("merge2", {"crd0_a": "0,2,S0,S1,D", "crd1_a": "1,S0,0,3,S1,S2,D", "val_a": "5,S0,1,2,S1,S2,D",
                      "crd0_b": "1,2,S0,3,S1,D", "crd1_b": "1,S0,3,4,S1,3,S2,D", "val_b": "7,S0,4,9,S1,-1,S2,D"}),
         {"crd0": "0,1,2,S0,3,S1,D", "crd1": "1,S0,1,S0,0,3,4,S1,3,S2,D", "val": "5,S0,7,S0,1,6,9,S1,-1,S2,D"}),
        # both sides empty in the first outer fiber: its lone stops are emitted once; max keeps
        # the side that has a coordinate, whatever its sign
        (V("merge2", {"crd0_a": "S0,4,S1,D", "crd1_a": "S1,0,S2,D", "val_a": "S1,-3,S2,D",
                      "crd0_b": "S0,4,S1,D", "crd1_b": "S1,0,2,S2,D", "val_b": "S1,-8,-5,S2,D"}, {"op": "max"}),
         {"crd0": "S0,4,S1,D", "crd1": "S1,0,2,S2,D", "val": "S1,-3,-5,S2,D"}),
    ]


def random_vectors(seed: int = 1, per_kind: int = 6) -> list[Vector]:
    """Protocol-valid random vectors for every primitive (several per build key)."""
    rng = random.Random(seed)
    out: list[Vector] = []
    for i in range(per_kind):
        depth = 1 + i % 3
        # scanners: a random CSR-like level and a ref stream into it (some N refs)
        nfib = rng.randint(1, 6)
        fibers = [_sorted_crds(rng) for _ in range(nfib)]
        seg = [0]
        for f in fibers:
            seg.append(seg[-1] + len(f))
        crd = [c for f in fibers for c in f]
        refs = _rand_tree(rng, depth, lambda r, nfib=nfib: [r.randrange(nfib) if r.random() > 0.15 else "N"
                                                            for _ in range(r.randint(0, 4))])
        out.append(Vector("scan", {"ref": _n(fiber_stream(refs, depth))}, {"format": "compressed"},
                          {"seg": seg, "crd": crd}))
        out.append(Vector("scan", {"ref": _n(fiber_stream(_map_leaves(refs, depth, lambda x: 0 if x == "N" else x % 3),
                                                          depth))}, {"format": "dense", "dim": 4}))
        out += _coo_scan_vectors(random.Random(3000 * seed + i), depth)  # an rng of its own
        # joiners: same outer structure, independent innermost coordinates
        shape = _rand_tree(rng, depth, lambda r: None)
        for kind, n in (("intersect", 2), ("union", 2), ("intersect", 3), ("union", 3)):
            ins = {}
            for k in range(n):
                t = _shape_like(shape, depth, rng, _sorted_crds)
                ins[f"crd{k}"] = fiber_stream(t, depth)
                ins[f"ref{k}"] = fiber_stream(_number_leaves(t, depth, 100 * k), depth)
            out.append(Vector(kind, ins, {"n": n}))
            if kind == "intersect":  # the same inputs, with skip outputs
                out.append(Vector(kind, ins, {"n": n, "skip": True}))
        # joiners whose last input's ref stream carries values (factored iteration)
        for kind in ("intersect", "union"):
            t0, t1 = (_shape_like(shape, depth, rng, _sorted_crds) for _ in range(2))
            vals1 = _map_leaves(t1, depth, lambda _: rng.randint(-(2**20), 2**20))
            out.append(Vector(kind, {"crd0": fiber_stream(t0, depth), "ref0": fiber_stream(_number_leaves(t0, depth), depth),
                                     "crd1": fiber_stream(t1, depth), "ref1": fiber_stream(vals1, depth)},
                              {"n": 2, "val_refs": (1,)}))
        # repeat: refs (depth d) and a repeat count per ref -> repsig of depth d+1
        rt = _rand_tree(rng, depth, lambda r: [r.randrange(50) for _ in range(r.randint(0, 3))])
        counted = _map_leaves(rt, depth, lambda r: (r, rng.randint(0, 3)))
        rs_tree = _map_leaves(counted, depth, lambda rc: [REPEAT] * rc[1])
        rs = [t if t is REPEAT or t is DONE else stop(0) for t in fiber_stream(rs_tree, depth + 1)]
        expected = fiber_stream(_map_leaves(counted, depth, lambda rc: [rc[0]] * rc[1]), depth + 1)
        out.append(Vector("repeat", {"ref": fiber_stream(rt, depth), "repsig": rs}, expected={"ref": expected}))
        big = _map_leaves(counted, depth, lambda rc: (rc[0] - 25) * 99991)
        out.append(Vector("repeat", {"ref": fiber_stream(big, depth), "repsig": rs}, {"stream": "val"},
                          expected={"ref": fiber_stream(_map_leaves(counted, depth, lambda rc: [(rc[0] - 25) * 99991] * rc[1]),
                                                        depth + 1)}))
        out.append(Vector("repsig", {"in": fiber_stream(rt, depth)}))
        # outer/inner walkers: outer coordinates with one inner fiber each (some empty)
        ot = _rand_tree(rng, depth, lambda r: sorted(r.sample(range(20), r.randint(0, 4))))
        it = _map_leaves(ot, depth, lambda _: _sorted_crds(rng, 8, 0.3))
        for kind in ("crd_drop", "crd_hold"):
            out.append(Vector(kind, {"outer": fiber_stream(ot, depth), "inner": fiber_stream(it, depth + 1)}))
        # (an rng of its own: the other kinds' vectors stay as they were)
        out.append(_locate_vector(random.Random(1000 * seed + i), depth, (5, 11)[i % 2]))
        # spacc1: outer k coordinates, inner j fibers, values
        vt = _map_leaves(it, depth + 1, lambda _: rng.randint(-50, 50))
        out.append(Vector("spacc1", {"outer": fiber_stream(ot, depth), "inner": fiber_stream(it, depth + 1),
                                     "val": fiber_stream(vt, depth + 1)}, {"dim": 8}))
        out.append(Vector("spacc1", out[-1].inputs, {"dim": 8, "buffers": 2}))  # the same, double-buffered
        # values: array load, ALU, reduce, writers, broadcast
        vals = [rng.randint(-1000, 1000) for _ in range(16)]
        lt = _rand_tree(rng, depth, lambda r: [r.randrange(16) if r.random() > 0.2 else "N" for _ in range(r.randint(0, 4))])
        out.append(Vector("array_load", {"ref": _n(fiber_stream(lt, depth))}, {}, {"vals": vals}))
        at = _rand_tree(rng, depth, lambda r: [r.randint(-3000, 3000) for _ in range(r.randint(0, 4))])
        bt = _map_leaves(at, depth, lambda _: rng.randint(-3000, 3000))
        for op in ("add", "sub", "mul", "max", "min"):
            out.append(Vector("alu", {"a": fiber_stream(at, depth), "b": fiber_stream(bt, depth)}, {"op": op}))
        for op in ("add", "max"):
            out.append(Vector("reduce", {"val": fiber_stream(at, depth)}, {"op": op}))
        wt = _rand_tree(rng, depth + 1, lambda r: _sorted_crds(r, 10, 0.4))
        out.append(Vector("write", {"crd": fiber_stream(wt, depth + 1)}, {"format": "compressed"}))
        out.append(Vector("write", {"crd": fiber_stream(wt, depth + 1)}, {"format": "compressed", "skip_empty": True}))
        out.append(Vector("vals_write", {"val": fiber_stream(at, depth)}))
        out.append(Vector("broadcast", {"in": fiber_stream(wt, depth + 1)}, {"n": 3}))
        out += _attention_vectors(rng, depth)
    out.append(Vector("root", {}, expected={"ref": [0, DONE]}))
    out += parallel_vectors(random.Random(7000 + seed), per_kind)
    out += vector_vectors(random.Random(9000 + seed), per_kind)
    return out


def _coo_scan_vectors(rng: random.Random, depth: int) -> list[Vector]:
    """COO levels: a non-unique level (fibres of non-decreasing coordinates with repeats) and a
    singleton level (one coordinate per position), each with a ref stream (some N refs)."""
    nfib = rng.randint(1, 6)
    fibers = [sorted(rng.choices(range(8), k=rng.randint(0, 5))) for _ in range(nfib)]
    seg = [0]
    for f in fibers:
        seg.append(seg[-1] + len(f))
    refs = _rand_tree(rng, depth, lambda r: [r.randrange(nfib) if r.random() > 0.15 else "N"
                                             for _ in range(r.randint(0, 4))])
    n = rng.randint(1, 12)
    single = _rand_tree(rng, depth, lambda r: [r.randrange(n) if r.random() > 0.15 else "N"
                                               for _ in range(r.randint(0, 4))])
    return [Vector("scan", {"ref": _n(fiber_stream(refs, depth))}, {"format": "compressed_nonunique"},
                   {"seg": seg, "crd": [c for f in fibers for c in f]}),
            Vector("scan", {"ref": _n(fiber_stream(single, depth))}, {"format": "singleton"},
                   {"crd": [rng.randrange(12) for _ in range(n)]})]


def _locate_vector(rng: random.Random, depth: int, dim: int) -> Vector:
    """Locate: parent references (some ``N``) with one inner coordinate fiber each (some ``N``
    coordinates, some empty fibers); the expected references ``p * dim + c`` from the tree."""
    def fiber(r):
        return [c if r.random() > 0.1 else "N" for c in _sorted_crds(r, dim, 0.4)]

    pairs = _rand_tree(rng, depth, lambda r: [(r.randrange(30) if r.random() > 0.15 else "N", fiber(r))
                                              for _ in range(r.randint(0, 4))])
    parents = _map_leaves(pairs, depth, lambda pf: pf[0])
    inner = _map_leaves(pairs, depth, lambda pf: pf[1])
    located = _map_leaves(pairs, depth, lambda pf: ["N" if "N" in (pf[0], c) else pf[0] * dim + c for c in pf[1]])
    return Vector("locate", {"outer": _n(fiber_stream(parents, depth)), "inner": _n(fiber_stream(inner, depth + 1))},
                  {"dim": dim}, expected={"ref": _n(fiber_stream(located, depth + 1))})


def _attention_vectors(rng: random.Random, depth: int) -> list[Vector]:
    """Coordinate mask, stop-token drop and the order-2 accumulator (the primitives the
    attention and outer-product lowerings use), on random fibertrees."""
    out = []
    rows = [[j for j in range(12) if rng.random() < 0.5] for _ in range(rng.randint(0, 5))]
    outer = sorted(rng.sample(range(12), len(rows)))
    refs, k = [], 0
    for r in rows:
        refs.append(list(range(k, k + len(r))))
        k += len(r)
    mask_in = {"outer": fiber_stream(outer, 1), "inner": fiber_stream(rows, 2), "ref": fiber_stream(refs, 2)}
    out.append(Vector("crd_mask", mask_in, {"pred": "causal"}))
    out.append(Vector("stkn_drop", {"in": fiber_stream(_rand_tree(rng, depth + 1, lambda r: _sorted_crds(r, 6, 0.2)),
                                                       depth + 1)}))
    # spacc2: per outer fiber, k coordinates each holding a sparse (i, j) matrix
    ks = [sorted(rng.sample(range(5), rng.randint(0, 3))) for _ in range(rng.randint(1, 3))]
    mats = [[{i: sorted(rng.sample(range(6), rng.randint(0, 3))) for i in sorted(rng.sample(range(4), rng.randint(0, 3)))}
             for _ in row] for row in ks]
    out.append(Vector("spacc2", {
        "outer": fiber_stream(ks, 2),
        "inner0": fiber_stream([[sorted(m) for m in row] for row in mats], 3),
        "inner1": fiber_stream([[[m[i] for i in sorted(m)] for m in row] for row in mats], 4),
        "val": fiber_stream([[[[rng.randint(-50, 50) for _ in m[i]] for i in sorted(m)] for m in row] for row in mats], 4),
    }, {"dim0": 4, "dim1": 6}))
    out.append(Vector("spacc2", out[-1].inputs, {"dim0": 4, "dim1": 6, "buffers": 2}))  # double-buffered
    out += _merge2_vectors(rng)
    return out


def _order2_streams(fibres: list[dict[tuple[int, int], int]]) -> dict[str, list[Token]]:
    """The streams of order-2 results (one ``{(i, j): value}`` per outer fiber) as ``spacc2``
    emits them: rows in ``i`` order, each row's entries in ``j`` order."""
    rows = [sorted({i for i, _ in f}) for f in fibres]
    return {"crd0": fiber_stream(rows, 2),
            "crd1": fiber_stream([[sorted(j for (i2, j) in f if i2 == i) for i in r] for f, r in zip(fibres, rows)], 3),
            "val": fiber_stream([[[f[i, j] for j in sorted(j for (i2, j) in f if i2 == i)] for i in r]
                                 for f, r in zip(fibres, rows)], 3)}


def _merge2_vectors(rng: random.Random) -> list[Vector]:
    """Two sides' order-2 results over the same outer fibers (some empty, some rows and entries
    on one side only, some on both), with the merge written from dictionaries: the sum (or the
    maximum) at each (i, j) either side has."""
    out = []
    for op in ("add", "max"):
        n = rng.randint(1, 3)
        sides = [[{(i, j): rng.randint(-40, 40) for i in range(5) for j in range(6) if rng.random() < 0.25}
                  for _ in range(n)] for _ in range(2)]
        merged = []
        for fa, fb in zip(*sides):
            f = dict(fa)
            for key, v in fb.items():
                f[key] = (f[key] + v if op == "add" else max(f[key], v)) if key in f else v
            merged.append(f)
        a, b = _order2_streams(sides[0]), _order2_streams(sides[1])
        inputs = {**{f"{p}_a": t for p, t in a.items()}, **{f"{p}_b": t for p, t in b.items()}}
        out.append(Vector("merge2", inputs, {"op": op}, expected=_order2_streams(merged)))
    return out


# ----------------------------------------------------------------------------- parallel regions
# build keys: (kind, n, stream kind, below); serialize vectors are the lanes of a split tree
_PARALLELIZE = ((2, "crd"), (3, "ref"), (4, "val"), (3, "repsig"), (64, "crd"))
_SERIALIZE = ((2, "crd", 0), (3, "val", 0), (4, "ref", 0), (3, "repsig", 0), (2, "crd", 1), (3, "val", 1),
              (4, "ref", 1), (2, "crd", 2), (3, "ref", 2), (4, "val", 2), (64, "crd", 1))


def _par_fiber(stream: str, big: bool):
    """Random innermost fibers of a stream kind (some empty; crd / ref with some ``N``)."""
    size = 50 if big else 5

    def crd(r):
        return [c if r.random() > 0.15 else "N" for c in sorted(r.sample(range(200), r.randint(0, size)))]

    def ref(r):
        return [r.randrange(1 << 16) if r.random() > 0.15 else "N" for _ in range(r.randint(0, size))]

    def val(r):
        return [r.randint(-(2**20), 2**20) for _ in range(r.randint(0, size))]

    return {"crd": crd, "ref": ref, "val": val, "repsig": crd}[stream]


def _par_stream(tree: list, depth: int, stream: str) -> list[Token]:
    """The stream of ``tree``; a repeat-signal stream has ``R`` for every item and only ``S0``."""
    toks = _n(fiber_stream(tree, depth))
    if stream == "repsig":
        return [t if t is DONE else stop(0) if isinstance(t, Stop) else REPEAT for t in toks]
    return toks


def _par_tree(rng: random.Random, depth: int, stream: str, below: int, big: bool, root: bool = True) -> list:
    """A fibertree of nesting ``depth`` (outer fibers of 1 to 3 children, a few empty below the
    root) whose innermost items are pairs (token, subtree of nesting ``below``)."""
    fiber, sub = _par_fiber(stream, big), _par_fiber(stream, False)
    if depth == 1:
        return [(x, _rand_tree(rng, below, sub, 3) if below else None) for x in fiber(rng)]
    width = 0 if not root and rng.random() < 0.2 else rng.randint(1, 3)
    return [_par_tree(rng, depth - 1, stream, below, big, False) for _ in range(width)]


def _sel_stream(tree: list, depth: int, n: int, stream: str) -> list[Token]:
    """The sel stream of a split of ``tree``: the lane of each item, the tree's stops (``S0``
    only when the split stream is a repeat signal)."""
    toks = _n(fiber_stream(lane_numbers(tree, depth, n), depth))
    if stream == "repsig":
        return [stop(0) if isinstance(t, Stop) else t for t in toks]
    return toks


def parallel_vectors(rng: random.Random, per_kind: int = 6) -> list[Vector]:
    """Parallelize and serialize on random fibertrees split round-robin (split_round_robin),
    each of nesting 1, 2 or 3 (n > 8: 2): the parallelizer's lanes and sel, and the serializer's
    merge of the lanes' streams ``below`` levels under the split one, expected from the trees."""
    out = []
    for i in range(per_kind):
        for n, stream in _PARALLELIZE:
            d = 2 if n > 8 else 1 + i % 3
            items = _map_leaves(_par_tree(rng, d, stream, 0, n > 8), d, lambda x: x[0])
            lanes = split_round_robin(items, d, n)
            out.append(Vector("parallelize", {"in": _par_stream(items, d, stream)}, {"n": n, "stream": stream},
                              expected={**{f"out{k}": _par_stream(lanes[k], d, stream) for k in range(n)},
                                        "sel": _sel_stream(items, d, n, stream)}))
        for n, stream, below in _SERIALIZE:
            out.append(serialize_vector(rng, n, stream, below, 2 if n > 8 else 1 + i % 3))
    return out


def serialize_vector(rng: random.Random, n: int, stream: str, below: int, depth: int) -> Vector:
    """A serializer vector: a random tree of nesting ``depth`` split round-robin on its
    innermost level; the lanes' streams ``below`` levels further down, the sel stream of the
    split, and the unsplit stream as the expected output."""
    t = _par_tree(rng, depth, stream, below, n > 8)
    lanes = split_round_robin(t, depth, n)

    def level_stream(tree):
        if below == 0:
            return _par_stream(_map_leaves(tree, depth, lambda x: x[0]), depth, stream)
        return _par_stream(_map_leaves(tree, depth, lambda x: x[1]), depth + below, stream)

    return Vector("serialize", {"sel": _sel_stream(t, depth, n, stream),
                                **{f"in{k}": level_stream(lanes[k]) for k in range(n)}},
                  {"n": n, "stream": stream, "below": below}, expected={"out": level_stream(t)})


# ----------------------------------------------------------------------------- vector streams
def vectorize(tokens: list[Token], lanes: int) -> list[Token]:
    """A value stream's data tokens made vectors of ``lanes`` lanes (lane l of x: x * (l + 1) - l,
    distinct per lane), control tokens kept: a vector stream of the same shape."""
    return [t if isinstance(t, Control) else Vec([t * (k + 1) - k for k in range(lanes)]) for t in tokens]


def _rand_vec(rng: random.Random, lanes: int, lo: int = -3000, hi: int = 3000) -> Vec:
    return Vec([rng.randint(lo, hi) for _ in range(lanes)])


def vector_vectors(rng: random.Random, per_kind: int = 6) -> list[Vector]:
    """Vector value streams (``lanes`` > 1): every extended kind's lanewise configuration and
    the lane reduction, on random fibertrees of vectors; the routing kinds on vectorized copies
    of a scalar stream (their output is the scalar output vectorized)."""
    out = []
    for i in range(per_kind):
        depth = 1 + i % 3
        w = (2, 4, 8)[i % 3]
        vals = [rng.randint(-1000, 1000) for _ in range(8 * 4)]
        lt = _rand_tree(rng, depth, lambda r: [r.randrange(8) if r.random() > 0.2 else "N" for _ in range(r.randint(0, 4))])
        for lanes in (2, 4):
            out.append(Vector("array_load", {"ref": _n(fiber_stream(lt, depth))}, {"lanes": lanes},
                              {"vals": vals[:8 * lanes]},
                              expected={"val": _n(fiber_stream(_map_leaves(lt, depth, lambda r, lanes=lanes, vals=vals: Vec([0] * lanes) if r == "N"
                                                                          else Vec(vals[r * lanes:(r + 1) * lanes])), depth))}))
        at = _rand_tree(rng, depth, lambda r: [_rand_vec(r, 4) for _ in range(r.randint(0, 4))])
        bt = _map_leaves(at, depth, lambda _: _rand_vec(rng, 4))
        st = _map_leaves(at, depth, lambda _: rng.randint(-3000, 3000))  # one value per token
        a, b, sc = fiber_stream(at, depth), fiber_stream(bt, depth), fiber_stream(st, depth)
        for op in ("add", "sub", "mul", "max", "min"):
            out.append(Vector("alu", {"a": a, "b": b}, {"op": op, "lanes": 4}))
        out.append(Vector("alu", {"a": a, "b": sc}, {"op": "mul", "lanes": 4, "scalar_port": "b"}))
        out.append(Vector("alu", {"a": sc, "b": b}, {"op": "sub", "lanes": 4, "scalar_port": "a"}))
        out.append(Vector("alu", {"a": vectorize(fiber_stream(_map_leaves(at, depth, lambda v: v[0]), depth), 2)},
                          {"op": "relu", "lanes": 2}))
        for op in ("add", "max"):
            out.append(Vector("reduce", {"val": a}, {"op": op, "lanes": 4}))
        wt = _rand_tree(rng, depth, lambda r, w=w: [_rand_vec(r, w) if r.random() > 0.15 else "N"
                                                   for _ in range(r.randint(0, 4))])
        out.append(Vector("lane_reduce", {"val": _n(fiber_stream(wt, depth))}, {"op": "add", "lanes": w},
                          expected={"val": _n(fiber_stream(_map_leaves(wt, depth, lambda v: 0 if v == "N" else sum(v)),
                                                           depth))}))
        out.append(Vector("lane_reduce", {"val": a}, {"op": "max", "lanes": 4}))
        out.append(Vector("vals_write", {"val": _n(fiber_stream(wt, depth))}, {"lanes": w}))
        # spacc1 over vectors: outer k coordinates, inner j fibers, vector values
        ot = _rand_tree(rng, depth, lambda r: sorted(r.sample(range(20), r.randint(0, 4))))
        it = _map_leaves(ot, depth, lambda _: _sorted_crds(rng, 8, 0.3))
        vt = _map_leaves(it, depth + 1, lambda _: _rand_vec(rng, 4, -50, 50))
        acc_in = {"outer": fiber_stream(ot, depth), "inner": fiber_stream(it, depth + 1), "val": fiber_stream(vt, depth + 1)}
        out.append(Vector("spacc1", acc_in, {"dim": 8, "lanes": 4}))
        out.append(Vector("spacc1", acc_in, {"dim": 8, "lanes": 4, "buffers": 2}))
        out += _routed_vectors(rng, depth)
    return out


def _routed_vectors(rng: random.Random, depth: int) -> list[Vector]:
    """The routing kinds on vector streams: each the vectorized inputs of a scalar case, the
    vectorized scalar result expected (a routing node moves values without looking at them)."""
    out = []
    rt = _rand_tree(rng, depth, lambda r: [r.randint(-500, 500) for _ in range(r.randint(0, 3))])
    counted = _map_leaves(rt, depth, lambda r: (r, rng.randint(0, 3)))
    rs = [t if t is REPEAT or t is DONE else stop(0)
          for t in fiber_stream(_map_leaves(counted, depth, lambda rc: [REPEAT] * rc[1]), depth + 1)]
    rep = fiber_stream(_map_leaves(counted, depth, lambda rc: [rc[0]] * rc[1]), depth + 1)
    out.append(Vector("repeat", {"ref": vectorize(fiber_stream(rt, depth), 4), "repsig": rs}, {"stream": "val", "lanes": 4},
                      expected={"ref": vectorize(rep, 4)}))
    vs = vectorize(fiber_stream(rt, depth), 2)
    out.append(Vector("repsig", {"in": vs}, {"stream": "val", "lanes": 2},
                      expected={"repsig": [REPEAT if not isinstance(t, Control) else t if t is DONE else stop(0)
                                           for t in vs]}))
    out.append(Vector("broadcast", {"in": vs}, {"n": 2, "stream": "val", "lanes": 2},
                      expected={"out0": vs, "out1": vs}))
    out.append(Vector("stkn_drop", {"in": vectorize(fiber_stream(_rand_tree(rng, depth + 1, lambda r: [
        r.randint(-9, 9) for _ in range(r.randint(0, 2))]), depth + 1), 2)}, {"stream": "val", "lanes": 2}))
    shape = _rand_tree(rng, depth, lambda r: None)
    t0, t1 = (_shape_like(shape, depth, rng, _sorted_crds) for _ in range(2))
    vals1 = _map_leaves(t1, depth, lambda _: rng.randint(-(2**20), 2**20))
    for kind in ("intersect", "union"):
        out.append(Vector(kind, {"crd0": fiber_stream(t0, depth), "ref0": fiber_stream(_number_leaves(t0, depth), depth),
                                 "crd1": fiber_stream(t1, depth), "ref1": vectorize(fiber_stream(vals1, depth), 4)},
                          {"n": 2, "val_refs": (1,), "lanes": 4}))
    scalar = serialize_vector(rng, 2, "val", depth % 2, depth)
    out.append(Vector("serialize", {p: (s if p == "sel" else vectorize(s, 4)) for p, s in scalar.inputs.items()},
                      {**scalar.params, "lanes": 4}, expected={"out": vectorize(scalar.expected["out"], 4)}))
    items = _map_leaves(_par_tree(rng, depth, "val", 0, False), depth, lambda x: x[0])
    lanes = split_round_robin(items, depth, 3)
    out.append(Vector("parallelize", {"in": vectorize(_par_stream(items, depth, "val"), 4)},
                      {"n": 3, "stream": "val", "lanes": 4},
                      expected={**{f"out{k}": vectorize(_par_stream(lanes[k], depth, "val"), 4) for k in range(3)},
                                "sel": _sel_stream(items, depth, 3, "val")}))
    return out


def relu_blocks_graph(n: int, k: int, lanes: int) -> Graph:
    """``Z = relu(A)``, both row-blocked in blocks of ``lanes`` columns: the blocks move as
    vectors from the vector load through a vector relu into a vector values writer."""
    g = Graph("relu_blocks")
    fmt = row_blocked(lanes)
    g.tensor("A", fmt.stored_shape((n, k)), fmt.stored(), block=Blocking(fmt, (n, k)))
    g.tensor("Z", fmt.stored_shape((n, k)), fmt.stored(), Role.OUTPUT, block=Blocking(fmt, (n, k)))
    g.add(NodeKind.ROOT, "root")
    g.add(NodeKind.SCAN, "si", tensor="A", level=0)
    g.add(NodeKind.SCAN, "sk", tensor="A", level=1)
    g.add(NodeKind.WRITE, "wz0", tensor="Z", level=0)
    g.add(NodeKind.WRITE, "wz1", tensor="Z", level=1)
    g.add(NodeKind.ARRAY_LOAD, "la", tensor="A", lanes=lanes)
    g.add(NodeKind.ALU, "relu", op="relu", lanes=lanes)
    g.add(NodeKind.VALS_WRITE, "wz", tensor="Z", lanes=lanes)
    for s, d in [("root.ref", "si.ref"), ("si.ref", "sk.ref"), ("si.crd", "wz0.crd"), ("sk.crd", "wz1.crd"),
                 ("sk.ref", "la.ref"), ("la.val", "relu.a"), ("relu.val", "wz.val")]:
        g.connect(s, d)
    g.indices = {"i": [g.nodes["si"]["crd"]], "K": [g.nodes["sk"]["crd"]]}
    return g


def _n(tokens: list) -> list[Token]:
    return [EMPTY if t == "N" else t for t in tokens]


def all_vectors() -> list[Vector]:
    return [v for v, _ in design_vectors()] + random_vectors()


# ----------------------------------------------------------------------------- overflow
HI, LO = 2**31 - 1, -(2**31)  # the int32 range of the default value width


def _wraps(v: int) -> bool:
    return not LO <= v <= HI


def _wrap(v: int) -> int:
    return (v - LO) % 2**32 + LO


_EXACT = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "max": max, "min": min}


def _alu_vector(op: str, rows_a: list, rows_b: list) -> Vector:
    """A binary ALU vector on 2-level value streams; overflow when an exact result (Python
    integers, ``N`` as 0) leaves int32."""
    pairs = [(0 if x == "N" else x, 0 if y == "N" else y) for ra, rb in zip(rows_a, rows_b) for x, y in zip(ra, rb)]
    return Vector("alu", {"a": _n(fiber_stream(rows_a, 2)), "b": _n(fiber_stream(rows_b, 2))}, {"op": op},
                  overflow=any(_wraps(_EXACT[op](x, y)) for x, y in pairs))


def _sum_overflows(groups: list[list[tuple]]) -> bool:
    """Whether summing each group's values by key (in order; the first value of a key stored as
    it is) meets a partial sum outside int32 (the sum then wraps)."""
    for group in groups:
        acc: dict = {}
        for key, v in group:
            if key in acc:
                if _wraps(acc[key] + v):
                    return True
                acc[key] = _wrap(acc[key] + v)
            else:
                acc[key] = v
    return False


def overflow_vectors() -> list[Vector]:
    """Vectors at the int32 bounds for the primitives whose arithmetic can wrap (ALU, reduce,
    spacc1, spacc2), each with ``overflow``: whether a result leaves the range, from exact
    Python integers.  Their build keys are those of :func:`random_vectors` (no extra builds);
    they are kept out of :func:`all_vectors` (the formal proofs size their datapath from the
    vector's numbers)."""
    out = [
        _alu_vector("add", [[HI - 1, LO, 5], ["N", HI]], [[1, 0, "N"], [HI, "N"]]),  # HI, LO, 5; N is 0
        _alu_vector("add", [[3], [HI, 1]], [[4], [1, 2]]),  # HI + 1
        _alu_vector("add", [[LO]], [[-1]]),
        _alu_vector("sub", [[-1, 0, LO]], [[LO, -HI, 0]]),  # -1 - LO = HI
        _alu_vector("sub", [[0]], [[LO]]),  # 2**31
        _alu_vector("mul", [[46340, LO, HI]], [[46340, 1, -1]]),  # 2147395600 fits
        _alu_vector("mul", [[46341]], [[46341]]),  # 2147488281
        _alu_vector("mul", [[2], [-1]], [[3], [LO]]),  # -LO
        _alu_vector("mul", [[65536, -65536, 1, -46341]], [[32767, 32768, HI, 46340]]),  # -2**31 fits
        _alu_vector("mul", [[-65536, 65536]], [[-32768, 2]]),  # 2**31
        _alu_vector("max", [[HI, LO]], [[LO, HI]]),
        _alu_vector("min", [[HI, LO]], [[LO, HI]]),
    ]
    for rows in ([[HI, -1, 1]], [[HI, 1, -1]], [[LO, HI]], [[LO, -1]], [[HI], [1], [HI]], [[HI, "N"], [5]]):
        groups = [[(0, 0 if x == "N" else x) for x in r] for r in rows]
        for op in ("add", "max"):
            out.append(Vector("reduce", {"val": _n(fiber_stream(rows, 2))}, {"op": op},
                              overflow=op == "add" and _sum_overflows(groups)))
    # spacc1: outer fibers of k, each k an inner fiber of (j, value); sums by j per outer fiber
    for fibers in ([[[(3, HI)], [(3, 1)]]], [[[(3, HI)], [(3, -1)], [(5, LO)]]], [[[(3, HI)]], [[(3, 1)]]],
                   [[[(2, LO), (6, 7)], [(2, -1)]]], [[[(1, 5)], []], [[(1, HI), (4, HI)], [(4, 0)]]]):
        outer = [list(range(len(f))) for f in fibers]
        inner = [[[j for j, _ in kf] for kf in f] for f in fibers]
        vals = [[[v for _, v in kf] for kf in f] for f in fibers]
        groups = [[jv for kf in f for jv in kf] for f in fibers]
        ins = {"outer": fiber_stream(outer, 2), "inner": fiber_stream(inner, 3), "val": fiber_stream(vals, 3)}
        for params in ({"dim": 8}, {"dim": 8, "buffers": 2}):
            out.append(Vector("spacc1", ins, params, overflow=_sum_overflows(groups)))
    # spacc2: outer fibers of k, each k a sparse (i, j) matrix; sums by (i, j) per outer fiber
    for fibers in ([[{2: [(5, HI)]}, {2: [(5, 1)]}]], [[{2: [(5, HI)]}, {2: [(5, -1)], 3: [(0, LO)]}]],
                   [[{1: [(1, LO)]}], [{1: [(1, -1)]}]], [[{0: [(0, 9)]}, {0: [(0, LO)], 1: [(2, 1)]}, {0: [(0, LO)]}]]):
        ks = [list(range(len(f))) for f in fibers]
        ins = {"outer": fiber_stream(ks, 2),
               "inner0": fiber_stream([[sorted(m) for m in f] for f in fibers], 3),
               "inner1": fiber_stream([[[[j for j, _ in m[i]] for i in sorted(m)] for m in f] for f in fibers], 4),
               "val": fiber_stream([[[[v for _, v in m[i]] for i in sorted(m)] for m in f] for f in fibers], 4)}
        groups = [[((i, j), v) for m in f for i in sorted(m) for j, v in m[i]] for f in fibers]
        for params in ({"dim0": 4, "dim1": 6}, {"dim0": 4, "dim1": 6, "buffers": 2}):
            out.append(Vector("spacc2", ins, params, overflow=_sum_overflows(groups)))
    # merge2: two sides' order-2 results; only an (i, j) both sides have is combined
    for fa, fb, wraps in (({(0, 0): HI}, {(0, 0): 1}, True), ({(0, 0): HI}, {(0, 1): 1}, False),
                          ({(1, 2): LO, (3, 0): 5}, {(1, 2): -1}, True), ({(1, 2): LO}, {(1, 2): HI}, False)):
        a, b = _order2_streams([fa]), _order2_streams([fb])
        ins = {**{f"{p}_a": t for p, t in a.items()}, **{f"{p}_b": t for p, t in b.items()}}
        out.append(Vector("merge2", ins, {"op": "add"}, overflow=wraps))
    return out + _vector_overflow_vectors()


def _tree_wraps(lanes: list[int]) -> bool:
    """Whether the pairwise tree of ``lane_reduce`` (add) meets a sum outside int32 (each level
    wraps, as the hardware does)."""
    level = lanes
    while len(level) > 1:
        sums = [level[i] + level[i + 1] for i in range(0, len(level), 2)]
        if any(_wraps(x) for x in sums):
            return True
        level = sums
    return False


def _vector_overflow_vectors() -> list[Vector]:
    """The vector configurations of :func:`vector_vectors` at the int32 bounds: a lane of a
    vector ALU, a lanewise reduction, a level of a lane reduction or a lane of a vector
    accumulator wraps (or, in the control cases, nothing does)."""
    out = []
    for a, b in (([Vec([HI, 1, 0, 0])], [Vec([1, 1, 0, 0])]), ([Vec([HI, LO, 0, 0])], [Vec([0, 0, 5, -5])])):
        ins = {"a": fiber_stream([a], 2), "b": fiber_stream([b], 2)}
        over = any(_wraps(x + y) for va, vb in zip(a, b) for x, y in zip(va, vb))
        out.append(Vector("alu", ins, {"op": "add", "lanes": 4}, overflow=over))
    for x, sc in ((Vec([46341, 1, 2, 3]), 46341), (Vec([46340, -46340, 1, 0]), 46340)):
        ins = {"a": fiber_stream([[x]], 2), "b": fiber_stream([[sc]], 2)}
        out.append(Vector("alu", ins, {"op": "mul", "lanes": 4, "scalar_port": "b"},
                          overflow=any(_wraps(v * sc) for v in x)))
    for rows in ([[Vec([HI, 0, 0, 0]), Vec([1, 0, 0, 0])]], [[Vec([HI, LO, 1, -1]), Vec([0, 0, 1, -1])]]):
        over = any(_wraps(sum(v[k] for v in r)) for r in rows for k in range(4))
        out.append(Vector("reduce", {"val": fiber_stream(rows, 2)}, {"op": "add", "lanes": 4}, overflow=over))
    for vec in (Vec([HI, 1, -1, 0]), Vec([HI, -1, 1, 0]), Vec([LO, -1, 0, 0])):
        out.append(Vector("lane_reduce", {"val": fiber_stream([[vec]], 2)}, {"op": "add", "lanes": 4},
                          overflow=_tree_wraps(list(vec))))
    for first, second in ((Vec([HI, 0, 0, 0]), Vec([1, 0, 0, 0])), (Vec([HI, 0, 0, 0]), Vec([-1, 0, 0, 0]))):
        ins = {"outer": fiber_stream([[0, 1]], 2), "inner": fiber_stream([[[3], [3]]], 3),
               "val": fiber_stream([[[first], [second]]], 3)}
        over = any(_wraps(first[k] + second[k]) for k in range(4))
        for params in ({"dim": 8, "lanes": 4}, {"dim": 8, "lanes": 4, "buffers": 2}):
            out.append(Vector("spacc1", ins, params, overflow=over))
    return out
