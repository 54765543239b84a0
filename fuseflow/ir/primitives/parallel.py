"""Data-parallel lanes: the stream parallelizer and serializer.

A *parallel region* of a graph runs ``n`` copies (lanes) of the subgraph below one index
variable.  Split policy: **round-robin by coordinate**.  The parallelizer sends the k-th data
token (coordinate, reference, value or ``N``; ``R`` on a repeat-signal stream) of its input
stream, counted over the whole stream, to lane ``k mod n``, and every control token (``Sk``,
``D``) to all lanes; so each lane sees the same fibers (same stop tokens) with a subset of
their coordinates.  Parallelizers on aligned streams (the coordinate and reference streams of
one index after its join) assign the same lanes, because the assignment depends only on the
count of data tokens.  The ``sel`` output records the lane of every data token (and copies
each control token): the serializers read it to put the lanes' results back in order.

A serializer merges one stream kind of ``n`` lanes into one stream.  ``below`` is how many
levels below the parallelized index the stream is (0: a stream aligned with the index's
coordinates; 1: one level deeper, e.g. the coordinates of the next index; …).  For each data
token of ``sel`` it copies that lane's *unit* (below = 0: one token; below = d ≥ 1: the lane's
tokens up to the stop that ends the item's subtree, a stop of level ≥ d − 1), and rebuilds
the stop tokens of the merged fiber: the stop ending a unit becomes ``S(d-1)`` when ``sel``
says the merged fiber has another item, and the lane's own closing stop otherwise; lanes that
had no item in a fiber give up their lone closing stop.  So the stream after the serializer
is exactly the one the unparallelized graph makes.  Both nest: a parallel region inside a lane
of another is split and merged the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import LANES_DOC, PrimitiveSpec, StreamKind, doc, stream_lanes_problems

MAX_LANES = 64


def _lanes(n: int) -> list[str]:
    if not 2 <= n <= MAX_LANES:
        return [f"n={n}: a parallel region has 2 to {MAX_LANES} lanes"]
    return []


@dataclass(frozen=True)
class ParallelizeParams:
    n: int = doc("number of lanes (2 to 64)")
    stream: StreamKind = doc("kind of the stream", StreamKind.CRD)
    lanes: int = doc(LANES_DOC + " (stream=val only)", 1)

    def check(self) -> list[str]:
        return _lanes(self.n) + stream_lanes_problems(self.stream, self.lanes)


@dataclass(frozen=True)
class SerializeParams:
    n: int = doc("number of lanes (2 to 64)")
    stream: StreamKind = doc("kind of the stream", StreamKind.CRD)
    below: int = doc("levels of the stream below the parallelized index (0: aligned with it)", 0)
    lanes: int = doc(LANES_DOC + " (stream=val only)", 1)

    def check(self) -> list[str]:
        bad = _lanes(self.n) + stream_lanes_problems(self.stream, self.lanes)
        if self.below < 0:
            bad.append(f"below={self.below} must be at least 0")
        return bad


DECLARATIONS = (
    PrimitiveSpec("parallelize", "parallel", ParallelizeParams, lambda p: {"in": p.stream},
                  lambda p: {**{f"out{i}": p.stream for i in range(p.n)}, "sel": StreamKind.CRD},
                  "splits a stream across n lanes round-robin by data token; stops to every "
                  "lane; sel = lane of each token"),
    PrimitiveSpec("serialize", "parallel", SerializeParams,
                  lambda p: {"sel": StreamKind.CRD, **{f"in{i}": p.stream for i in range(p.n)}},
                  lambda p: {"out": p.stream},
                  "merges n lanes in the order of sel, rebuilding the stop tokens of the "
                  "merged fibers"),
)
