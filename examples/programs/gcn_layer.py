"""GCN-style layer Y = A·X·W + b; regions {A·X, ·W} and {+ b} for --fusion partial."""

import numpy as np

from fuseflow.compiler import Program, einsum


def program() -> Program:
    p = Program("gcn_layer")
    A = p.tensor("A", (16, 16), "csr")
    X = p.tensor("X", (16, 8), "dense")
    W = p.tensor("W", (8, 4), "dense")
    b = p.tensor("b", (4,), "dense")
    T1 = p.let("T1", einsum("ik,kj->ij", A, X))
    T2 = p.let("T2", einsum("ij,jl->il", T1, W))
    Y = p.let("Y", T2 + b)
    p.region(T1, T2)
    p.region(Y)
    p.output(Y)
    return p


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (16, 16)) * (rng.random((16, 16)) < 0.2)
    return {"A": A, "X": rng.integers(-3, 4, (16, 8)), "W": rng.integers(-3, 4, (8, 4)),
            "b": rng.integers(-3, 4, 4)}
