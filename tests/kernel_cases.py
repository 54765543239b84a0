"""Datasets for the spine kernels: seeded random 90%-sparse matrices and edge cases."""

from __future__ import annotations

import numpy as np
from sparse_data import random_sparse

from fuseflow.kernels import KERNELS
from fuseflow.ir.tensor import TensorData

REFERENCE = {
    "spmv": lambda d: d["B"] @ d["c"],
    "spmm_dense": lambda d: d["A"] @ d["B"],
    "spmm_csr": lambda d: d["A"] @ d["B"],
    "add": lambda d: d["A"] + d["B"],
    "mul": lambda d: d["A"] * d["B"],
}


def operands(kernel: str, n: int, case: str, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def sparse():
        a = random_sparse(rng, (n, n), 0.1)
        if case == "empty_rows":
            a[::3] = 0
        elif case == "all_empty":
            a[:] = 0
        elif case == "single":
            a[:] = 0
            a[rng.integers(n), rng.integers(n)] = int(rng.integers(1, 9))
        return a

    if kernel == "spmv":
        return {"B": sparse(), "c": rng.integers(-8, 9, n)}
    if kernel == "spmm_dense":
        return {"A": sparse(), "B": rng.integers(-8, 9, (n, n))}
    return {"A": sparse(), "B": sparse()}


CASES = ["random", "empty_rows", "all_empty", "single"]


def dataset(kernel: str, n: int, case: str, seed: int = 0):
    g = KERNELS[kernel](n)
    ops = operands(kernel, n, case, seed)
    data = {t: TensorData.from_dense(v, g.tensors[t].fmt) for t, v in ops.items()}
    return g, data, REFERENCE[kernel](ops)


def same_arrays(a, b, where: str) -> None:
    """Every level array and the values of two results' outputs are equal
    (output tensors keyed by name, level arrays and values compared exactly)."""
    assert a.keys() == b.keys(), where
    for t in a:
        assert np.array_equal(a[t].vals, b[t].vals), (where, t)
        for lvl, (sa, sb) in enumerate(zip(a[t].seg, b[t].seg, strict=True)):
            assert (sa is None) == (sb is None), (where, t, lvl)
            if sa is not None:
                assert np.array_equal(sa, sb), (where, t, lvl)
                assert np.array_equal(a[t].crd[lvl], b[t].crd[lvl]), (where, t, lvl)
