"""SDDMM Y = S ∘ (C·D): the sparse mask S samples a dense product."""

import numpy as np

from fuseflow.compiler import Program, einsum


def program(rows: int = 16, cols: int = 16, inner: int = 4) -> Program:
    p = Program("sddmm")
    S = p.tensor("S", (rows, cols), "csr")
    C = p.tensor("C", (rows, inner), "dense")
    D = p.tensor("D", (inner, cols), "dense")
    p.output(p.let("Y", S * einsum("ik,kj->ij", C, D)))
    return p


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    S = rng.integers(-3, 4, (16, 16)) * (rng.random((16, 16)) < 0.2)
    return {"S": S, "C": rng.integers(-3, 4, (16, 4)), "D": rng.integers(-3, 4, (4, 16))}
