"""Fuzzing tensors: random sparse integer matrices (any size, density from empty to full, whole
rows and columns empty, values up to the int32 range) through every built-in kernel in sw_sim,
checked against scipy/numpy; and random tensors in every 2-level format round-trip through the
level arrays.  Reduced in the suite; ``FUSEFLOW_FUZZ=full`` runs 10 000 of each."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from fuzz_settings import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from fuseflow.kernels import KERNELS, example_from_matrix
from fuseflow.ir.tensor import TensorData, TensorFormat
from fuseflow.ir.validate import tensor_problems
from sw_sim import run_graph

FORMATS = [TensorFormat((a, b), mo) for a in ("dense", "compressed") for b in ("dense", "compressed")
           for mo in ((0, 1), (1, 0))]


@st.composite
def matrices(draw, max_n: int = 12) -> np.ndarray:
    """A square integer matrix with a random density, some rows and columns emptied."""
    n = draw(st.integers(1, max_n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    density = draw(st.sampled_from([0.0, 0.05, 0.2, 0.5, 0.9, 1.0]))
    big = draw(st.booleans())
    hi = 2**12 if big else 5  # kernel outputs stay inside int32 (products of two values, summed)
    a = rng.integers(-hi, hi + 1, (n, n)) * (rng.random((n, n)) < density)
    a[rng.random(n) < draw(st.sampled_from([0.0, 0.3])), :] = 0
    a[:, rng.random(n) < draw(st.sampled_from([0.0, 0.3]))] = 0
    return a.astype(np.int64)


@fuzz_settings(reduced=80, full=10_000)
@given(a=matrices(), kernel=st.sampled_from(sorted(KERNELS)), seed=st.integers(0, 1000))
def test_fuzz_kernels_on_random_matrices(a, kernel, seed) -> None:
    g, data, _, expected = example_from_matrix(kernel, sp.csr_array(a), seed, "fuzz")
    res = run_graph(g, data)
    [out] = res.outputs.values()
    np.testing.assert_array_equal(out.to_dense(), expected)


@fuzz_settings(reduced=80, full=10_000)
@given(a=matrices(max_n=9), fmt=st.sampled_from(FORMATS))
def test_fuzz_level_arrays_round_trip(a, fmt) -> None:
    td = TensorData.from_dense(a, fmt)
    assert tensor_problems(td) == []
    np.testing.assert_array_equal(td.to_dense(), a)
    np.testing.assert_array_equal(TensorData.from_scipy(sp.csr_array(a), fmt).to_dense(), a)
