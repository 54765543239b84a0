"""COO tensors (a compressed level with non-unique coordinates, then singleton levels): level
arrays against scipy's COO, round trips in every mode order and order 1-3 (hypothesis), sums of
duplicates, and the validation messages for broken COO arrays."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.compiler import Program, compile_program, einsum
from fuseflow.compiler.densify import iteration_data
from fuseflow.ir.samml import GraphError
from fuseflow.ir.tensor import COO, CSR, DCSR, Format, TensorData, TensorFormat, coo_format
from fuseflow.ir.validate import tensor_problems
from sw_sim import run_graph

N, S = Format.COMPRESSED_NONUNIQUE, Format.SINGLETON


def test_coo_arrays_are_scipys_sorted_coordinates():
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (6, 7)) * (rng.random((6, 7)) < 0.4)
    a[2] = 0
    td = TensorData.from_dense(a, COO)
    rows, cols = np.nonzero(a)  # numpy: row-major order
    assert td.arrays() == {"0.seg": [0, len(rows)], "0.crd": rows.tolist(), "1.crd": cols.tolist(),
                           "vals": a[rows, cols].tolist()}
    assert td.seg[1] is None  # a singleton level has no seg array
    cm = TensorData.from_dense(a, TensorFormat(COO.levels, (1, 0)))  # column-major: sorted by column
    c_rows, c_cols = np.nonzero(a.T)
    assert cm.crd[0].tolist() == c_rows.tolist() and cm.crd[1].tolist() == c_cols.tolist()


def test_from_scipy_sums_duplicates_and_drops_zeros():
    m = sp.coo_array(([4, 1, 2, -3, 3, 5], ([2, 0, 2, 1, 1, 0], [1, 3, 1, 0, 0, 0])), shape=(3, 4))
    td = TensorData.from_scipy(m, COO)
    # (2, 1) twice: 4 + 2; (1, 0): -3 + 3 = 0 is dropped; sorted row-major
    assert td.arrays() == {"0.seg": [0, 3], "0.crd": [0, 0, 2], "1.crd": [0, 3, 1], "vals": [5, 1, 6]}
    np.testing.assert_array_equal(td.to_dense(), m.toarray())


def test_to_dense_and_to_scipy_sum_stored_duplicates():
    td = TensorData((3, 3), COO, [np.array([0, 5]), None], [np.array([0, 0, 1, 1, 2]), np.array([1, 1, 0, 2, 2])],
                    np.array([2, 5, -1, 4, 4]))
    assert tensor_problems(td) == []  # duplicates are allowed (sorted)
    want = np.array([[0, 7, 0], [-1, 0, 4], [0, 0, 4]])
    np.testing.assert_array_equal(td.to_dense(), want)
    np.testing.assert_array_equal(td.to_scipy().toarray(), want)
    assert td.convert(DCSR).arrays() == TensorData.from_dense(want, DCSR).arrays()
    assert td.convert(CSR).arrays() == TensorData.from_dense(want, CSR).arrays()


FORMATS = [TensorFormat(levels, mo)
           for levels in ((N,), (N, S), (N, S, S), (Format.DENSE, N, S), (Format.COMPRESSED, N, S),
                          (Format.DENSE, N), (Format.COMPRESSED, Format.DENSE, N))
           for mo in itertools.permutations(range(len(levels)))]


@settings(max_examples=150, deadline=None)
@given(fmt=st.sampled_from(FORMATS), seed=st.integers(0, 2**31 - 1), density=st.sampled_from([0.0, 0.2, 0.6, 1.0]))
def test_round_trips(fmt, seed, density):
    rng = np.random.default_rng(seed)
    shape = tuple(int(rng.integers(1, 6)) for _ in range(fmt.order))
    a = rng.integers(-5, 6, shape) * (rng.random(shape) < density)
    td = TensorData.from_dense(a, fmt)
    assert tensor_problems(td) == []
    np.testing.assert_array_equal(td.to_dense(), a)
    nu = fmt.levels.index(N)
    assert len(td.crd[nu]) == np.count_nonzero(a) or nu > 0  # one position per entry
    if fmt.order == 2:
        np.testing.assert_array_equal(TensorData.from_scipy(sp.coo_array(a), fmt).to_dense(), a)
        np.testing.assert_array_equal(td.to_scipy().toarray(), a)
        for other in (CSR, DCSR, COO):
            np.testing.assert_array_equal(td.convert(other).to_dense(), a)
            assert td.convert(other).convert(fmt).arrays() == td.arrays()


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(0, 30))
def test_duplicates_sum_like_scipy(seed, n):
    """Random (sorted) COO entries with repeats: to_dense, to_scipy and a conversion equal
    scipy's sum of the duplicates."""
    rng = np.random.default_rng(seed)
    r, c, v = rng.integers(0, 4, n), rng.integers(0, 5, n), rng.integers(-3, 4, n)
    o = np.lexsort((c, r))
    td = TensorData((4, 5), COO, [np.array([0, n]), None], [r[o], c[o]], v[o])
    assert tensor_problems(td) == []
    want = sp.coo_array((v, (r, c)), shape=(4, 5)).toarray()
    np.testing.assert_array_equal(td.to_dense(), want)
    np.testing.assert_array_equal(td.to_scipy().toarray(), want)
    assert td.convert(COO).arrays() == td.arrays()  # the same format: unchanged
    np.testing.assert_array_equal(TensorData.from_scipy(td.to_scipy(), COO).to_dense(), want)


def test_format_names_and_rules():
    assert str(COO) == "[n,1]" and str(coo_format(3, (2, 0, 1))) == "[n,1,1]@201"
    assert TensorFormat(("n", "1")) == COO
    assert TensorFormat.from_json(COO.to_json()) == COO
    assert COO.to_json()["levels"] == ["compressed_nonunique", "singleton"]
    with pytest.raises(ValueError, match="level 0 is singleton, but it is the first level"):
        TensorFormat((S, S))
    with pytest.raises(ValueError, match="level 1 is singleton, but level 0 above it is dense"):
        TensorFormat((Format.DENSE, S))
    with pytest.raises(ValueError, match="level 2 is compressed under the singleton level 1"):
        TensorFormat((N, S, Format.COMPRESSED))


def _coo_spmv_graph():
    p = Program("coo_spmv_check")
    A = p.tensor("A", (4, 5), "coo")
    x = p.tensor("x", (5,), "dense")
    p.output(p.let("y", einsum("ij,j->i", A, x)))
    (g,) = compile_program(p).graphs
    return g


def _coo(seg, r, c, v):
    return TensorData((4, 5), COO, [np.array(seg), None], [np.array(r), np.array(c)], np.array(v))


BROKEN = {
    "row out of range": (_coo([0, 3], [0, 1, 4], [0, 1, 2], [1, 2, 3]),
                         r"level 0: crd\[2\] = 4 is outside the dimension 0..3"),
    "column out of range": (_coo([0, 3], [0, 1, 3], [0, 5, 2], [1, 2, 3]),
                            r"level 1: crd\[1\] = 5 is outside the dimension 0..4"),
    "rows not sorted": (_coo([0, 3], [0, 2, 1], [0, 1, 2], [1, 2, 3]),
                        r"level 0: crd\[2\] = 1 decreases within its segment \(after 2\)"),
    "columns not sorted in a row": (_coo([0, 3], [1, 1, 2], [3, 1, 2], [1, 2, 3]),
                                    (r"level 1: crd\[1\] = 1 is below crd\[0\] = 3 under equal coordinates "
                                    r"above: COO entries must be sorted in storage order")),
    "singleton too short": (_coo([0, 3], [0, 1, 2], [0, 1], [1, 2, 3]),
                            r"level 1: the singleton crd has 2 entries, expected 3 \(one per parent position\)"),
    "seg not at nnz": (_coo([0, 2], [0, 1, 2], [0, 1, 2], [1, 2, 3]),
                       r"level 0: seg ends at 2, but crd has 3 entries"),
    "vals too short": (_coo([0, 3], [0, 1, 2], [0, 1, 2], [1, 2]),
                       r"vals has 2 entries, expected 3"),
    "no singleton crd": (TensorData((4, 5), COO, [np.array([0, 1]), None], [np.array([0]), None], np.array([1])),
                         r"level 1 is singleton but has no crd array"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_coo_arrays_are_named(case):
    td, says = BROKEN[case]
    with pytest.raises(GraphError, match=r"tensor 'A': " + says):
        run_graph(_coo_spmv_graph(), _inputs(td, np.ones(5, int)))


def _inputs(a: TensorData, x: np.ndarray) -> dict[str, TensorData]:
    """A, x and the compiler's iteration tensor of the duplicate-summing index."""
    return {"A": a, "x": TensorData.from_dense(x, TensorFormat(("d",))), "_iter1": iteration_data("_iter1")}


def test_columns_may_decrease_across_rows():
    """Sorted in storage order: a new row may start at any column."""
    td = _coo([0, 3], [0, 1, 1], [4, 0, 3], [1, 2, 3])
    assert tensor_problems(td) == []
    res = run_graph(_coo_spmv_graph(), _inputs(td, np.arange(5)))
    np.testing.assert_array_equal(res.outputs["y"].to_dense(), td.to_dense() @ np.arange(5))


def test_a_level_writer_refuses_coo_levels():
    """COO is an input format: a graph (e.g. written by hand) whose level writer fills a
    non-unique level is refused, naming the node, tensor and level."""
    import dataclasses

    g = _coo_spmv_graph()
    g.tensors["y"] = dataclasses.replace(g.tensors["y"], fmt=TensorFormat(("n",)))
    with pytest.raises(GraphError, match=r"write.*level 0 of tensor 'y' is compressed_nonunique: a level "
                                          r"writer fills dense or compressed levels only"):
        g.verify()
