"""Parallel lanes (``par``): values equal the unparallelized graph and numpy at every factor,
nested and on reduced indices; bad factors and indices are clear errors; schedules validate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from fuseflow.compiler import FusionError, compile_program
from fuseflow.compiler.passes.par import ParallelError, parallelize
from fuseflow.compiler.runner import reference, run_program
from fuseflow.ir.primitives import NodeKind
from fuseflow.kernels import example
from fuseflow.schedule import ScheduleError, load_schedule, parse_par
from sw_sim import run_graph

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "programs"))

KERNEL_PARS = [
    ("spmv", {"i": 4}), ("spmv", {"j": 3}), ("spmv", {"i": 4, "j": 2}),
    ("spmm_dense", {"i": 2}), ("spmm_dense", {"k": 4}), ("spmm_dense", {"i": 4, "j": 4}),
    ("spmm_csr", {"i": 8}), ("spmm_csr", {"j": 2}), ("add", {"i": 3, "j": 2}),
    ("mul", {"i": 4}), ("spmspm_inner", {"i": 4}), ("spmspm_inner", {"k": 2}),
    ("spmspm_inner", {"i": 2, "j": 2, "k": 2}),
]


@pytest.mark.parametrize(("kernel", "par"), KERNEL_PARS, ids=lambda x: str(x))
def test_kernel_values_equal_numpy_and_unsplit(kernel, par):
    g, data, _, expected = example(kernel, 24, 3, 0.15)
    base = run_graph(g, data)
    regions = parallelize(g, par)
    assert {r.index for r in regions} == set(par)
    kinds = [n.kind for n in g.nodes.values()]
    assert NodeKind.PARALLELIZE in kinds
    res = run_graph(g, data)
    [out] = res.outputs.values()
    assert np.array_equal(out.to_dense(), expected)
    [ref] = base.outputs.values()
    assert np.array_equal(out.to_dense(), ref.to_dense())


def test_lanes_speed_up_a_row_parallel_kernel():
    g, data, _, expected = example("spmm_dense", 32, 0, 0.1)
    base = run_graph(g, data).cycles
    parallelize(g, {"i": 4})
    res = run_graph(g, data)
    assert np.array_equal(next(iter(res.outputs.values())).to_dense(), expected)
    assert res.cycles * 2 < base  # four lanes: well over twice as fast on this graph


PROGRAMS = [("spmm", {"i": 4}), ("spmm", {"k": 2}), ("spmm", {"i": 2, "k": 2}),
            ("sddmm", {"i": 4}), ("sddmm", {"j": 2}), ("gcn_layer", {"i": 4, "j": 2}),
            ("graphsage", {"i": 3}), ("nested_matmul", {"i": 2}), ("gcn_relu", {"i": 2}),
            ("spmm", {"k": 4}), ("nested_matmul", {"u0": 2, "u1": 2}),
            ("gcn_layer", {"i": 2, "u0": 2, "u1": 2})]


@pytest.mark.parametrize("par", [{"i": 4}, {"j": 4}, {"i": 2, "j": 2}, {"d": 2, "e": 2}], ids=str)
def test_bigbird_attention_lanes_match_numpy(par):
    """Both factored pipelines of the attention core split on j (the S accumulator's partial sums
    merged by a union-and-add tree, then O's pipeline split again at the merged coordinates)."""
    import bigbird_attention as b
    data = b.example_data(2, seq=32, head=8)
    prog = b.program(seq=32, head=8)
    cp = compile_program(prog, par=par)
    got = run_program(cp, data, simulate=run_graph)
    for t, v in reference(cp, data).items():
        assert np.array_equal(got.outputs[t].to_dense(), v), t
    if "j" in par:
        plain = run_program(compile_program(b.program(seq=32, head=8)), data, simulate=run_graph)
        assert sum(got.cycles) * 1.5 < sum(plain.cycles)


@pytest.mark.parametrize(("name", "par"), PROGRAMS, ids=lambda x: str(x))
def test_compiled_programs_with_par_match_numpy(name, par):
    mod = __import__(name)
    data = {k: np.asarray(v) for k, v in mod.example_data(1).items()}
    cp = compile_program(mod.program(), par=par)
    assert any(cg.parallel for cg in cp.groups)
    got = run_program(cp, data, simulate=run_graph)
    want = reference(cp, data)
    for t, v in want.items():
        assert np.array_equal(got.outputs[t].to_dense(), v), t
    plain = run_program(compile_program(mod.program()), data, simulate=run_graph)
    assert sum(got.cycles) < sum(plain.cycles) or par.keys() - {"i"}


@pytest.mark.parametrize(("par", "words"), [
    ({"i": 0}, ["par i=0", "1 to 64"]),
    ({"i": 65}, ["par i=65", "1 to 64"]),
    ({"i": 2.5}, ["par i=2.5", "whole number"]),
    ({"q": 2}, ["'q'", "does not iterate"]),
    ({"i": 40}, ["index 'i'", "only 24", "at most 24"]),
])
def test_bad_factors_name_the_index(par, words):
    g, *_ = example("spmm_csr", 24, 0, 0.1)
    with pytest.raises(ParallelError) as exc:
        parallelize(g, par)
    for w in words:
        assert w in str(exc.value)


def test_compiler_names_an_index_no_graph_iterates():
    import spmm
    with pytest.raises(FusionError, match="no graph iterates index 'z'"):
        compile_program(spmm.program(), par={"z": 2})


@pytest.mark.parametrize("par", [{"i": 2}, {"k": 2}, {"i": 2, "j": 2}], ids=str)
def test_skipping_graphs_parallelize(par):
    """Skip requests inside the lanes are copied with them; at the split they stay outside."""
    from fuseflow.compiler.passes.skip import enable_skipping
    g, data, _, expected = example("spmspm_inner", 16, 0, 0.2)
    enable_skipping(g, in_place=True)
    parallelize(g, par)
    assert np.array_equal(next(iter(run_graph(g, data).outputs.values())).to_dense(), expected)


def test_parallel_graph_round_trips_through_json(tmp_path):
    g, data, _, expected = example("spmv", 16, 0, 0.2)
    parallelize(g, {"i": 4})
    path = tmp_path / "g.json"
    g.save(path)
    from fuseflow.ir.samml import Graph
    g2 = Graph.load(path)
    assert g2.indices == g.indices
    assert np.array_equal(next(iter(run_graph(g2, data).outputs.values())).to_dense(), expected)


def test_banked_outputs_round_trip_through_json(tmp_path):
    g, data, _, expected = example("spmm_dense", 16, 0, 0.2)
    parallelize(g, {"i": 4})
    assert g.banks == {"C": [f"C__b{k}" for k in range(4)]} and g.output_tensors() == ["C"]
    path = tmp_path / "g.json"
    g.save(path)
    from fuseflow.ir.samml import Graph
    g2 = Graph.load(path)
    assert g2.banks == g.banks and g2.structure_hash() == g.structure_hash()
    assert np.array_equal(run_graph(g2, data).outputs["C"].to_dense(), expected)
    d = json.loads(path.read_text())
    d["banks"]["C"].append("nope")
    path.write_text(json.dumps(d))
    with pytest.raises(Exception, match="banks of 'C': 'nope' not declared"):
        Graph.load(path)


@pytest.mark.parametrize(("kernel", "n"), [("spmm_dense", 16), ("spmm_csr", 8), ("spmv", 8), ("add", 4),
                                           ("bspmm", 4)])
def test_banked_outputs_equal_numpy_and_beat_one_writer(kernel, n):
    """Each lane of an outermost split writes its own bank of the output (no serializer, no
    single writer taking a token a cycle): values equal numpy, and the outputs leave at least
    as fast as through one serializer and writer (``banks=False``, ``--no-par-banks``)."""
    g, data, _, expected = example(kernel, 32, 1, 0.15)
    parallelize(g, {"i": n})
    assert g.banks, g.banks
    res = run_graph(g, data)
    [out] = res.outputs
    assert np.allclose(res.outputs[out].to_dense(), np.asarray(expected))
    g1, _, _, _ = example(kernel, 32, 1, 0.15)
    parallelize(g1, {"i": n}, banks=False)
    assert not g1.banks
    one = run_graph(g1, data)
    assert np.array_equal(one.outputs[out].to_dense(), res.outputs[out].to_dense())
    assert res.cycles <= one.cycles


def test_an_innermost_index_is_split_at_its_dense_scanner():
    """SpMM's innermost j (the dense B's columns, under the reduced k): each lane scans its own
    columns (offset lane, stride n), so the split scales where a split after the scanner (one
    coordinate a cycle) did not; values equal numpy, shares unequal when n does not divide 32."""
    g0, data, _, expected = example("spmm_dense", 32, 2, 0.15)
    base = run_graph(g0, data).cycles
    for n in (3, 8):
        g, _, _, _ = example("spmm_dense", 32, 2, 0.15)
        regions = parallelize(g, {"j": n})
        assert regions and all(r.range_split for r in regions)
        scans = [node for node in g.nodes.values() if node.kind is NodeKind.SCAN and node.params.get("stride") == n]
        assert sorted(node.params["offset"] for node in scans) == list(range(n))
        res = run_graph(g, data)
        assert np.array_equal(res.outputs["C"].to_dense(), expected)
        assert res.cycles * n * 0.5 < base, (n, res.cycles, base)  # at least half the ideal speedup


def test_a_strided_scan_needs_a_dense_level():
    from fuseflow.ir.samml import Graph, GraphError

    g, _, _, _ = example("spmm_csr", 8, 0, 0.3)
    d = g.to_json()
    [scan] = [n for n in d["nodes"] if n["name"] == "scan_A1"]  # a compressed level
    scan["params"].update(offset=1, stride=2)
    with pytest.raises(GraphError, match="'offset' / 'stride' split a dense level"):
        Graph.from_json(d).verify()


def test_banks_beyond_the_output_arrays_fall_back_to_the_serializer():
    g, data, _, expected = example("spmm_dense", 64, 0, 0.1)
    [region] = parallelize(g, {"i": 64})
    assert not g.banks and "64 banks would need more than 64 output arrays" in region.describe()
    assert np.array_equal(run_graph(g, data).outputs["C"].to_dense(), expected)


def test_a_bank_missing_items_is_an_error():
    from fuseflow.ir.banks import BankError, Written, assemble_outputs

    g, _, _, _ = example("spmm_dense", 16, 0, 0.2)
    parallelize(g, {"i": 4})
    written = {t: Written([None, None], [None, None]) for t in g.tensors if g.tensors[t].role.value == "output"}
    for k, b in enumerate(g.banks["C"]):
        written[b] = Written([None, np.array([0, 0] if k == 2 else [0] * 5)], [None, np.array([])], np.array([]))
    with pytest.raises(BankError, match=r"bank 2 \(C__b2\) holds 1 items, its lane was dealt 4"):
        assemble_outputs(g, written)


def test_a_bank_missing_values_is_an_error():
    from fuseflow.ir.banks import BankError, Written, assemble_outputs

    g, _, _, _ = example("spmv", 16, 0, 0.2)
    parallelize(g, {"i": 4})
    written = {t: Written([None], [None], np.zeros(4)) for t in g.banks["y"]}
    written["y"] = Written([None], [None])
    written[g.banks["y"][1]].vals = np.zeros(3)
    with pytest.raises(BankError, match=r"bank 1 \(y__b1\) holds 3 values, its items need 4"):
        assemble_outputs(g, written)


def test_schedule_files_validate(tmp_path):
    good = tmp_path / "s.toml"
    good.write_text('fusion = "partial"\npar = { i = 4, j = 2 }\n[orders]\nT = "ikj"\n')
    s = load_schedule(str(good))
    assert (s.name, s.fusion, dict(s.par), dict(s.orders)) == ("s", "partial", {"i": 4, "j": 2}, {"T": "ikj"})
    assert json.loads(json.dumps(s.to_json()))["par"] == {"i": 4, "j": 2}
    assert load_schedule("full").fusion == "full"
    for text, word in [('par = { i = 0 }', "par.i = 0"), ('fusoin = "full"', "unknown key 'fusoin'"),
                       ('fusion = "most"', "fusion = 'most'"), ('par = { i = "4" }', "whole number"),
                       ("par = [", "not valid TOML")]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text + "\n")
        with pytest.raises(ScheduleError, match="bad.toml") as exc:
            load_schedule(str(bad))
        assert word in str(exc.value)
    with pytest.raises(ScheduleError, match="no such file"):
        load_schedule(str(tmp_path / "none.toml"))
    assert parse_par(["i=4", "j=2"]) == {"i": 4, "j": 2}
    with pytest.raises(ScheduleError, match="INDEX=FACTOR"):
        parse_par(["i4"])


def test_graph_scoped_par_keys():
    """``GRAPH:INDEX`` applies to that graph only and overrides a plain ``INDEX``."""
    import gcn_layer
    prog = gcn_layer.program()
    name = compile_program(prog, fusion="unfused").groups[0].graph.name
    cp = compile_program(prog, fusion="unfused", par={"i": 2, f"{name}:i": 4})
    factors = {cg.graph.name: {r.factor for r in cg.parallel} for cg in cp.groups}
    assert factors[name] == {4}
    assert all(f == {2} for n, f in factors.items() if n != name and f)
    with pytest.raises(FusionError, match="no graph iterates index 'nope:i'"):
        compile_program(prog, fusion="unfused", par={"nope:i": 2})


@pytest.mark.parametrize("kernel", ["spmm_dense", "spmv", "spmspm_inner"])
@pytest.mark.parametrize("n", [3, 31, 48, 64])
def test_wide_splits_do_not_deadlock(kernel, n):
    """Up to one lane per row: each lane closes its row only when it sees the fibre's stop, dealt
    after every other lane's row, so ``sel`` buffers n items (it deadlocked at 48 lanes with
    the default FIFO sizing)."""
    g, data, _, expected = example(kernel, 64, 4, 0.1)
    parallelize(g, {"i": n})
    assert np.array_equal(next(iter(run_graph(g, data).outputs.values())).to_dense(), expected)


def test_suite_entries_with_par():
    """``correlate --par``: the suite's graphs that iterate the index get the lanes; values stay
    numpy's."""
    from fuseflow.suites import suite, with_par
    entries, left = with_par(suite("spine")[:4], {"i": 2}, run_graph)
    assert len(entries) == 4 and not left and all(e.name.endswith("_par_i2") for e in entries)
    g, data, expected = entries[0].make(run_graph)
    assert any(n.kind is NodeKind.PARALLELIZE for n in g.nodes.values())
    assert np.array_equal(next(iter(run_graph(g, data).outputs.values())).to_dense(), expected)
    kept, left = with_par(suite("spine")[:2], {"nope": 2}, run_graph)
    assert not kept and len(left) == 2


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("par", [{"k": 2}, {"k": 3}, {"j": 2}, {"i": 2, "k": 2}], ids=str)
def test_max_accumulators_run_in_the_lanes(reduce, par):
    """A max-times product's sparse accumulator runs in the lanes of its reduction index
    (partial maxima, merged by unions and ALUs that take a missing side as no value) and of its
    own index (disjoint coordinates): values equal numpy's, with rows whose results are
    negative (a full negative row against full positive columns) and rows with implicit zeros."""
    from fuseflow.compiler.program import Program, einsum

    p = Program("maxtimes")
    a, b = p.tensor("A", (6, 8), "csr"), p.tensor("B", (8, 5), "dcsr")
    p.output(p.let("Y", einsum("ik,kj->ij", a, b, reduce=reduce)))
    cp = compile_program(p, par=par)
    regions = [r for cg in cp.groups for r in cg.parallel]
    assert any(any(c.startswith("spacc") for c in r.combined) for r in regions), regions
    merges = [n for cg in cp.groups for n in cg.graph.nodes.values()
              if n.kind is NodeKind.ALU and n.name.startswith("comb_spacc")]
    assert merges and all(n.param("identity_empty") for n in merges)
    rng = np.random.default_rng(len(str(par)))
    for _ in range(3):
        A = rng.integers(-4, 5, (6, 8)) * (rng.random((6, 8)) < 0.5)
        B = rng.integers(-4, 5, (8, 5)) * (rng.random((8, 5)) < 0.5)
        A[2], B[:, 1:3] = -rng.integers(1, 5, 8), rng.integers(1, 5, (8, 2))  # Y[2, 1:3] < 0 (max)
        A[3] = rng.integers(1, 5, 8)  # Y[3, 1:3] > 0 (min)
        got = run_program(cp, {"A": A, "B": B}, simulate=run_graph)
        want = reference(cp, {"A": A, "B": B})["Y"]
        fn = np.max if reduce == "max" else np.min
        assert np.array_equal(want, fn(A[:, :, None] * B[None, :, :], axis=1))
        assert np.array_equal(got.outputs["Y"].to_dense(), want)


@pytest.mark.parametrize("reduce", ["sum", "max"])
@pytest.mark.parametrize(("order", "par"), [(o, {x: f}) for o in ("kij", "kji") for x, f in (("k", 2), ("k", 3), ("k", 4),
                                                                                          (o[1], 2))], ids=str)
def test_order2_accumulators_run_in_the_lanes(reduce, order, par):
    """Outer-product SpMM's order-2 accumulator runs in the lanes of its reduction index (each
    lane a partial matrix, merged by a tree of merge2 nodes that add, or take the maximum,
    where both sides have an (i, j) and keep the one side's value elsewhere) and of its own
    indices (disjoint rows or columns): values equal numpy's on the dense operands, with empty
    columns of A and negative products."""
    from fuseflow.compiler.program import Program, einsum

    p = Program("outer")
    a = p.tensor("A", (7, 9), "csc", mode_order=(1, 0))
    b = p.tensor("B", (9, 6), "csr")
    p.output(p.let("C", einsum("ik,kj->ij", a, b, **({} if reduce == "sum" else {"reduce": reduce})), order=order))
    cp = compile_program(p, par=par)
    [g] = cp.graphs
    kinds = [n.kind for n in g.nodes.values()]
    factor = next(iter(par.values()))
    assert kinds.count(NodeKind.SPACC2) == factor and kinds.count(NodeKind.MERGE2) == factor - 1
    assert NodeKind.SERIALIZE not in kinds  # the partial matrices leave the lanes merged
    rng = np.random.default_rng(factor * 7 + len(order))
    for _ in range(3):
        A = rng.integers(-4, 5, (7, 9)) * (rng.random((7, 9)) < 0.4)
        B = rng.integers(-4, 5, (9, 6)) * (rng.random((9, 6)) < 0.4)
        A[:, 3] = 0  # a k without rows: an empty partial product
        got = run_program(cp, {"A": A, "B": B}, simulate=run_graph)
        prods = A[:, :, None] * B[None, :, :]  # the dense products, implicit zeros included
        want = prods.sum(axis=1) if reduce == "sum" else prods.max(axis=1)
        assert np.array_equal(reference(cp, {"A": A, "B": B})["C"], want)
        assert np.array_equal(got.outputs["C"].to_dense(), want)


def test_order2_lanes_speed_up_outer_product_spmm():
    """64 × 64 outer-product SpMM at 10 %: each lane accumulates its share of the products,
    the merge tree streams the sum once; more lanes, fewer cycles (the output's one entry a
    cycle bounds it), against a split whose accumulator ran after a serializer (no gain)."""
    from fuseflow.compiler.program import Program, einsum
    from fuseflow.ir.tensor import TensorData

    p = Program("outer")
    a = p.tensor("A", (64, 64), "csc", mode_order=(1, 0))
    b = p.tensor("B", (64, 64), "csr")
    p.output(p.let("C", einsum("ik,kj->ij", a, b), order="kij"))
    rng = np.random.default_rng(3)
    A = rng.integers(1, 5, (64, 64)) * (rng.random((64, 64)) < 0.1)
    B = rng.integers(1, 5, (64, 64)) * (rng.random((64, 64)) < 0.1)
    cycles = {}
    for f in (1, 2, 4, 8):
        [g] = compile_program(p, **({"par": {"k": f}} if f > 1 else {})).graphs
        res = run_graph(g, {t: TensorData.from_dense(x, g.tensors[t].fmt) for t, x in (("A", A), ("B", B))})
        assert np.array_equal(res.outputs["C"].to_dense(), A @ B)
        cycles[f] = res.cycles
    assert cycles[1] > cycles[2] > cycles[4] > cycles[8], cycles
    assert cycles[1] / cycles[4] > 1.5, cycles
