import numpy as np
import pytest
from sparse_data import random_sparse

from fuseflow.ir.tensor import CSC, CSR, DCSR, DENSE2, Format, TensorData, TensorFormat


@pytest.mark.parametrize("fmt", [CSR, CSC, DCSR, DENSE2, TensorFormat(("compressed", "dense"))])
def test_round_trip_2d(fmt, rng):
    a = random_sparse(rng, (7, 5), 0.3)
    a[2] = 0
    assert np.array_equal(TensorData.from_dense(a, fmt).to_dense(), a)


def test_csr_arrays_match_scipy(rng):
    # deferred: scipy is optional (the dev extra) and only this test needs it
    import scipy.sparse as sp

    a = random_sparse(rng, (9, 6), 0.3)
    td = TensorData.from_dense(a, CSR)
    ref = sp.csr_matrix(a)
    assert list(td.seg[1]) == list(ref.indptr)
    assert list(td.crd[1]) == list(ref.indices)
    assert list(td.vals) == list(ref.data)


def test_dcsr_skips_empty_rows():
    a = np.zeros((4, 4), dtype=int)
    a[1, 2] = 5
    a[3, 0] = 7
    td = TensorData.from_dense(a, DCSR)
    assert list(td.crd[0]) == [1, 3]
    assert list(td.seg[1]) == [0, 1, 2]


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_round_trip_3d(order, rng):
    a = random_sparse(rng, (3, 4, 5), 0.2)
    fmt = TensorFormat((Format.DENSE, Format.COMPRESSED, Format.COMPRESSED), order)
    assert np.array_equal(TensorData.from_dense(a, fmt).to_dense(), a)


def test_bad_format_messages():
    with pytest.raises(ValueError, match="'bogus'"):
        Format.parse("bogus")
    with pytest.raises(ValueError, match="permutation"):
        TensorFormat(("dense", "dense"), (0, 0))
    with pytest.raises(ValueError, match="order 3"):
        TensorData.from_dense(np.zeros((2, 2, 2)), CSR)


@pytest.mark.parametrize("fmt", [CSR, CSC, DCSR, TensorFormat(("compressed", "compressed"), (1, 0)),
                                 DENSE2, TensorFormat(("compressed", "dense"))])
def test_from_scipy_equals_from_dense(fmt):
    import scipy.sparse as sp

    for seed in range(4):
        rng = np.random.default_rng(seed)
        a = rng.integers(-3, 4, (7, 9)) * (rng.random((7, 9)) < 0.3)
        a[seed % 7] = 0
        a[:, seed] = 0
        x, y = TensorData.from_scipy(sp.coo_matrix(a), fmt), TensorData.from_dense(a, fmt)
        np.testing.assert_array_equal(x.to_dense(), a)
        for p, q in [*zip(x.seg, y.seg), *zip(x.crd, y.crd), (x.vals, y.vals)]:
            assert (p is None and q is None) or np.array_equal(p, q)


SPARSE2 = [CSR, CSC, DCSR, TensorFormat(("compressed", "compressed"), (1, 0))]


@pytest.mark.parametrize("src", SPARSE2 + [DENSE2])
def test_convert_and_to_scipy_without_a_dense_copy(src, monkeypatch):
    import scipy.sparse as sp

    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (6, 11)) * (rng.random((6, 11)) < 0.25)
    a[2] = 0
    td = TensorData.from_dense(a, src)
    ref = sp.csr_array(a)
    if src != DENSE2:  # from a sparse format, nothing may go through a dense array
        monkeypatch.setattr(TensorData, "to_dense", lambda *_a, **_k: pytest.fail("made dense"))
        monkeypatch.setattr(TensorData, "from_dense", lambda *_a, **_k: pytest.fail("made dense"))
    m = td.to_scipy()
    assert m.shape == a.shape and (m != ref).nnz == 0
    for dst in SPARSE2:
        x = td.convert(dst)
        assert x.fmt == dst and (x.to_scipy() != ref).nnz == 0
    monkeypatch.undo()
    for dst in SPARSE2:  # the level arrays equal those built from the dense array
        x, y = td.convert(dst), TensorData.from_dense(a, dst)
        for p, q in [*zip(x.seg, y.seg), *zip(x.crd, y.crd), (x.vals, y.vals)]:
            assert (p is None and q is None) or np.array_equal(p, q)
    assert np.array_equal(td.convert(DENSE2).to_dense(), a)
    assert TensorData.from_array(ref, CSR).nnz == np.count_nonzero(a)
    with pytest.raises(ValueError, match="order 3 is not a matrix"):
        TensorData.from_dense(np.zeros((2, 2, 2)), TensorFormat(("dense",) * 3)).to_scipy()
