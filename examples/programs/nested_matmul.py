"""Nested matmul D = A·B·C with all operands CSR."""

import numpy as np

from fuseflow.compiler import Program, einsum


def program() -> Program:
    p = Program("nested_matmul")
    A = p.tensor("A", (16, 12), "csr")
    B = p.tensor("B", (12, 14), "csr")
    C = p.tensor("C", (14, 10), "csr")
    E = p.let("E", einsum("ik,kj->ij", A, B))
    p.output(p.let("D", einsum("ij,jl->il", E, C)))
    return p


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def sparse(shape, density):
        return rng.integers(-3, 4, shape) * (rng.random(shape) < density)

    return {"A": sparse((16, 12), 0.2), "B": sparse((12, 14), 0.2), "C": sparse((14, 10), 0.3)}
