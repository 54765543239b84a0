"""GCN layer with activation Y = relu(A·X·W + b): one graph with factored iteration (relu is
applied to the reducer's output, after the union with the bias)."""

import numpy as np

from fuseflow.compiler import Program, einsum, relu


def program() -> Program:
    p = Program("gcn_relu")
    A = p.tensor("A", (16, 16), "csr")
    X = p.tensor("X", (16, 8), "dense")
    W = p.tensor("W", (8, 4), "dense")
    b = p.tensor("b", (4,), "dense")
    T = p.let("T", einsum("ik,kj->ij", A, X))
    p.output(p.let("Y", relu(einsum("ij,jl->il", T, W) + b)))
    return p


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (16, 16)) * (rng.random((16, 16)) < 0.2)
    return {"A": A, "X": rng.integers(-3, 4, (16, 8)), "W": rng.integers(-3, 4, (8, 4)),
            "b": rng.integers(-3, 4, 4)}
