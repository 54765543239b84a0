"""Ctrl-C stops a parallel command promptly: the command exits with 130 and a one-line
message, and none of its worker processes (or what they started) outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GRID = """[[grid]]
kernel = "spmspm_inner"
size = [96, 97, 98, 99, 100, 101, 102, 103]
density = 0.5
"""


def _session_processes(sid: int) -> list[str]:
    return subprocess.run(["pgrep", "-s", str(sid)], capture_output=True, text=True, check=False).stdout.split()


@pytest.mark.skipif(sys.platform != "linux", reason="process sessions and pgrep -s")
def test_ctrl_c_stops_a_process_pool_sweep(tmp_path) -> None:
    (tmp_path / "s.toml").write_text(GRID)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "fuseflow_cli", "sweep", "s.toml", "-o", "out",
                             "--scheduler", "processes", "-j", "2"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(_session_processes(proc.pid)) < 3 and time.monotonic() < deadline:  # the workers are up
        time.sleep(0.2)
    time.sleep(2)  # and busy with a job
    assert proc.poll() is None, proc.communicate()
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    took = time.monotonic() - t0
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    assert took < 10, took
    for _ in range(50):
        if not _session_processes(proc.pid):
            break
        time.sleep(0.1)
    assert _session_processes(proc.pid) == []
