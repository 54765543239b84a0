import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_collection_modifyitems(config, items):
    """Heavy marks run only when asked for: ``slow`` (a whole correlation suite per memory
    preset) with ``-m slow`` or ``FUSEFLOW_SLOW=1``; ``formal`` (every primitive configuration's
    protocol proof at full depth; the suite proves a sample at reduced depth) with ``-m
    formal`` or ``FUSEFLOW_FORMAL=1``."""
    for mark in ("slow", "formal"):
        if os.environ.get(f"FUSEFLOW_{mark.upper()}") == "1" or mark in (config.getoption("-m") or ""):
            continue
        skip = pytest.mark.skip(reason=f"{mark}: run with -m {mark} or FUSEFLOW_{mark.upper()}=1")
        for item in items:
            if mark in item.keywords:
                item.add_marker(skip)
