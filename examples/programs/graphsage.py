"""GraphSAGE neighbour term T_ij = A_il X_lm Omega_mj, order i -> l -> m -> j (paper appendix)."""

import numpy as np

from fuseflow.compiler import Program, catalog


def program(nodes: int = 16, features: int = 8, hidden: int = 4, ordered: bool = True) -> Program:
    """``ordered=False`` leaves the order i -> l -> m -> j to the compiler (the compiler's
    catalog program ``fuseflow.compiler.catalog.graphsage``)."""
    return catalog.graphsage(nodes, features, hidden, ordered)


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (16, 16)) * (rng.random((16, 16)) < 0.2)
    X = rng.integers(-3, 4, (16, 8)) * (rng.random((16, 8)) < 0.5)
    return {"A": A, "X": X, "Omega": rng.integers(-3, 4, (8, 4))}
