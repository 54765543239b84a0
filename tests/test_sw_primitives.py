import pytest
from streamref import fibers, intersect, reduce_add, union
from vectors import design_vectors, overflow_vectors, random_vectors

from fuseflow.ir.builder import GraphBuilder
from fuseflow.ir.samml import AluOp, NodeKind, Role, StreamKind
from fuseflow.ir.tensor import CSR, TensorData, TensorFormat
from fuseflow.ir.tokens import DONE, EMPTY, format_stream, parse_stream, stop
from sw_sim import DeadlockError, ProtocolError, run_graph, simulate_primitive


@pytest.mark.parametrize("vec,expected", design_vectors(), ids=lambda v: getattr(v, "kind", ""))
def test_design_examples(vec, expected):
    out = simulate_primitive(vec.kind, vec.inputs, **vec.params, **vec.memory)
    assert {p: format_stream(out[p]) for p in expected} == expected


@pytest.mark.parametrize("vec", overflow_vectors(), ids=lambda v: f"{v.kind}-{v.params.get('op', '')}")
def test_overflow_counted_exactly_where_int32_is_left(vec):
    """sw_sim counts a wrapped result exactly for the vectors at the int32 bounds whose exact
    results (Python integers, tests/vectors.py) leave the range."""
    out = simulate_primitive(vec.kind, vec.inputs, **vec.params)
    assert (out.overflows > 0) == vec.overflow


RANDOM = random_vectors()


def _of(kind):
    """The scalar vectors of ``kind`` (vector streams: tests/test_vector_primitives_sw.py)."""
    return [v for v in RANDOM if v.kind == kind and v.params.get("lanes", 1) == 1]


@pytest.mark.parametrize("vec", _of("intersect") + _of("union"), ids=lambda v: f"{v.kind}{v.params['n']}")
def test_joiners_against_set_semantics(vec):
    out = simulate_primitive(vec.kind, vec.inputs, **vec.params)
    crds = [vec.inputs[f"crd{i}"] for i in range(vec.params["n"])]
    ref = intersect(crds) if vec.kind == "intersect" else union(crds)
    assert out["crd"] == ref
    # each output ref is the input ref at the same coordinate (or N where it is missing)
    for i in range(vec.params["n"]):
        pos = {}
        for (ce, _), (re, _) in zip(fibers(vec.inputs[f"crd{i}"]), fibers(vec.inputs[f"ref{i}"])):
            pos.update({(id(ce), c): r for c, r in zip(ce, re)})
        for (oc, _), (orf, _), (ce, _), (re, _) in zip(fibers(out["crd"]), fibers(out[f"ref{i}"]),
                                                       fibers(vec.inputs[f"crd{i}"]), fibers(vec.inputs[f"ref{i}"])):
            lookup = dict(zip(ce, re))
            assert orf == [lookup.get(c, EMPTY) for c in oc]


@pytest.mark.parametrize("vec", [v for v in _of("scan") if v.params["format"] != "dense"],
                         ids=lambda v: v.params["format"])
def test_compressed_scan_against_seg_crd(vec):
    """Compressed, non-unique (the same rule: each stored position a coordinate) and singleton
    levels (the fibre of reference r is position r: seg = 0, 1, 2, ...)."""
    crd = vec.memory["crd"]
    seg = vec.memory["seg"] if vec.params["format"] != "singleton" else list(range(len(crd) + 1))
    out = simulate_primitive("scan", vec.inputs, **vec.params, **vec.memory)
    expect = []
    toks = parse_stream(vec.inputs["ref"])
    i = 0
    while toks[i] is not DONE:  # the scanner rule, written out directly
        t = toks[i]
        if isinstance(t, int) or t is EMPTY:
            lo, hi = (0, 0) if t is EMPTY else (seg[t], seg[t + 1])
            expect += crd[lo:hi]
            nxt = toks[i + 1]
            if nxt is not DONE and not isinstance(nxt, int) and nxt is not EMPTY:
                expect.append(stop(nxt.level + 1))
                i += 1
            else:
                expect.append(stop(0))
        else:
            expect.append(stop(t.level + 1))
        i += 1
    assert out["crd"] == expect + [DONE]


@pytest.mark.parametrize("vec", [v for v in _of("reduce") if v.params["op"] == "add"])
def test_reduce_add_against_sums(vec):
    assert simulate_primitive("reduce", vec.inputs, op="add")["val"] == reduce_add(vec.inputs["val"])


@pytest.mark.parametrize("vec", _of("alu"))
def test_alu_elementwise(vec):
    import operator

    fn = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "max": max, "min": min}[vec.params["op"]]
    out = simulate_primitive("alu", vec.inputs, **vec.params)["val"]
    a, b = parse_stream(vec.inputs["a"]), parse_stream(vec.inputs["b"])
    assert out == [fn(x, y) if isinstance(x, int) else x for x, y in zip(a, b)]


@pytest.mark.parametrize("vec", _of("spacc1"))
def test_spacc1_accumulates_per_outer_fiber(vec):
    out = simulate_primitive("spacc1", vec.inputs, **vec.params)
    inner, vals = fibers(vec.inputs["inner"]), fibers(vec.inputs["val"])
    expect_crd, expect_val, acc = [], [], {}
    for (ce, s), (ve, _) in zip(inner, vals):
        for c, v in zip(ce, ve):
            acc[c] = acc.get(c, 0) + v
        if s.level >= 1:
            keys = sorted(acc)
            expect_crd += keys + [stop(s.level - 1)]
            expect_val += [acc[k] for k in keys] + [stop(s.level - 1)]
            acc = {}
    assert out["crd"] == expect_crd + [DONE]
    assert out["val"] == expect_val + [DONE]


@pytest.mark.parametrize("vec", _of("repeat"))
def test_repeat_against_tree(vec):
    assert simulate_primitive("repeat", vec.inputs)["ref"] == vec.expected["ref"]


@pytest.mark.parametrize("vec", _of("merge2"), ids=lambda v: v.params["op"])
def test_merge2_against_dictionaries(vec):
    """The merge of two order-2 results equals the streams of the dictionary merge (sum or
    maximum at every (i, j) either side has), outer fiber by outer fiber."""
    out = simulate_primitive("merge2", vec.inputs, **vec.params)
    assert {p: out[p] for p in vec.expected} == vec.expected


@pytest.mark.parametrize("vec", _of("locate"), ids=lambda v: f"dim{v.params['dim']}")
def test_locate_against_tree(vec):
    assert simulate_primitive("locate", vec.inputs, **vec.params)["ref"] == vec.expected["ref"]


def test_locate_latency_zero_and_errors():
    # one token per cycle after the first: as crd_hold on the same streams
    outer, inner = "3,N,S0,D", "0,1,2,S0,2,S1,D"
    loc = simulate_primitive("locate", {"outer": outer, "inner": inner}, dim=3)
    assert format_stream(loc["ref"]) == "9,10,11,S0,N,S1,D"
    assert loc.cycles == simulate_primitive("crd_hold", {"outer": "3,4,S0,D", "inner": inner}).cycles
    with pytest.raises(ProtocolError, match=r"node 'locate'.*inner coordinate 3 outside dimension 3"):
        simulate_primitive("locate", {"outer": "0,S0,D", "inner": "1,3,S1,D"}, dim=3)
    with pytest.raises(ProtocolError, match=r"node 'locate'.*outer stream is at S0"):
        simulate_primitive("locate", {"outer": "S0,D", "inner": "1,S1,D"}, dim=3)


def test_throughput_one_token_per_cycle():
    n = 1000
    stream = ",".join(str(i % 7) for i in range(n - 2)) + ",S0,D"
    for kind, ports, params in [("alu", ("a", "b"), {"op": "add"}), ("repsig", ("in",), {}),
                                ("broadcast", ("in",), {"n": 2}), ("reduce", ("val",), {"op": "add"})]:
        out = simulate_primitive(kind, {p: stream for p in ports}, **params)
        assert out.cycles <= n + 4, (kind, out.cycles)


def test_protocol_error_names_node():
    with pytest.raises(ProtocolError, match=r"node 'intersect'.*disagree.*S0, S1"):
        simulate_primitive("intersect", {"crd0": "S0,D", "crd1": "S1,D", "ref0": "S0,D", "ref1": "S1,D"}, n=2)
    with pytest.raises(ProtocolError, match=r"node 'alu'.*misaligned"):
        simulate_primitive("alu", {"a": "1,S0,D", "b": "S0,D"}, op="add")


def test_deadlock_is_reported_with_channels():
    import numpy as np


    # A value stream goes to an ALU twice: directly, and through a reducer that holds every
    # fiber back.  With depth-2 FIFOs the direct copy fills up and the broadcast stalls.
    b = GraphBuilder("stuck")
    g = b.g
    g.tensor("A", (4, 4), CSR)
    g.tensor("y", (4,), TensorFormat(("dense",)), Role.OUTPUT)
    crd_i, ref_i = b.scan("A", 0, b.root("A"))
    b.write("y", 0, crd_i)
    crd_j, ref_j = b.scan("A", 1, ref_i)
    g.discard(crd_j)
    v1, v2 = b.bcast(b.load("A", ref_j), 2, StreamKind.VAL)
    r = b.node(NodeKind.REDUCE, "red", {"val": v1}, op="add")
    b.write_vals("y", b.alu(AluOp.ADD, r["val"], v2))
    data = {"A": TensorData.from_dense(np.ones((4, 4), dtype=int), CSR)}
    with pytest.raises(DeadlockError) as exc:
        run_graph(g, data)
    msg = str(exc.value)
    assert "deadlock at cycle" in msg
    assert "bc_vals_A_val: output out1 full (bc_vals_A_val.out1 -> add.b)" in msg
    assert "red: input val empty" in msg


def test_writer_skip_empty_distinguishes_empty_outer_fibers():
    # DCSR with no rows: the column stream is a bare S1 that closes no column fiber
    assert simulate_primitive("write", {"crd": "S1,D"}, format="compressed", skip_empty=True)["seg"] == [0]
    # CSR row with no entries (dense parent): the same stream closes one (empty) fiber
    assert simulate_primitive("write", {"crd": "S1,D"}, format="compressed")["seg"] == [0, 0]
    # rows 0 and 2 kept after a crd_drop removed row 1 (its S0 passes through)
    out = simulate_primitive("write", {"crd": "4,S0,S0,5,6,S1,D"}, format="compressed", skip_empty=True)
    assert out["seg"] == [0, 1, 3] and out["crd"] == [4, 5, 6]
