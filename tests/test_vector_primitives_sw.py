"""Vector value streams in sw_sim against numpy references written here: every primitive
configuration with ``lanes`` > 1 in the corpus (tests/vectors.py), the lane reduction's tree
and latency, FLOP / byte counters and overflow counts of vector graphs, and the verifier's lane
rules (an edge whose two ends disagree on lanes is an error naming the edge, nodes and lanes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamref import fibers
from vectors import random_vectors, relu_blocks_graph

from fuseflow.ir.samml import Graph, GraphError, NodeKind, Role
from fuseflow.ir.tensor import TensorData, TensorFormat, row_blocked
from fuseflow.ir.tokens import DONE, EMPTY, Control, Stop, Vec, parse_stream, stop
from sw_sim import run_graph, simulate_primitive
from fuseflow.ir.overflow import NumericOverflowError

VECTORS = [v for v in random_vectors() if v.params.get("lanes", 1) > 1]


def _of(kind, **match):
    return [v for v in VECTORS if v.kind == kind and all(v.params.get(k) == x for k, x in match.items())]


def _ids(v):
    return "-".join(f"{k}{x}" for k, x in sorted(v.params.items()) if k not in ("val_refs",))


def _np(tok, lanes):
    """A token's lanes as an int64 array (N: zeros), None for a control token."""
    if tok is EMPTY:
        return np.zeros(lanes, np.int64)
    if isinstance(tok, Control):
        return None
    return np.asarray(tok, np.int64) if isinstance(tok, Vec) else np.full(lanes, tok, np.int64)


def _vec(a) -> Vec:
    return Vec(int(x) for x in a)


def test_corpus_covers_every_vector_configuration():
    kinds = {v.kind for v in VECTORS}
    assert kinds >= {"array_load", "alu", "reduce", "lane_reduce", "spacc1", "vals_write", "repeat", "repsig",
                     "broadcast", "stkn_drop", "intersect", "union", "parallelize", "serialize"}


@pytest.mark.parametrize("vec", _of("array_load"), ids=_ids)
def test_vector_load_reads_lanes_of_a_row(vec):
    w = vec.params["lanes"]
    rows = np.asarray(vec.memory["vals"]).reshape(-1, w)  # row r = the W values of position r
    out = simulate_primitive("array_load", vec.inputs, **vec.params, **vec.memory)["val"]
    want = [t if isinstance(t, Control) and t is not EMPTY else _vec(rows[t] if t is not EMPTY else np.zeros(w))
            for t in parse_stream(vec.inputs["ref"])]
    assert out == want


OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("vec", _of("alu"), ids=_ids)
def test_vector_alu_lanewise(vec):
    w, op = vec.params["lanes"], vec.params["op"]
    out = simulate_primitive("alu", vec.inputs, **vec.params)["val"]
    a = parse_stream(vec.inputs["a"])
    if op == "relu":
        want = [x if isinstance(x, Control) else _vec(np.maximum(_np(x, w), 0)) for x in a]
    else:
        b = parse_stream(vec.inputs["b"])
        want = [x if isinstance(x, Control) and x is not EMPTY else _vec(OPS[op](_np(x, w), _np(y, w)))
                for x, y in zip(a, b)]
    assert out == want


@pytest.mark.parametrize("vec", _of("reduce"), ids=_ids)
def test_vector_reduce_lanewise(vec):
    w, op = vec.params["lanes"], vec.params["op"]
    fn = np.sum if op == "add" else np.max
    init = 0 if op == "add" else -(2**31)
    want = []
    for elems, s in fibers(vec.inputs["val"]):
        arr = np.array([_np(e, w) for e in elems]).reshape(-1, w)
        acc = np.maximum(fn(arr, axis=0), init) if op == "max" and len(arr) else (fn(arr, axis=0) if len(arr) else np.full(w, init))
        want.append(_vec(acc))
        if s.level:
            want.append(stop(s.level - 1))
    assert simulate_primitive("reduce", vec.inputs, **vec.params)["val"] == want + [DONE]


@pytest.mark.parametrize("vec", _of("lane_reduce"), ids=_ids)
def test_lane_reduce_per_vector(vec):
    w, op = vec.params["lanes"], vec.params["op"]
    fn = np.sum if op == "add" else np.max
    want = [t if isinstance(t, Control) and t is not EMPTY else int(fn(_np(t, w)))
            for t in parse_stream(vec.inputs["val"])]
    assert simulate_primitive("lane_reduce", vec.inputs, **vec.params)["val"] == want


@pytest.mark.parametrize("vec", _of("spacc1"), ids=_ids)
def test_vector_spacc1_sums_lanewise(vec):
    w = vec.params["lanes"]
    out = simulate_primitive("spacc1", vec.inputs, **vec.params)
    crds, vals, acc = [], [], {}
    for (ce, s), (ve, _) in zip(fibers(vec.inputs["inner"]), fibers(vec.inputs["val"])):
        for c, v in zip(ce, ve):
            acc[c] = acc.get(c, np.zeros(w, np.int64)) + _np(v, w)
        if s.level >= 1:
            crds += sorted(acc) + [stop(s.level - 1)]
            vals += [_vec(acc[k]) for k in sorted(acc)] + [stop(s.level - 1)]
            acc = {}
    assert out["crd"] == crds + [DONE] and out["val"] == vals + [DONE]


@pytest.mark.parametrize("vec", _of("vals_write"), ids=_ids)
def test_vector_writer_flattens(vec):
    w = vec.params["lanes"]
    toks = [t for t in parse_stream(vec.inputs["val"]) if not isinstance(t, Stop) and t is not DONE]
    want = np.concatenate([_np(t, w) for t in toks]) if toks else np.zeros(0)
    assert simulate_primitive("vals_write", vec.inputs, **vec.params)["vals"] == list(want)


@pytest.mark.parametrize("vec", [v for v in VECTORS if v.expected], ids=lambda v: f"{v.kind}-{_ids(v)}")
def test_routing_and_expected_vectors(vec):
    res = simulate_primitive(vec.kind, vec.inputs, **vec.params, **vec.memory)
    assert {p: res[p] for p in vec.expected} == vec.expected


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([2, 4, 8, 16, 64]), st.sampled_from(["add", "max"]),
       st.lists(st.integers(-(2**31), 2**31 - 1), min_size=64, max_size=64), st.integers(0, 6))
def test_lane_reduce_tree_and_latency(lanes, op, pool, count):
    """A pairwise tree in the datapath's int32 (wrapping at every step, as numpy's int32 does),
    and 1 + log2(lanes) cycles from a token's pop to its result's push."""
    vecs = [Vec(pool[(k * lanes + i) % 64] for i in range(lanes)) for k in range(count)]
    res = simulate_primitive("lane_reduce", {"val": [*vecs, stop(0), DONE]}, op=op, lanes=lanes)
    fn = np.add if op == "add" else np.maximum
    with np.errstate(over="ignore"):
        want = [int(fn.reduce(np.asarray(v, np.int32), dtype=np.int32)) for v in vecs]
    assert res["val"] == [*want, stop(0), DONE]
    # one token per cycle, each ``latency`` cycles in the tree: the scalar ALU's add (latency 2)
    # on as many tokens takes exactly log2(lanes) - 1 cycles less
    latency = 1 + lanes.bit_length() - 1
    scalar = [1] * count + [stop(0), DONE]
    alu = simulate_primitive("alu", {"a": scalar, "b": scalar}, op="add")
    assert res.cycles == alu.cycles + latency - 2 == (count + 2) + latency + 2


def _vector_graph(lanes: int, offchip: bool = False) -> tuple[Graph, dict]:
    """``y_i = sum_j A_ij * x_j`` with A row-blocked (blocks of ``lanes`` columns) and x
    blocked alike: root -> scan i -> scan J -> loads -> vector mul -> lane_reduce -> reduce."""
    n, m = 4, 4 * lanes
    g = Graph("vspmv")
    g.tensor("A", (n, m // lanes, lanes), row_blocked(lanes).stored())
    g.tensor("x", (m // lanes, lanes), TensorFormat(("dense", "dense")))
    g.tensor("y", (n,), TensorFormat(("dense",)), Role.OUTPUT)
    g.add(NodeKind.ROOT, "root")
    g.add(NodeKind.SCAN, "si", tensor="A", level=0)
    g.add(NodeKind.SCAN, "sj", tensor="A", level=1)
    g.add(NodeKind.BROADCAST, "bj", n=2)
    g.add(NodeKind.LOCATE, "loc", dim=m // lanes)
    g.add(NodeKind.ROOT, "rootx")
    g.add(NodeKind.REPSIG, "rs")
    g.add(NodeKind.REPEAT, "rep")
    g.add(NodeKind.ARRAY_LOAD, "la", tensor="A", lanes=lanes)
    g.add(NodeKind.ARRAY_LOAD, "lx", tensor="x", lanes=lanes)
    g.add(NodeKind.ALU, "mul", op="mul", lanes=lanes)
    g.add(NodeKind.LANE_REDUCE, "lr", op="add", lanes=lanes)
    g.add(NodeKind.REDUCE, "red", op="add")
    g.add(NodeKind.VALS_WRITE, "wy", tensor="y")
    for s, d in [("root.ref", "si.ref"), ("si.ref", "sj.ref"), ("si.crd", "rs.in"), ("rootx.ref", "rep.ref"),
                 ("rs.repsig", "rep.repsig"), ("sj.crd", "bj.in"), ("rep.ref", "loc.outer"), ("bj.out0", "loc.inner"),
                 ("sj.ref", "la.ref"), ("loc.ref", "lx.ref"), ("la.val", "mul.a"), ("lx.val", "mul.b"),
                 ("mul.val", "lr.val"), ("lr.val", "red.val"), ("red.val", "wy.val")]:
        g.connect(s, d)
    g.discard("bj.out1")
    rng = np.random.default_rng(lanes)
    a = rng.integers(-9, 10, (n, m)) * np.kron(rng.random((n, m // lanes)) < 0.5, np.ones((1, lanes), int))
    x = rng.integers(-9, 10, m)
    data = {"A": TensorData.from_blocks(a, row_blocked(lanes), name="A"),
            "x": TensorData.from_dense(x.reshape(-1, lanes), g.tensors["x"].fmt)}
    return g, {"data": data, "a": a, "x": x}


@pytest.mark.parametrize("lanes", [2, 4, 8])
def test_vector_graph_values_counters(lanes):
    g, d = _vector_graph(lanes)
    g.verify(d["data"])
    r = run_graph(g, d["data"])
    assert np.array_equal(r.outputs["y"].to_dense(), d["a"] @ d["x"])
    blocks = d["data"]["A"].nnz // lanes  # stored blocks: one vector load of A and of x each
    c = r.counters
    assert c["flops"]["mul"] == blocks * lanes  # a vector op counts W FLOPs
    assert c["flops"]["add"] == blocks * (lanes - 1) + blocks  # lane_reduce W-1 adds, reduce one
    assert c["arrays"]["A.vals"]["words_read"] == blocks * lanes
    assert c["arrays"]["A.vals"]["bytes_read"] == blocks * lanes * 4  # W values of 4 bytes per load
    assert c["arrays"]["x.vals"]["bytes_read"] == blocks * lanes * 4


def test_vector_overflow_counts_each_lane():
    res = simulate_primitive("alu", {"a": [Vec((2**31 - 1, 5, -(2**31), 2**30)), DONE],
                                     "b": [Vec((1, 1, -1, 2**30)), DONE]}, op="add", lanes=4)
    assert res["val"][0] == (-(2**31), 6, 2**31 - 1, -(2**31))  # int32 wraps lane by lane
    g, d = _vector_graph(2)
    d["data"]["x"].vals[:] = 2**30  # a product a_ij * 2**30 outside int32 wraps, lane by lane
    with pytest.raises(NumericOverflowError, match="node 'mul' wrapped"):
        run_graph(g, d["data"])  # the default policy: a wrapped result raises
    r = run_graph(g, d["data"], on_overflow="ignore")
    products = np.asarray(d["data"]["A"].vals, np.int64) * 2**30
    assert r.overflows["mul"] == int(np.count_nonzero((products > 2**31 - 1) | (products < -(2**31))))


def test_verifier_names_a_lane_mismatch():
    g, _ = _vector_graph(4)
    g.nodes["lr"].params["lanes"] = 2
    with pytest.raises(GraphError, match=r"edge mul\.val -> lr\.val: lanes differ: output val of node 'mul' \(alu\) "
                                         r"carries 4 lanes, input val of node 'lr' \(lane_reduce\) takes 2"):
        g.verify()
    g, _ = _vector_graph(4)
    g.nodes["red"].params["lanes"] = 4
    with pytest.raises(GraphError, match=r"edge lr\.val -> red\.val: lanes differ: output val of node 'lr' "
                                         r"\(lane_reduce\) carries 1 lane, input val of node 'red' \(reduce\) takes 4"):
        g.verify()


def test_vector_load_needs_a_dense_innermost_level_of_its_lanes():
    g, _ = _vector_graph(4)
    g.nodes["la"].params["lanes"] = 2
    g.nodes["mul"].params["lanes"] = 2
    g.nodes["lx"].params["lanes"] = 2
    g.nodes["lr"].params["lanes"] = 2
    with pytest.raises(GraphError, match=r"node 'la' \(array_load\): lanes=2 moves the 2 values under one position, "
                                         r"so the innermost level of tensor 'A' must be dense with 2 entries; it is "
                                         r"dense with 4 entries"):
        g.verify()


@pytest.mark.parametrize("kind, params, match", [
    (NodeKind.ALU, {"op": "mul", "lanes": 3}, "lanes=3 must be a power of two from 1 to 64"),
    (NodeKind.ALU, {"op": "mul", "lanes": 128}, "lanes=128"),
    (NodeKind.ALU, {"op": "relu", "lanes": 4, "scalar_port": "a"}, "scalar_port=a needs a binary op"),
    (NodeKind.ALU, {"op": "mul", "scalar_port": "b"}, r"scalar_port=b needs a vector \(lanes > 1\)"),
    (NodeKind.LANE_REDUCE, {"op": "add", "lanes": 1}, "lanes=1: a lane reduction takes vectors of 2 lanes or more"),
    (NodeKind.LANE_REDUCE, {"op": "add"}, "missing parameter 'lanes'"),
    (NodeKind.BROADCAST, {"n": 2, "lanes": 4}, "lanes=4 needs stream=val"),
    (NodeKind.REPEAT, {"lanes": 2}, "lanes=2 needs stream=val"),
    (NodeKind.INTERSECT, {"n": 2, "lanes": 2}, "lanes=2 needs val_refs"),
    (NodeKind.ARRAY_LOAD, {"tensor": "A", "lanes": 0}, "lanes=0"),
])
def test_bad_lanes_are_named(kind, params, match):
    with pytest.raises(GraphError, match=match):
        Graph().add(kind, "n0", **params)


def test_default_lanes_are_not_saved():
    g, _ = _vector_graph(2)
    nodes = {n["name"]: n for n in g.to_json()["nodes"]}
    assert "lanes" not in nodes["red"]["params"] and nodes["lr"]["params"]["lanes"] == 2
    assert Graph.from_json(g.to_json()).to_json() == g.to_json()
    assert "x2" in g.to_dot()  # the DOT edge labels show vector lanes


@pytest.mark.parametrize("lanes, memory", [(2, "ddr4"), (8, "hbm2"), (4, "sdram")])
def test_offchip_vectors(lanes, memory):
    """Vectors behind an off-chip memory: one request per vector's line (a vector lies inside
    one burst), the same values as on chip, W words and bytes per load counted, more cycles."""
    g, d = _vector_graph(lanes)
    ideal = run_graph(g, d["data"])
    r = run_graph(g, d["data"], memory=memory)
    assert np.array_equal(r.outputs["y"].to_dense(), d["a"] @ d["x"])
    assert r.cycles > ideal.cycles
    a = r.counters["arrays"]["A.vals"]
    assert a["offchip"] and a["words_read"] == ideal.counters["arrays"]["A.vals"]["words_read"]
    # each stored block of A is read once here: every byte read came over the bus
    assert a["bytes_moved"] >= a["bytes_read"]


def test_a_vector_wider_than_a_burst_is_refused():
    g, d = _vector_graph(8)  # 8 x 4 bytes > sdram's 16-byte bursts
    with pytest.raises(Exception, match=r"node 'la' moves 8-lane vectors of tensor 'A' \(32 bytes each\).*"
                                        r"bursts are 16 bytes.*--onchip A"):
        run_graph(g, d["data"], memory="sdram", onchip=["x"])
    assert np.array_equal(run_graph(g, d["data"], memory="sdram", onchip=["A", "x"]).outputs["y"].to_dense(),
                          d["a"] @ d["x"])


@pytest.mark.parametrize(("par", "banks"), [({"i": 2}, False), ({"i": 2}, True), ({"K": 2}, True), ({"K": 3}, True)])
def test_parallel_lanes_carry_vectors(par, banks):
    """A parallel region whose exit is a vector stream: the serializer (and the splitters) get
    the stream's lanes, or with banked outputs each lane's values writer does; the graph
    verifies and the values are those of the unsplit graph."""
    from fuseflow.compiler.passes.par import parallelize

    g = relu_blocks_graph(8, 32, 4)
    rng = np.random.default_rng(11)
    a = rng.integers(-9, 10, size=(8, 32)) * np.repeat(rng.random((8, 8)) < 0.4, 4, axis=1)
    data = {"A": g.tensors["A"].data(a)}
    parallelize(g, par, banks=banks)
    g.verify(data)
    if g.banks:
        writers = [n for n in g.nodes.values() if n.kind is NodeKind.VALS_WRITE]
        assert list(g.banks) == ["Z"] and len(writers) == 2 and all(n.params["lanes"] == 4 for n in writers)
    else:
        sers = [n for n in g.nodes.values() if n.kind is NodeKind.SERIALIZE and n.params.get("stream").value == "val"]
        assert sers and all(n.params["lanes"] == 4 for n in sers)
    assert np.array_equal(run_graph(g, data).outputs["Z"].to_dense(), np.maximum(a, 0))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([2, 4, 8]), st.sampled_from(["add", "sub", "mul", "max", "min"]),
       st.sampled_from(["none", "a", "b"]), st.integers(0, 2**32 - 1), st.integers(0, 5))
def test_vector_alu_wraps_lane_by_lane(lanes, op, scalar_port, seed, count):
    """Random int32 vectors (a scalar operand where ``scalar_port`` says): each lane wraps as
    numpy's int32 does, independently of the others."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-(2**31), 2**31, size=(count, lanes), dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, size=(count, lanes), dtype=np.int64).astype(np.int32)
    if scalar_port == "a":
        a[:] = a[:, :1]
    if scalar_port == "b":
        b[:] = b[:, :1]

    def stream(x, scalar):
        return [int(r[0]) if scalar else Vec(int(v) for v in r) for r in x] + [stop(0), DONE]

    params = {"op": op, "lanes": lanes, **({"scalar_port": scalar_port} if scalar_port != "none" else {})}
    out = simulate_primitive("alu", {"a": stream(a, scalar_port == "a"), "b": stream(b, scalar_port == "b")}, **params)
    with np.errstate(over="ignore"):
        want = OPS[op](a, b).astype(np.int32)
    assert out["val"] == [_vec(r) for r in want] + [stop(0), DONE]
