"""SpMM T_ij = A_ik X_kj (A CSR, X dense), Gustavson order i -> k -> j (the paper's Fig. 7)."""

import numpy as np

from fuseflow.compiler import Program, einsum


def program() -> Program:
    p = Program("spmm")
    A = p.tensor("A", (16, 16), "csr")
    X = p.tensor("X", (16, 8), "dense")
    p.output(p.let("T", einsum("ik,kj->ij", A, X), order="ikj"))
    return p


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    A = rng.integers(-4, 5, (16, 16)) * (rng.random((16, 16)) < 0.2)
    return {"A": A, "X": rng.integers(-4, 5, (16, 8))}
