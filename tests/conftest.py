import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
ROOT = Path(__file__).resolve().parent.parent
CLUSTER_FAILSAFE = 300.0  # seconds a local Dask cluster may take to come up (a loaded machine)


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


def _scheduler_address(sfile: Path) -> str | None:
    """The address in a scheduler file, once it is written whole (``dask scheduler`` creates
    the file before it writes it)."""
    try:
        return json.loads(sfile.read_text())["address"]
    except (FileNotFoundError, ValueError, KeyError):
        return None


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """A ``dask scheduler`` and two ``dask worker`` processes (one thread each, in sessions of
    their own), both registered before the test starts: ``(address, processes)``."""
    from dask.distributed import Client

    dask = shutil.which("dask", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    assert dask, "the dask command ships with dask[distributed], a dependency"
    sfile = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs: list[subprocess.Popen] = []
    with open(tmp_path / "dask.log", "w") as log:
        try:
            procs.append(subprocess.Popen([dask, "scheduler", "--scheduler-file", str(sfile), "--port", "0",
                                           "--no-dashboard"], env=env, stdout=log, stderr=log))
            deadline = time.monotonic() + CLUSTER_FAILSAFE
            while (address := _scheduler_address(sfile)) is None:
                if procs[0].poll() is not None:
                    pytest.fail(f"dask scheduler ended (status {procs[0].returncode}):\n"
                                f"{(tmp_path / 'dask.log').read_text()}")
                if time.monotonic() > deadline:
                    pytest.fail(f"failsafe: no Dask scheduler file after {CLUSTER_FAILSAFE:.0f} s")
                time.sleep(0.1)
            for _ in range(2):
                procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", str(sfile), "--nthreads", "1",
                                               "--no-dashboard"], env=env, stdout=log, stderr=log))
            with Client(address, timeout=CLUSTER_FAILSAFE) as client:
                client.wait_for_workers(2, timeout=CLUSTER_FAILSAFE)
            yield address, procs
        finally:
            for p in reversed(procs):
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=CLUSTER_FAILSAFE)
                except subprocess.TimeoutExpired:
                    p.kill()
