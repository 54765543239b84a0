"""The ``slow`` mark: long RTL runs (a whole correlation suite per memory preset), skipped unless
selected with ``-m slow`` or ``FUSEFLOW_SLOW=1``."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("FUSEFLOW_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or FUSEFLOW_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
