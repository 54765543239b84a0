"""Block formats (fuseflow.ir.tensor.BlockFormat): the stored higher-order tensor, the loaders
(dense array, block mask, scipy BSR), the way back to the original array and the errors, checked
against numpy / scipy written here independently of the layout code."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.ir.tensor import (
    CSR,
    DCSR,
    BlockFormat,
    Format,
    TensorData,
    TensorFormat,
    bcsr,
    block_dcsr,
    row_blocked,
)
from fuseflow.ir.validate import tensor_problems


def _block_sparse(rng, shape, block, density=0.4):
    """A random matrix whose non-zeros sit in random blocks (some blocks partly zero)."""
    grid = (shape[0] // block[0], shape[1] // block[1])
    mask = rng.random(grid) < density
    a = rng.integers(-9, 10, size=shape) * np.kron(mask, np.ones(block, dtype=int))
    return a, mask


def test_bcsr_levels_are_scipy_bsr(rng):
    a, _ = _block_sparse(rng, (16, 24), (4, 4))
    td = TensorData.from_blocks(a, bcsr(4), name="A")
    ref = sp.bsr_array(a, blocksize=(4, 4))
    ref.eliminate_zeros()  # drops all-zero blocks: a block is stored iff any entry is non-zero
    ref.sort_indices()
    assert td.fmt == TensorFormat(("dense", "compressed", "dense", "dense"))
    assert td.shape == (4, 6, 4, 4)
    assert list(td.seg[1]) == list(ref.indptr) and list(td.crd[1]) == list(ref.indices)
    assert list(td.vals) == list(ref.data.reshape(-1))
    assert np.array_equal(td.to_dense(), a)
    assert np.array_equal(td.to_bsr().toarray(), a)


def test_row_blocked_is_csr_of_column_blocks(rng):
    a, _ = _block_sparse(rng, (6, 16), (1, 4))
    td = TensorData.from_blocks(a, row_blocked(4), name="M")
    assert td.shape == (6, 4, 4) and td.fmt == TensorFormat(("dense", "compressed", "dense"))
    blocks = a.reshape(6, 4, 4)  # [row, block column, column in block]
    keep = np.abs(blocks).sum(axis=2) != 0
    assert list(td.seg[1]) == [0, *np.cumsum(keep.sum(axis=1))]
    assert list(td.crd[1]) == [k for i in range(6) for k in range(4) if keep[i, k]]
    assert list(td.vals) == [x for i in range(6) for k in range(4) if keep[i, k] for x in blocks[i, k]]
    assert np.array_equal(td.to_dense(), a)


@pytest.mark.parametrize("fmt", [bcsr(2), bcsr((2, 8)), row_blocked(8), block_dcsr(4), bcsr(4, lanes=2),
                                 row_blocked(8, lanes=4), BlockFormat(CSR, (1, 1)),
                                 BlockFormat(TensorFormat(("dense", "compressed"), (1, 0)), (8, 2)),
                                 BlockFormat(TensorFormat(("compressed", "dense", "compressed")), (2, 1, 4))])
def test_round_trip(fmt, rng):
    shape = tuple(8 * b if b > 1 else 5 for b in fmt.block)
    a = rng.integers(-5, 6, size=shape) * (rng.random(shape) < 0.2)
    td = TensorData.from_blocks(a, fmt, name="T")
    assert td.fmt == fmt.stored() and td.shape == fmt.stored_shape(a.shape)
    assert td.blocking.shape == a.shape
    assert not tensor_problems(td)
    assert np.array_equal(td.to_dense(), a)
    # the stored tensor is an ordinary tensor: unblocked it round-trips on its own
    plain = TensorData(td.shape, td.fmt, td.seg, td.crd, td.vals)
    assert np.array_equal(plain.to_dense(), td.stored_dense())


def test_lanes_split_keeps_the_values_order(rng):
    a, _ = _block_sparse(rng, (8, 16), (1, 8))
    whole = TensorData.from_blocks(a, row_blocked(8), name="A")
    split = TensorData.from_blocks(a, row_blocked(8, lanes=2), name="A")
    assert split.shape == (8, 2, 4, 2)
    assert list(split.vals) == list(whole.vals) and list(split.crd[1]) == list(whole.crd[1])
    # the innermost level has `lanes` entries: vals[ref * 2 + l] reads two neighbours of a row
    assert np.array_equal(split.to_dense(), a)


def test_dcsr_outer_drops_empty_block_rows():
    a = np.zeros((8, 8), int)
    a[4:6, 2:4] = 1
    td = TensorData.from_blocks(a, block_dcsr(2), name="A")
    assert list(td.crd[0]) == [2] and list(td.crd[1]) == [1]
    assert list(td.vals) == [1, 1, 1, 1]


def test_transposed_outer_order_reads_columns(rng):
    """X (k x m) with its k dimension blocked and the columns outer: vals[(j * K + kb) * B + l]
    is X[kb * B + l, j] (what a B-lane load of a column block reads)."""
    x = rng.integers(-9, 10, size=(16, 3))
    td = TensorData.from_blocks(x, BlockFormat(TensorFormat(("dense", "dense"), (1, 0)), (4, 1)), name="X")
    assert td.shape == (3, 4, 4)
    for j in range(3):
        for kb in range(4):
            assert list(td.vals[(j * 4 + kb) * 4:(j * 4 + kb + 1) * 4]) == list(x[kb * 4:(kb + 1) * 4, j])
    assert np.array_equal(td.to_dense(), x)


def test_block_mask_stores_zero_blocks(rng):
    mask = np.array([[True, False, True], [False, False, True]])
    a = np.zeros((4, 6), int)
    a[0:2, 4:6] = [[1, 2], [3, 4]]
    td = TensorData.from_block_mask(mask, a, bcsr(2), name="A")
    assert list(td.crd[1]) == [0, 2, 2]  # block (0, 0) is all zero but marked: stored
    assert td.nnz == 12 and np.array_equal(td.to_dense(), a)
    stacked = np.stack([a[0:2, 0:2], a[0:2, 4:6], a[2:4, 4:6]])
    same = TensorData.from_block_mask(mask, stacked, bcsr(2), name="A")
    assert same.arrays() == td.arrays() and np.array_equal(same.to_dense(), a)


def test_bsr_round_trip_keeps_stored_blocks(rng):
    a, _ = _block_sparse(rng, (8, 8), (2, 4))
    m = sp.bsr_array(a, blocksize=(2, 4))
    for outer in (CSR, DCSR):
        td = TensorData.from_bsr(m, outer, name="A")
        assert td.blocking.fmt.block == (2, 4) and td.fmt.levels[:2] == outer.levels
        assert np.array_equal(td.to_dense(), a)
        back = td.to_bsr()
        assert np.array_equal(back.toarray(), a) and back.blocksize == (2, 4)
    assert np.array_equal(TensorData.from_blocks(a, bcsr((2, 4))).to_scipy().toarray(), a)


def test_padding_is_explicit():
    a = np.arange(1, 31).reshape(5, 6)
    with pytest.raises(ValueError, match=r"tensor 'A': dimension 0 of size 5 is not a multiple of its block size 4.*pad"):
        TensorData.from_blocks(a, bcsr(4), name="A")
    td = TensorData.from_blocks(a, bcsr(4), name="A", pad=True)
    assert td.shape == (2, 2, 4, 4) and td.blocking.padded == (8, 8)
    assert np.array_equal(td.to_dense(), a)


@pytest.mark.parametrize("make, match", [
    (lambda: BlockFormat(CSR, (3, 4)), "block size 3 of mode 0 is not a power of two"),
    (lambda: BlockFormat(CSR, (4, 0)), "block size 0 of mode 1"),
    (lambda: BlockFormat(CSR, (4,)), "1 block sizes"),
    (lambda: row_blocked(4, lanes=8), "lanes=8 must be a power of two that divides the innermost block size 4"),
    (lambda: row_blocked(8, lanes=3), "lanes=3"),
    (lambda: TensorData.from_blocks(np.ones((4, 4, 4)), bcsr(2), name="B"), "tensor 'B': an array of order 3"),
    (lambda: TensorData.from_block_mask(np.ones((2, 3), bool), np.ones((4, 4)), bcsr(2), name="M"),
     r"tensor 'M': block mask of shape \(2, 3\).*block grid of \(2, 2\)"),
    (lambda: TensorData.from_block_mask(np.ones((2, 2)), np.ones((4, 4)), bcsr(2), name="M"), "must be a boolean"),
    (lambda: TensorData.from_block_mask(np.eye(2, dtype=bool), np.ones((4, 4)), bcsr(2), name="M"),
     r"tensor 'M': entry \(0, 2\) = 1.0 is non-zero but its block \(0, 1\) is not in the mask"),
    (lambda: TensorData.from_block_mask(np.eye(2, dtype=bool), np.ones((3, 2, 2)), bcsr(2), name="M"),
     "3 stacked blocks for a mask that marks 2"),
    (lambda: TensorData.from_bsr(sp.bsr_array(np.ones((4, 4)), blocksize=(2, 2)), bcsr(4), name="S"),
     r"tensor 'S': a BSR matrix of 2x2 blocks"),
    (lambda: TensorData.from_blocks(np.ones((4, 4)), TensorFormat(("dense", "dense")), name="C"),
     "tensor 'C': expected a BlockFormat"),
])
def test_bad_input_is_named(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_validation_catches_a_mismatched_record(rng):
    a, _ = _block_sparse(rng, (8, 8), (2, 2))
    td = TensorData.from_blocks(a, bcsr(2), name="A")
    td.blocking = TensorData.from_blocks(a, bcsr(4), name="A").blocking
    assert any("blocked as" in p for p in tensor_problems(td))


def test_convert_blocks_and_unblocks(rng):
    a, _ = _block_sparse(rng, (8, 16), (2, 4))
    csr = TensorData.from_dense(a, CSR)
    blocked = csr.convert(bcsr((2, 4)))
    assert blocked.blocking is not None and np.array_equal(blocked.to_dense(), a)
    assert blocked.arrays() == TensorData.from_blocks(a, bcsr((2, 4))).arrays()
    back = blocked.convert(CSR)
    assert back.blocking is None and back.arrays() == csr.arrays()
    assert np.array_equal(blocked.convert(row_blocked(8)).to_dense(), a)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3), st.integers(0, 3), st.integers(1, 3), st.integers(1, 3), st.sampled_from(["dense", "compressed"]),
       st.sampled_from(["dense", "compressed"]), st.integers(0, 2**31 - 1), st.floats(0, 1))
def test_round_trip_hypothesis(lr, lc, gr, gc, f0, f1, seed, density):
    r, c = 1 << lr, 1 << lc
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, size=(gr * r, gc * c)) * (rng.random((gr * r, gc * c)) < density)
    fmt = BlockFormat(TensorFormat((f0, f1)), (r, c))
    td = TensorData.from_blocks(a, fmt, name="H")
    assert not tensor_problems(td)
    assert np.array_equal(td.to_dense(), a)
    nonzero = np.abs(a.reshape(gr, r, gc, c)).sum(axis=(1, 3)) != 0  # [block row, block column]
    if f1 == "compressed":  # the non-zero blocks
        blocks = int(nonzero.sum())
    elif f0 == "compressed":  # every block of a block row with a non-zero block
        blocks = int(nonzero.any(axis=1).sum()) * gc
    else:
        blocks = gr * gc
    assert td.nnz == blocks * r * c
    assert td.fmt.levels[2:] == (Format.DENSE,) * (td.fmt.order - 2)
