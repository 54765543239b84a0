"""Random sparse test data shared by the suite (a named module: importing ``conftest`` by name
is ambiguous once a sub-directory has its own conftest)."""

import numpy as np


def random_sparse(rng: np.random.Generator, shape, density: float = 0.1, lo: int = -8, hi: int = 8) -> np.ndarray:
    a = rng.integers(lo, hi + 1, size=shape)
    a[rng.random(shape) > density] = 0
    return a
