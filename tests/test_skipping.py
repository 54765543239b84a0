"""Coordinate skipping (fuseflow.compiler.passes.skip, sw_sim SkipScan / SkipIntersect): declarations and
graph rules, the rewrite, the primitives against independent references, the scanner /
intersect loop under random back-pressure, and inner-product SpMSpM with and without skipping
(values against numpy; cycles: never more on uniform data, at least 2x fewer on power-law
rows)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from skip_cases import (
    SCAN_EXAMPLES,
    check_skip_scan,
    data,
    inner_product,
    power_law,
    random_level,
    random_scan_skip_vectors,
    skip_reference,
    uniform,
)
from stream_harness import GappySource, StallingSink
from streamref import intersect
from vectors import fiber_stream, random_vectors

from fuseflow.compiler import Program, compile_program, einsum
from fuseflow.compiler.passes.fifo import size_fifos
from fuseflow.compiler.passes.skip import enable_skipping, explain_skipping, skip_sites
from fuseflow.ir.primitives import PRIMITIVES
from fuseflow.ir.samml import Graph, GraphError, NodeKind, StreamKind
from fuseflow.ir.tensor import CSR
from fuseflow.ir.tokens import format_stream, parse_stream, stop
from fuseflow.kernels import KERNELS, example
from fuseflow_cli.cli import main
from sw_sim import run_graph, simulate_primitive
from sw_sim.engine import Channel, Engine
from sw_sim.run import build_primitive

S0 = stop(0)


# ----------------------------------------------------------------------------- declarations
def test_skip_is_a_declared_parameter_that_adds_ports():
    scan, inter = PRIMITIVES[NodeKind.SCAN], PRIMITIVES[NodeKind.INTERSECT]
    assert scan.defaults["skip"] is False and inter.defaults["skip"] is False
    assert scan.ports({"tensor": "A", "level": 1}) == ({"ref": StreamKind.REF},
                                                       {"crd": StreamKind.CRD, "ref": StreamKind.REF})
    assert scan.ports({"tensor": "A", "level": 1, "skip": True})[0] == {"ref": StreamKind.REF, "skip": StreamKind.CRD}
    outs = inter.ports({"n": 3, "skip": True})[1]
    assert [p for p in outs if p.startswith("skip")] == ["skip0", "skip1", "skip2"]
    assert "skip0" not in inter.ports({"n": 3})[1]
    assert "skip" not in PRIMITIVES[NodeKind.UNION].hints()
    assert scan.feedback == ("skip",)


def _csr_scan_graph(level: int) -> Graph:
    g = Graph("g")
    g.tensor("A", (4, 4), CSR)
    g.add(NodeKind.ROOT, "root")
    g.add(NodeKind.SCAN, "scan_a", tensor="A", level=level, skip=True)
    g.connect("root.ref", "scan_a.ref")
    return g


def test_skip_on_a_dense_level_is_refused_naming_node_and_parameter():
    g = _csr_scan_graph(0)  # level 0 of CSR is dense
    with pytest.raises(GraphError) as exc:
        g.verify()
    assert ("node 'scan_a' (scan): parameter 'skip' needs a compressed level, and level 0 of tensor "
            "'A' is dense") in str(exc.value)
    g1 = _csr_scan_graph(1)
    with pytest.raises(GraphError) as exc:
        g1.verify()
    assert "skip' needs" not in str(exc.value)
    assert "input port scan_a.skip is not driven" in str(exc.value)
    with pytest.raises(ValueError, match="'scan_a' \\(scan\\): parameter 'skip' needs a compressed level"):
        build_primitive(NodeKind.SCAN, "scan_a", {"ref": Channel("r", 2), "skip": Channel("s", 2)},
                        {"crd": Channel("c", 2), "ref": Channel("o", 2)},
                        {"tensor": "A", "level": 0, "skip": True, "format": "dense", "dim": 4})


def test_skip_requests_must_come_from_the_intersect_the_scanner_feeds():
    g = enable_skipping(inner_product(3, 3, 8))
    # swap the two request edges: each scanner gets the requests meant for the other
    g.edges = [e for e in g.edges if not g.is_feedback(e)]
    g.connect("intersect.skip0", "scan_B1.skip")
    g.connect("intersect.skip1", "scan_A1.skip")
    with pytest.raises(GraphError) as exc:
        g.verify()
    assert ("node 'scan_A1' (scan): input skip comes from intersect.skip1, which is not the skip output "
            "of an intersect whose matching crd and ref inputs this scanner drives") in str(exc.value)
    assert "node 'scan_B1' (scan): input skip comes from intersect.skip0" in str(exc.value)


def test_only_feedback_edges_may_close_a_loop():
    g = enable_skipping(inner_product(3, 3, 8))
    g.verify()
    order = g.topo_order()
    assert order.index("scan_A1") < order.index("intersect") and order.index("scan_B1") < order.index("intersect")
    assert {str(e) for e in g.edges if g.is_feedback(e)} == {"intersect.skip0 -> scan_A1.skip",
                                                          "intersect.skip1 -> scan_B1.skip"}
    bad = Graph("loop")
    bad.add(NodeKind.BROADCAST, "a", n=2)
    bad.add(NodeKind.BROADCAST, "b", n=1)
    bad.connect("a.out0", "b.in")
    bad.connect("b.out0", "a.in")
    bad.discard("a.out1")
    with pytest.raises(GraphError, match=r"the edges form a loop \(a -> b -> a\)"):
        bad.verify()


def test_skipping_graph_round_trips_and_draws_feedback_dashed(tmp_path):
    g = enable_skipping(inner_product(3, 3, 8))
    g.save(tmp_path / "g.json")
    again = Graph.load(tmp_path / "g.json")
    assert again.to_json() == g.to_json()
    params = {n["name"]: n["params"] for n in json.loads((tmp_path / "g.json").read_text())["nodes"]}
    assert params["intersect"]["skip"] is True and params["scan_A1"]["skip"] is True
    dot = g.to_dot()
    assert '"intersect" -> "scan_A1" [label="skip0->skip"' in dot and "style=dashed" in dot
    assert "style=dashed" not in inner_product(3, 3, 8).to_dot()


def test_fifo_sizing_ignores_skip_edges():
    plain = inner_product(4, 4, 16)
    g = enable_skipping(plain)
    size_fifos(g)  # again, now with the loop: same depths, and none on the feedback edges
    assert [e for e in g.edges if not g.is_feedback(e)] == plain.edges
    assert all(e.depth == 2 for e in g.edges if g.is_feedback(e))


# ----------------------------------------------------------------------------- the rewrite
def test_enable_skipping_converts_intersects_of_compressed_scanners():
    plain = inner_product(4, 4, 16)
    before = plain.to_json()
    g = enable_skipping(plain)
    assert plain.to_json() == before  # a copy by default
    assert g.nodes["intersect"].params["skip"] is True
    assert g.nodes["scan_A1"].params["skip"] is True and g.nodes["scan_B1"].params["skip"] is True
    assert "skip" not in g.nodes["scan_A0"].params
    assert len(g.edges) == len(plain.edges) + 2
    assert enable_skipping(g).to_json() == g.to_json()  # idempotent
    same = enable_skipping(plain, in_place=True)
    assert same is plain and plain.to_json() == g.to_json()
    assert explain_skipping(g) == ["intersect 'intersect': skips (scanners scan_A1, scan_B1)"]
    assert explain_skipping(inner_product(2, 2, 4)) == [
        "intersect 'intersect': can skip (scanners scan_A1, scan_B1); enable_skipping converts it"]


def test_enable_skipping_leaves_other_intersects_alone():
    # the built-in SpMV locates into c (no intersect); with the locate pass off the compiler
    # intersects A's row with c's dense level, which cannot skip
    assert skip_sites(KERNELS["spmv"](8)) == []
    p = Program("spmv")
    p.output(p.let("y", einsum("ij,j->i", p.tensor("A", (8, 8), "csr"), p.tensor("c", (8,), "dense"))))
    (spmv,) = compile_program(p, locate=False).graphs
    assert enable_skipping(spmv).to_json() == spmv.to_json()
    [site] = skip_sites(spmv)
    assert not site.convertible and "scanner 'scan_c_u0' of a dense level" in site.reason
    mul = enable_skipping(KERNELS["mul"](8))
    assert explain_skipping(mul) == [
        "intersect 'intersect': no skipping: input 0 comes from scanner 'scan_A0' of a dense level",
        "intersect 'intersect_1': skips (scanners scan_A1, scan_B1)"]
    assert skip_sites(KERNELS["spmm_csr"](8)) == []  # B's dense row level is located
    # a crd from a scanner whose ref goes elsewhere (here: a broadcast in between) is not straight
    g = Graph("g")
    g.tensor("A", (4, 4), CSR)
    g.tensor("B", (4, 4), CSR)
    for t in "AB":
        g.add(NodeKind.ROOT, f"root{t}")
        g.add(NodeKind.SCAN, f"s{t}", tensor=t, level=1)
        g.connect(f"root{t}.ref", f"s{t}.ref")
    g.add(NodeKind.BROADCAST, "bc", n=1, stream="crd")
    g.add(NodeKind.INTERSECT, "x", n=2)
    g.connect("sA.crd", "bc.in")
    g.connect("bc.out0", "x.crd0")
    g.connect("sA.ref", "x.ref0")
    g.connect("sB.crd", "x.crd1")
    g.connect("sB.ref", "x.ref1")
    assert skip_sites(g)[0].reason == "input 0 comes from 'bc' (broadcast), not a level scanner"


# ----------------------------------------------------------------------------- the scanner
def _scan(ref, skip, seg, crd):
    return simulate_primitive("scan", {"ref": ref, "skip": skip}, format="compressed", skip=True, seg=seg, crd=crd)


def _plain_scan(ref, seg, crd):
    return simulate_primitive("scan", {"ref": ref}, format="compressed", seg=seg, crd=crd)


@pytest.mark.parametrize("name,ref,skip,seg,crd,expect,dcycles", SCAN_EXAMPLES, ids=[e[0] for e in SCAN_EXAMPLES])
def test_skip_scan_worked_examples(name, ref, skip, seg, crd, expect, dcycles):
    out = _scan(ref, skip, seg, crd)
    plain = _plain_scan(ref, seg, crd)
    assert format_stream(out["crd"]) == expect
    check_skip_scan(out, plain, parse_stream(skip), crd)
    assert out.cycles - plain.cycles == dcycles


@pytest.mark.parametrize("vec", random_scan_skip_vectors(), ids=lambda v: f"fibers{len(v[2]) - 1}")
def test_skip_scan_against_plain_scan(vec):
    ref, skip, seg, crd = vec
    out = _scan(ref, skip, seg, crd)
    plain = _plain_scan(ref, seg, crd)
    check_skip_scan(out, plain, skip, crd)


def test_skip_scan_without_requests_is_the_plain_scanner():
    for ref, _, seg, crd in random_scan_skip_vectors(5, 12):
        out, plain = _scan(ref, "D", seg, crd), _plain_scan(ref, seg, crd)
        assert (out["crd"], out["ref"], out.cycles) == (plain["crd"], plain["ref"], plain.cycles)


# ----------------------------------------------------------------------------- the intersect
def _joiner_vectors():
    return [v for v in random_vectors() if v.kind == "intersect" and not v.params.get("val_refs")
            and not v.params.get("skip")]


@pytest.mark.parametrize("vec", _joiner_vectors(), ids=lambda v: f"n{v.params['n']}")
def test_skip_intersect_against_references(vec):
    n = vec.params["n"]
    out = simulate_primitive("intersect", vec.inputs, n=n, skip=True)
    plain = simulate_primitive("intersect", vec.inputs, n=n)
    crds = [vec.inputs[f"crd{i}"] for i in range(n)]
    assert out["crd"] == intersect(crds) == plain["crd"]
    assert all(out[f"ref{i}"] == plain[f"ref{i}"] for i in range(n))
    assert [out[f"skip{i}"] for i in range(n)] == skip_reference(crds)
    assert out.cycles == plain.cycles


# ----------------------------------------------------------------------------- the loop
def run_loop(levels, refs, *, skip: bool, gap: float = 0.0, stall: float = 0.0, seed: int = 0, depth: int = 2):
    """Two compressed scanners (``levels``: (seg, crd) each, one ref stream each) into an
    intersect, with (``skip``) or without the skip edges; random input gaps and output
    back-pressure.  Returns the intersect's output streams and the number of tokens the
    scanners emitted."""
    rng = random.Random(seed)
    ch = {}

    def c(name):
        ch[name] = Channel(name, depth)
        return ch[name]

    prims, sinks = [], []
    for i, ((seg, crd), ref) in enumerate(zip(levels, refs)):
        ins = {"ref": c(f"ref_in{i}")}
        if skip:
            ins["skip"] = c(f"skip{i}")
        prims.append(GappySource(f"feed{i}", ch[f"ref_in{i}"], parse_stream(ref), gap, rng))
        prims.append(build_primitive(NodeKind.SCAN, f"scan{i}", ins, {"crd": c(f"crd{i}"), "ref": c(f"ref{i}")},
                                     {"format": "compressed", "seg": seg, "crd": crd, "skip": skip}))
    outs = {"crd": c("out_crd"), "ref0": c("out_ref0"), "ref1": c("out_ref1")}
    if skip:
        outs |= {"skip0": ch["skip0"], "skip1": ch["skip1"]}
    prims.append(build_primitive(NodeKind.INTERSECT, "x", {p: ch[p] for p in ("crd0", "crd1", "ref0", "ref1")},
                                 outs, {"n": 2, "skip": skip}))
    for p in ("crd", "ref0", "ref1"):
        sinks.append(StallingSink(f"sink_{p}", ch[f"out_{p}"], stall, rng))
    eng = Engine(prims + sinks, list(ch.values()), sinks)
    eng.run(max_cycles=200_000)
    return {s.name[5:]: s.tokens for s in sinks}, ch["crd0"].count + ch["crd1"].count


def _loop_case(rng: random.Random):
    nfib = rng.randint(1, 4)
    dims = rng.choice((16, 64, 300))
    levels = [random_level(rng, nfib, dims) for _ in range(2)]
    shape = [rng.randint(1, 3) for _ in range(rng.randint(1, 3))]  # both ref streams: one fibertree shape
    trees = [[[rng.randrange(nfib) for _ in range(w)] for w in shape] for _ in range(2)]
    return levels, [fiber_stream(t, 2) for t in trees]


@pytest.mark.parametrize("seed", range(16))
def test_loop_under_back_pressure_loses_and_duplicates_nothing(seed):
    """The intersect's outputs with skipping, under random input gaps and output back-pressure
    (and FIFOs of 2 or 3), are exactly those without: no token lost or duplicated."""
    rng = random.Random(seed)
    levels, refs = _loop_case(rng)
    plain, scanned = run_loop(levels, refs, skip=False)
    assert plain["crd"] == intersect([_scan_alone(lv, r) for lv, r in zip(levels, refs)])
    for k, (gap, stall) in enumerate(((0.0, 0.0), (0.3, 0.0), (0.0, 0.5), (0.4, 0.6))):
        got, fewer = run_loop(levels, refs, skip=True, gap=gap, stall=stall, seed=100 * seed + k, depth=2 + k % 2)
        assert got == plain, (gap, stall)
        assert fewer <= scanned


def test_loop_skips_tokens():
    """The scanners of those loops do skip: they emit fewer tokens in most of them."""
    fewer = 0
    for seed in range(16):
        levels, refs = _loop_case(random.Random(seed))
        fewer += run_loop(levels, refs, skip=True)[1] < run_loop(levels, refs, skip=False)[1]
    assert fewer >= 10


def _scan_alone(level, ref):
    seg, crd = level
    return _plain_scan(ref, seg, crd)["crd"]


# ----------------------------------------------------------------------------- SpMSpM
def _both(n, m, k, a, b):
    g = inner_product(n, m, k)
    d = data(g, a, b)
    r0, r1 = run_graph(g, d), run_graph(enable_skipping(g), d)
    ref = a @ b.T
    assert np.array_equal(r0.outputs["C"].to_dense(), ref)
    assert np.array_equal(r1.outputs["C"].to_dense(), ref)
    return r0.cycles, r1.cycles


@pytest.mark.parametrize("case", ["empty_rows", "all_empty", "single", "one_long"])
def test_inner_product_edge_cases(case):
    rng = np.random.default_rng(7)
    a, b = uniform(rng, 6, 40, 0.2), uniform(rng, 5, 40, 0.2)
    if case == "empty_rows":
        a[::2] = 0
        b[1::2] = 0
    elif case == "all_empty":
        a[:] = 0
    elif case == "single":
        a[:] = 0
        a[2, 7] = 3
    else:
        a[1] = rng.integers(1, 5, 40)
    c0, c1 = _both(6, 5, 40, a, b)
    assert c1 <= c0


UNIFORM = [(n, k, da, db, seed) for n, k in ((8, 64), (16, 128)) for da, db in
           ((0.02, 0.02), (0.1, 0.1), (0.3, 0.3), (0.6, 0.6), (0.9, 0.9), (0.05, 0.4), (0.4, 0.05))
           for seed in range(3)]


def test_uniform_data_never_takes_more_cycles():
    worse = []
    for n, k, da, db, seed in UNIFORM:
        rng = np.random.default_rng(1000 * seed + k)
        c0, c1 = _both(n, n, k, uniform(rng, n, k, da), uniform(rng, n, k, db))
        if c1 > c0:
            worse.append((n, k, da, db, seed, c0, c1))
    assert not worse


def test_elementwise_mul_never_takes_more_cycles():
    """Skipping at level 1 under a level-0 intersect (both operands CSR, uniform density)."""
    for n, density, seed in ((16, 0.1, 0), (16, 0.6, 1), (32, 0.3, 2), (32, 0.05, 3)):
        g, d, _, ref = example("mul", n, seed=seed, density=density)
        plain, skipping = run_graph(g, d), run_graph(enable_skipping(g), d)
        assert np.array_equal(skipping.outputs["C"].to_dense(), ref)
        assert skipping.cycles <= plain.cycles


def test_power_law_rows_take_at_least_half_fewer_cycles():
    speedups = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        a, b = power_law(rng, 32, 2048, 1.5, 4), power_law(rng, 32, 2048, 1.5, 4)
        c0, c1 = _both(32, 32, 2048, a, b)
        speedups.append(c0 / c1)
    assert min(speedups) >= 2.0, speedups


def test_cli_skip_option(capsys):
    assert main(["sim", "--kernel", "spmspm_inner", "--size", "12", "--density", "0.2", "--skip"]) == 0
    out = capsys.readouterr().out
    assert "skipping:" in out and "check against numpy: PASS" in out
    # nothing to skip is an error naming the graph and why, not a silently ignored option
    assert main(["sim", "--kernel", "spmv", "--size", "8", "--skip"]) == 2
    err = capsys.readouterr().err
    assert "--skip: no intersection in kernel spmv (8x8) can skip: it has no intersect" in err
