import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))


def random_sparse(rng: np.random.Generator, shape, density: float = 0.1, lo: int = -8, hi: int = 8) -> np.ndarray:
    a = rng.integers(lo, hi + 1, size=shape)
    a[rng.random(shape) > density] = 0
    return a


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
