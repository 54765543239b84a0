"""sw_sim: the parallel-region primitives (parallelize, serialize) against fibertrees split in
plain Python (``vectors.split_round_robin``: item k of the split level, counted over the whole
tree, to lane k mod n; every lane keeps every fiber).

Round trips: a random fibertree's stream at the split level, parallelized, gives the lanes'
streams of the split trees and the lane numbers as ``sel``; serializing those lanes with that
``sel`` (below = 0) gives the stream back.  One or two levels further down (below = 1, 2), the
serializer merges the lanes' streams of the deeper level into the unsplit tree's stream.  The
same holds under random input gaps and output back-pressure, and for a region nested in a lane
of another."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stream_harness import GappySource, StallingSink
from vectors import (
    fiber_stream,
    lane_numbers,
    parallel_vectors,
    serialize_vector,
    split_round_robin,
)

from fuseflow.ir.samml import PRIMITIVES, NodeKind
from fuseflow.ir.tokens import EMPTY, REPEAT, Stop, Token, format_stream, stop
from sw_sim import ProtocolError, simulate_primitive
from sw_sim.engine import Channel, Engine, Primitive
from sw_sim.run import build_primitive

LANES = [2, 3, 4, 5, 8, 64]
PROPERTY = settings(max_examples=120, derandomize=True, deadline=None)


def _leaves(tree, depth, fn):
    if depth == 1:
        return [fn(x) for x in tree]
    return [_leaves(c, depth - 1, fn) for c in tree]


def _stream(tree, depth) -> list[Token]:
    return [EMPTY if t == "N" else t for t in fiber_stream(tree, depth)]


def _fibertree(depth: int, item, fanout: int = 3, width: int = 6):
    """Fibertrees of nesting ``depth``: innermost fibers of up to ``width`` items, outer
    fibers of up to ``fanout`` children (empty fibers at every level)."""
    if depth == 1:
        return st.lists(item, max_size=width)
    return st.lists(_fibertree(depth - 1, item, fanout, width), max_size=fanout)


_COORD = st.one_of(st.integers(0, 999), st.just("N"))


def _run(kind, inputs, **params):
    return simulate_primitive(kind, inputs, **params)


# ----------------------------------------------------------------------------- round trips
@PROPERTY
@given(data=st.data())
def test_split_level_round_trip(data):
    """below = 0: parallelize = the split trees' streams; serialize(sel, lanes) = the stream."""
    depth = data.draw(st.integers(1, 3), "depth")
    tree = data.draw(_fibertree(depth, _COORD), "tree")
    n = data.draw(st.sampled_from(LANES), "n")
    s = _stream(tree, depth)
    par = _run("parallelize", {"in": s}, n=n)
    lanes = split_round_robin(tree, depth, n)
    for k in range(n):
        assert par[f"out{k}"] == _stream(lanes[k], depth), k
    assert par["sel"] == fiber_stream(lane_numbers(tree, depth, n), depth)
    merged = _run("serialize", {"sel": par["sel"], **{f"in{k}": par[f"out{k}"] for k in range(n)}}, n=n)
    assert merged["out"] == s
    # latency 0, II 1 (a broadcast's timing on the same streams)
    assert par.cycles == _run("broadcast", {"in": s}, n=2).cycles
    assert merged.cycles == par.cycles


@PROPERTY
@given(data=st.data())
def test_deeper_level_round_trip(data):
    """below = 1, 2: a 2-, 3- or 4-level fibertree split on the parallelized level (the outer
    one, or the one below a further outer level); the serializer merges the lanes' streams of
    the level ``below`` levels down into the unsplit tree's stream."""
    depth = data.draw(st.integers(1, 2), "depth")
    below = data.draw(st.integers(1, 2), "below")
    subtree = _fibertree(below, _COORD, width=4)
    tree = data.draw(_fibertree(depth, st.tuples(st.integers(0, 999), subtree), width=5), "tree")
    n = data.draw(st.sampled_from(LANES), "n")
    sel = _run("parallelize", {"in": _stream(_leaves(tree, depth, lambda x: x[0]), depth)}, n=n)["sel"]
    assert sel == fiber_stream(lane_numbers(tree, depth, n), depth)
    lanes = split_round_robin(tree, depth, n)
    deep = {f"in{k}": _stream(_leaves(lanes[k], depth, lambda x: x[1]), depth + below) for k in range(n)}
    want = _stream(_leaves(tree, depth, lambda x: x[1]), depth + below)
    merged = _run("serialize", {"sel": sel, **deep}, n=n, below=below)
    assert merged["out"] == want
    # timing (the model's rule): one cycle per output token, one to load sel's first token, and
    # one per merged fiber that had an item (closing it emits nothing)
    fibers_with_items = sum(1 for a, b in itertools.pairwise(sel) if isinstance(b, Stop) and isinstance(a, int))
    assert merged.cycles == _run("broadcast", {"in": want}, n=2).cycles + 1 + fibers_with_items


@PROPERTY
@given(data=st.data())
def test_repeat_signal_round_trip(data):
    """A repeat-signal stream splits at its R tokens (data words in hardware); its stops are S0."""
    depth = data.draw(st.integers(1, 3), "depth")
    tree = data.draw(_fibertree(depth, st.just(REPEAT)), "tree")
    n = data.draw(st.sampled_from(LANES[:4]), "n")

    def rs(t):
        return [stop(0) if isinstance(x, Stop) else x for x in fiber_stream(t, depth)]

    par = _run("parallelize", {"in": rs(tree)}, n=n, stream="repsig")
    lanes = split_round_robin(tree, depth, n)
    assert [par[f"out{k}"] for k in range(n)] == [rs(lane) for lane in lanes]
    assert par["sel"] == rs(lane_numbers(tree, depth, n))
    merged = _run("serialize", {"sel": par["sel"], **{f"in{k}": par[f"out{k}"] for k in range(n)}}, n=n,
                  stream="repsig")
    assert merged["out"] == rs(tree)


@pytest.mark.parametrize("vec", parallel_vectors(random.Random(5), 4),
                         ids=lambda v: "-".join([v.kind, *(str(x) for x in v.params.values())]))
def test_corpus_vectors(vec):
    """The corpus vectors (tests/vectors.py) against the trees they were made from."""
    res = _run(vec.kind, vec.inputs, **vec.params)
    assert {p: res[p] for p in vec.expected} == vec.expected


def test_lanes_without_items_and_empty_fibers():
    """Written out by hand: fiber [5, 6] gives lane 2 no item, fiber [7] lanes 0 and 1; the
    last fiber is empty in every lane.  One level down each lane closes its item-less fibers
    with lone stops."""
    par = _run("parallelize", {"in": "5,6,S0,7,S0,S1,D"}, n=3)
    assert [format_stream(par[p]) for p in ("out0", "out1", "out2", "sel")] == [
        "5,S0,S0,S1,D", "6,S0,S0,S1,D", "S0,7,S0,S1,D", "0,1,S0,2,S0,S1,D"]
    # below 1: items 5, 6 | 7 | (none) own the fibers [1], [] | [2, 3] | -
    deep = {"in0": "1,S1,S1,S2,D", "in1": "S1,S1,S2,D", "in2": "S1,2,3,S1,S2,D"}
    out = _run("serialize", {"sel": par["sel"], **deep}, n=3, below=1)
    assert format_stream(out["out"]) == "1,S0,S1,2,3,S1,S2,D"
    assert _stream([[[1], []], [[2, 3]], []], 3) == out["out"]


# ----------------------------------------------------------------------------- protocol
def test_protocol_errors_name_the_lane():
    with pytest.raises(ProtocolError, match=r"node 'serialize'.*lane 1 has S1 where the others close with S0"):
        _run("serialize", {"sel": "0,S0,D", "in0": "4,S0,D", "in1": "S1,D"}, n=2)
    with pytest.raises(ProtocolError, match=r"lane 1 has S0 where sel expects a coordinate"):
        _run("serialize", {"sel": "0,1,S0,D", "in0": "4,S0,D", "in1": "S0,D"}, n=2)
    with pytest.raises(ProtocolError, match=r"lane 0 closes with S1 where sel closes with S1"):
        _run("serialize", {"sel": "0,S1,D", "in0": "4,S1,D", "in1": "S2,D"}, n=2, below=1)
    with pytest.raises(ProtocolError, match=r"lane 1 has S1 where its empty fiber closes with S2"):
        _run("serialize", {"sel": "0,S1,D", "in0": "4,S2,D", "in1": "S1,D"}, n=2, below=1)


# ----------------------------------------------------------------------------- back-pressure
class _Net:
    """A network of primitives between fed inputs and drained outputs, channels of random
    depth 2 to 4."""

    def __init__(self, gap: float, stall: float, seed: int):
        self.rng = random.Random(seed)
        self.gap, self.stall = gap, stall
        self.prims: list[Primitive] = []
        self.chans: list[Channel] = []
        self.drains: dict[str, StallingSink] = {}

    def chan(self, name: str) -> Channel:
        self.chans.append(Channel(name, self.rng.randint(2, 4)))
        return self.chans[-1]

    def feed(self, name: str, tokens) -> Channel:
        c = self.chan(name)
        self.prims.append(GappySource(f"feed_{name}", c, tokens, self.gap, self.rng))
        return c

    def drain(self, name: str) -> Channel:
        c = self.chan(name)
        self.drains[name] = StallingSink(f"drain_{name}", c, self.stall, self.rng)
        return c

    def node(self, kind: str, name: str, ins: dict[str, Channel], outs: dict[str, Channel], **params):
        k = NodeKind(kind)
        self.prims.append(build_primitive(k, name, ins, outs, PRIMITIVES[k].view(params)))

    def run(self) -> dict[str, list[Token]]:
        sinks = list(self.drains.values())
        Engine(self.prims + sinks, self.chans, sinks).run(max_cycles=100_000)
        return {k: d.tokens for k, d in self.drains.items()}


PRESSURE = [(0.0, 0.0), (0.5, 0.0), (0.0, 0.6), (0.4, 0.6), (0.7, 0.3)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("gap", "stall"), PRESSURE)
def test_corpus_under_back_pressure(gap, stall, seed):
    """Every kind of corpus vector (a fresh draw per seed) with random input gaps, output stalls
    and channel depths: exactly the expected tokens, none lost or duplicated."""
    for vec in parallel_vectors(random.Random(100 + seed), 1):
        net = _Net(gap, stall, seed)
        ins = {p: net.feed(p, toks) for p, toks in vec.inputs.items()}
        outs = {p: net.drain(p) for p in vec.expected}
        net.node(vec.kind, vec.kind, ins, outs, **vec.params)
        assert net.run() == vec.expected, vec.params


@pytest.mark.parametrize("seed", range(8))
def test_split_then_merge_under_back_pressure(seed):
    """Parallelize straight into serialize (below 0) through FIFOs of random depth, with random
    gaps and stalls: the identity."""
    rng = random.Random(seed)
    n = rng.choice(LANES)
    vec = serialize_vector(rng, n, rng.choice(("crd", "ref", "val")), 0, rng.randint(1, 3))
    stream = vec.expected["out"]
    net = _Net(*PRESSURE[seed % len(PRESSURE)], seed)
    lanes = {f"out{k}": net.chan(f"lane{k}") for k in range(n)}
    sel = net.chan("sel")
    net.node("parallelize", "par", {"in": net.feed("in", stream)}, {**lanes, "sel": sel}, n=n)
    net.node("serialize", "ser", {"sel": sel, **{f"in{k}": lanes[f"out{k}"] for k in range(n)}},
             {"out": net.drain("out")}, n=n)
    assert net.run()["out"] == stream


@pytest.mark.parametrize("seed", range(8))
def test_nested_regions_under_back_pressure(seed):
    """A region over index j nested in each lane of a region over index i (the level above):
    the outer parallelizer splits i's stream into n1 lanes; in lane a, j's stream (fed from the
    split tree) is split again into n2 lanes and merged (below 0); the outer serializer merges
    the lanes' j streams (below 1).  Under random gaps and stalls the result is j's unsplit
    stream and the outer lanes are the split tree's."""
    rng = random.Random(seed)
    n1, n2, depth = rng.choice((2, 3, 4)), rng.choice((2, 3, 5)), rng.randint(1, 2)
    vec = serialize_vector(rng, n1, "crd", 1, depth)
    sel = vec.inputs["sel"]
    i_stream = [pos if isinstance(t, int) else t for pos, t in enumerate(sel)]  # items numbered
    net = _Net(*PRESSURE[seed % len(PRESSURE)], 1000 + seed)
    sel_o = net.chan("sel_o")
    outer = {f"out{a}": net.drain(f"i_lane{a}") for a in range(n1)}
    net.node("parallelize", "par_i", {"in": net.feed("i", i_stream)}, {**outer, "sel": sel_o}, n=n1)
    merged = {}
    for a in range(n1):
        inner = {f"out{b}": net.chan(f"j_lane{a}.{b}") for b in range(n2)}
        sel_i = net.chan(f"sel_i{a}")
        net.node("parallelize", f"par_j{a}", {"in": net.feed(f"j{a}", vec.inputs[f"in{a}"])}, {**inner, "sel": sel_i},
                 n=n2)
        merged[f"in{a}"] = net.chan(f"j_merged{a}")
        net.node("serialize", f"ser_j{a}", {"sel": sel_i, **{f"in{b}": inner[f"out{b}"] for b in range(n2)}},
                 {"out": merged[f"in{a}"]}, n=n2)
    net.node("serialize", "ser_i", {"sel": sel_o, **merged}, {"out": net.drain("j")}, n=n1, below=1)
    got = net.run()
    assert got["j"] == vec.expected["out"]
    for a in range(n1):  # lane a: the items sel gives it, every stop
        assert got[f"i_lane{a}"] == [pos if isinstance(t, int) else t for pos, t in enumerate(sel)
                                     if t == a or not isinstance(t, int)]
