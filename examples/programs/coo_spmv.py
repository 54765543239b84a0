"""SpMV y_i = Σ_j A_ij x_j with A in COO (a scipy ``coo_array`` whose repeated coordinates are
summed on loading): the row level is non-unique, x is located at the singleton column level,
and the accumulator over the COO's duplicate-summing index emits each row once
(docs/compiler.md, "COO operands")."""

import numpy as np
import scipy.sparse as sp

from fuseflow.compiler import Program, einsum


def program(n: int = 16) -> Program:
    """A n×n (COO), x of n."""
    p = Program("coo_spmv")
    A = p.tensor("A", (n, n), "coo")
    x = p.tensor("x", (n,), "dense")
    p.output(p.let("y", einsum("ij,j->i", A, x)))
    return p


def example_data(seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    nnz = 40
    rows, cols = rng.integers(0, 16, nnz), rng.integers(0, 16, nnz)  # repeats included
    A = sp.coo_array((rng.integers(-4, 5, nnz), (rows, cols)), shape=(16, 16))
    return {"A": A, "x": rng.integers(-4, 5, 16)}
