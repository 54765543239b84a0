"""SpMM T_ij = A_ik X_kj (A CSR, X dense), Gustavson order i -> k -> j (the paper's Fig. 7)."""

import numpy as np

from fuseflow.compiler import Program, einsum


def program(n: int = 16, m: int = 8) -> Program:
    """A n×n, X n×m."""
    p = Program("spmm")
    A = p.tensor("A", (n, n), "csr")
    X = p.tensor("X", (n, m), "dense")
    p.output(p.let("T", einsum("ik,kj->ij", A, X), order="ikj"))
    return p


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    A = rng.integers(-4, 5, (16, 16)) * (rng.random((16, 16)) < 0.2)
    return {"A": A, "X": rng.integers(-4, 5, (16, 8))}
