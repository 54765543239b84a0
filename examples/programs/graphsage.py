"""GraphSAGE neighbour term T_ij = A_il X_lm Omega_mj, order i -> l -> m -> j (paper appendix)."""

import numpy as np

from fuseflow.compiler import Program, einsum


def program() -> Program:
    p = Program("graphsage")
    A = p.tensor("A", (16, 16), "csr")
    X = p.tensor("X", (16, 8), "csr")
    W = p.tensor("Omega", (8, 4), "dense")
    T0 = p.let("T0", einsum("il,lm->im", A, X), order="ilm")
    p.output(p.let("Tnbor", einsum("im,mj->ij", T0, W), order="imj"))
    return p


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (16, 16)) * (rng.random((16, 16)) < 0.2)
    X = rng.integers(-3, 4, (16, 8)) * (rng.random((16, 8)) < 0.5)
    return {"A": A, "X": X, "Omega": rng.integers(-3, 4, (8, 4))}
