"""COO operands in the compiler (fuseflow/compiler/coo.py): the suite's COO programs with
duplicate entries in the input (summed, as scipy does), in every valid dataflow order and with
the global lowering; the structure of the graphs (an accumulator over the duplicate-summing
index, the COO scanners); the rejections with their messages; and a property test of random
einsums with COO operands against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from compiler_programs import SUITE, check, random_inputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_programs import compile_or_assume

from fuseflow.compiler import (
    Fusion,
    FusionError,
    LoweringError,
    Program,
    ProgramError,
    all_orders,
    compile_program,
    einsum,
    run_program,
)
from fuseflow.ir.samml import NodeKind
from fuseflow.ir.tensor import Format, TensorData
from sw_sim import run_graph

COO_PROGRAMS = sorted(n for n in SUITE if n.startswith("coo_"))


def with_duplicates(a: np.ndarray, fmt, rng: np.random.Generator) -> TensorData:
    """``a`` stored in the COO format ``fmt`` with duplicate entries: each nonzero split into one
    to three stored entries that sum to it, and some zero coordinates stored as a pair of
    entries that cancel (x and -x)."""
    stored = np.transpose(a, fmt.mode_order)
    coords, vals = [], []
    for c in np.argwhere(np.ones(stored.shape, bool)):
        v = int(stored[tuple(c)])
        if v:
            parts = int(rng.integers(1, 4))
            cuts = [int(x) for x in rng.integers(-5, 6, parts - 1)]
            for x in [*cuts, v - sum(cuts)]:
                coords.append(c)
                vals.append(x)
        elif rng.random() < 0.15:
            x = int(rng.integers(1, 5))
            coords += [c, c]
            vals += [x, -x]
    crd = np.array(coords, dtype=np.int64).reshape(-1, a.ndim)
    nu = fmt.levels.index(Format.COMPRESSED_NONUNIQUE)
    assert nu == 0, "the suite's COO tensors are plain COO"
    crds = [crd[:, lvl] for lvl in range(a.ndim)]
    segs = [np.array([0, len(vals)], np.int64)] + [None] * (a.ndim - 1)
    td = TensorData(a.shape, fmt, segs, crds, np.array(vals, np.int64))
    np.testing.assert_array_equal(td.to_dense(), a)
    return td


def coo_inputs(program: Program, dense: dict[str, np.ndarray], seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {k: with_duplicates(v, program.decls[k].fmt, rng) if program.decls[k].fmt.coo else v
            for k, v in dense.items()}


@pytest.mark.parametrize("fusion", [Fusion.UNFUSED, Fusion.PARTIAL, Fusion.FULL], ids=lambda f: f.value)
@pytest.mark.parametrize("name", COO_PROGRAMS)
def test_duplicates_are_summed(name: str, fusion: Fusion) -> None:
    case = SUITE[name]
    program = case.build()
    compiled = compile_program(program, fusion)
    for seed in (5, 6):
        dense = random_inputs(program, case.density, seed)
        check(compiled, coo_inputs(program, dense, seed), dense)


@pytest.mark.parametrize("name", COO_PROGRAMS)
def test_every_valid_order_and_the_global_lowering(name: str) -> None:
    case = SUITE[name]
    program = case.build()
    dense = random_inputs(program, case.density, 8)
    tensors = coo_inputs(program, dense, 8)
    base = compile_program(program, Fusion.FULL)
    if len(base.groups) == 1:
        for order in all_orders(base.groups[0].group)[:6]:
            check(compile_program(program, Fusion.FULL, fused_orders={0: order}), tensors, dense)
    check(compile_program(program, Fusion.FULL, factored=False), tensors, dense)


def test_the_duplicate_index_is_above_the_coo_levels_and_accumulated() -> None:
    compiled = compile_program(SUITE["coo_spmv"].build())
    group = compiled.groups[0].group
    assert group.order == ("u1", "i", "u0")  # u1: the duplicate-summing index, above A's rows
    assert "A" in group.origins["u1"] and "duplicates" in group.origins["u1"]
    (graph,) = compiled.graphs
    scans = {n.params["level"]: graph.tensors["A"].fmt.levels[n.params["level"]]
             for n in graph.nodes.values() if n.kind is NodeKind.SCAN and n.params["tensor"] == "A"}
    assert scans == {0: Format.COMPRESSED_NONUNIQUE, 1: Format.SINGLETON}
    kinds = [n.kind for n in graph.nodes.values()]
    assert kinds.count(NodeKind.SPACC1) == 2 and NodeKind.LOCATE in kinds and NodeKind.INTERSECT not in kinds
    # the iteration tensor of the duplicate index is scanned, never loaded
    loads = {n.params["tensor"] for n in graph.nodes.values() if n.kind is NodeKind.ARRAY_LOAD}
    assert loads == {"A", "x"}
    text = compiled.explain()
    assert "COO: u1 is the index that sums the duplicates of COO tensor A" in text
    assert "duplicates of COO tensor A_{i,u0} are summed over u1 above its non-unique level" in text
    # a matrix result keyed below the duplicate index needs the order-2 accumulator
    (g2,) = compile_program(SUITE["coo_spmm"].build()).graphs
    assert NodeKind.SPACC2 in [n.kind for n in g2.nodes.values()]


def _one(decls, expr, name="p", **kw) -> Program:
    p = Program(name)
    hs = [p.tensor(*d) for d in decls]
    p.output(p.let("Y", expr(*hs), **kw))
    return p


def test_a_non_unique_level_meets_only_located_dense_levels() -> None:
    """A COO input whose non-unique level would meet a level that cannot be located is read
    from a DCSR copy (duplicates summed on the host, fusion.coo_copies); next to located dense
    levels it is scanned as COO; with the locate pass off that is the clear error."""
    p = _one([("A", (5, 6), "coo"), ("B", (5, 6), "dcsr")], lambda A, B: A * B)
    compiled = compile_program(p)
    assert [(c.name, c.source, str(c.fmt)) for c in compiled.permuted] == [("A_dcsr", "A", "[c,c]")]
    assert "permuted copy: A_dcsr = A stored as [c,c] (COO tensor A meets operands" in compiled.explain()
    dense = random_inputs(p, {"A": 0.5, "B": 0.5}, 1)
    check(compiled, coo_inputs(p, dense, 1), dense)
    # the same with B's rows dense: located, scanned as COO, and right
    q = _one([("A", (5, 6), "coo"), ("B", (5, 6), "csr")], lambda A, B: A * B)
    assert not compile_program(q).permuted
    dense = random_inputs(q, {"A": 0.5, "B": 0.5}, 1)
    check(compile_program(q), coo_inputs(q, dense, 1), dense)
    with pytest.raises(LoweringError, match=r"merges it with B_\{i,j\} \(its dense level 0\).*the locate "
                                            r"pass is off: compile without --no-locate"):
        compile_program(q, locate=False)
    # two COO operands meet at B's non-unique level: B is read from its DCSR copy
    r = _one([("A", (5, 6), "coo"), ("B", (6, 4), "coo")], lambda A, B: einsum("ik,kj->ij", A, B))
    compiled = compile_program(r)
    assert [c.source for c in compiled.permuted] == ["B"]
    dense = random_inputs(r, {"A": 0.5, "B": 0.5}, 2)
    check(compiled, coo_inputs(r, dense, 2), dense)


def test_other_coo_rejections() -> None:
    # read twice in one product: from a DCSR copy (duplicates summed first), A ∘ A of the sums
    p = _one([("A", (5, 6), "coo")], lambda A: A * A)
    dense = random_inputs(p, {"A": 0.5}, 3)
    check(compile_program(p), coo_inputs(p, dense, 3), dense)
    with pytest.raises(ProgramError, match=r"tensor 'Y' is computed, and its format \[n,1\] has COO levels"):
        _one([("A", (5, 6), "csr")], lambda A: 2 * A, fmt="coo")
    # a 3-D elementwise result below the duplicate index would need an order-3 accumulator
    with pytest.raises(FusionError, match=r"reduction index u0 of Y has output indices i, j, l after it.*"
                                          r"u0 is the index that sums the duplicates of COO tensor T"):
        compile_program(_one([("T", (3, 4, 5), "coo")], lambda T: 2 * T))


def test_scipy_coo_input_with_duplicates() -> None:
    """A scipy ``coo_array`` with repeated coordinates as program input: summed on loading."""
    program = SUITE["coo_spmm"].build()
    m = sp.coo_array(([3, 4, -1, 2, 2], ([0, 0, 3, 3, 6], [1, 1, 5, 0, 2])), shape=(7, 6))
    x = np.arange(30).reshape(6, 5) - 12
    result = run_program(compile_program(program), {"A": m, "X": x}, simulate=run_graph)
    np.testing.assert_array_equal(result.dense("C"), m.toarray() @ x)


@st.composite
def coo_programs(draw):
    """out = einsum(A, B) with A COO (random mode order) and B dense / CSR-like (random levels
    and mode order), over indices i, j, k; some sums of products."""
    a_idx = "".join(draw(st.permutations(draw(st.sampled_from(["ij", "ik", "i", "ijk"])))))
    b_idx = "".join(draw(st.permutations(draw(st.sampled_from(["j", "jk", "k", "ij", "kj"])))))
    letters = sorted(set(a_idx + b_idx))
    out = "".join(c for c in letters if draw(st.booleans()))
    a_mo = tuple(draw(st.permutations(range(len(a_idx)))))
    b_levels = "".join(draw(st.sampled_from("dc")) for _ in b_idx)
    b_mo = tuple(draw(st.permutations(range(len(b_idx)))))
    seed = draw(st.integers(0, 2**31 - 1))
    dens = draw(st.sampled_from([0.0, 0.3, 0.8]))
    return a_idx, a_mo, b_idx, b_levels, b_mo, out, seed, dens


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(coo_programs())
def test_random_coo_einsums_match_numpy(spec) -> None:
    a_idx, a_mo, b_idx, b_levels, b_mo, out, seed, dens = spec
    size = {"i": 3, "j": 4, "k": 2}
    p = Program("coo_prop")
    A = p.tensor("A", tuple(size[c] for c in a_idx), "coo", mode_order=a_mo)
    B = p.tensor("B", tuple(size[c] for c in b_idx), b_levels, mode_order=b_mo)
    p.output(p.let("Y", einsum(f"{a_idx},{b_idx}->{out}", A, B)))
    # refused, no example: a non-unique level meeting a scanned level, an order-3 accumulator
    compiled = compile_or_assume(p, Fusion.FULL, True)
    rng = np.random.default_rng(seed)
    dense = {}
    for name, idx, d in (("A", a_idx, dens), ("B", b_idx, 0.6)):
        shape = tuple(size[c] for c in idx)
        dense[name] = rng.integers(-3, 4, shape) * (rng.random(shape) < d)
    tensors = {"A": with_duplicates(dense["A"], p.decls["A"].fmt, rng), "B": dense["B"]}
    check(compiled, tensors, dense)


@pytest.mark.parametrize("fmt,mode_order", [("dn1", None), ("cn1", None), ("dn1", (1, 0, 2)),
                                            ("cn1", (2, 1, 0)), ("dn", None)])
def test_non_unique_level_below_other_levels(fmt: str, mode_order) -> None:
    """A non-unique level under dense or compressed levels (a COO per slice): the duplicate
    index sits between the level above and the non-unique level."""
    p = Program("coo_slices")
    shape = (3, 4, 5) if len(fmt) == 3 else (3, 5)
    B = p.tensor("B", shape, fmt, mode_order=mode_order)
    c = p.tensor("c", (5,), "dense")
    p.output(p.let("Y", einsum("ijk,k->ij" if len(fmt) == 3 else "ik,k->i", B, c)))
    compiled = compile_program(p)
    group = compiled.groups[0].group
    li = group.views["B"].level_indices()
    nu = B.decl.fmt.levels.index(Format.COMPRESSED_NONUNIQUE)
    d = next(i for i in group.origins if "duplicates of COO tensor B" in group.origins[i])
    assert group.order.index(li[nu - 1]) < group.order.index(d) < group.order.index(li[nu])
    rng = np.random.default_rng(4)
    b = rng.integers(-3, 4, shape) * (rng.random(shape) < 0.4)
    b[1] = 0
    data = {"B": b, "c": rng.integers(-3, 4, 5)}
    check(compiled, data)
