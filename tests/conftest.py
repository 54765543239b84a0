import os
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


def pytest_collection_modifyitems(config, items):
    """The ``slow`` mark (long runs: a whole correlation suite per memory preset) is skipped
    unless selected with ``-m slow`` or ``FUSEFLOW_SLOW=1``."""
    if os.environ.get("FUSEFLOW_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or FUSEFLOW_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
