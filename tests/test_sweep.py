"""``fuseflow-hw sweep`` and the executors: expansion, results against sw_sim and numpy run
directly, the resumable cache (also after a kill), Dask (a local cluster and a real scheduler
with two ``dask worker`` processes), output files and errors."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from fuseflow.compiler.passes.par import parallelize
from fuseflow.executor import Executor, ExecutorError, make_executor
from fuseflow.kernels import example
from fuseflow_cli.cli import main
from fuseflow_cli.errors import UserError
from fuseflow_cli.sweep import load_sweep, run_sweep
from sw_sim import run_graph

ROOT = Path(__file__).resolve().parent.parent
KERNELS = """
name = "k"
[defaults]
density = 0.2
[[grid]]
kernel = ["spmv", "spmm_csr"]
size = [8, 16]
par = ["", "i=2"]
"""


def _write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _square(x: int) -> int:
    return x * x


def _direct(kernel: str, size: int, density: float, par: int) -> tuple[int, np.ndarray, np.ndarray]:
    """The kernel run by sw_sim directly (no CLI, no sweep): cycles, result and numpy's."""
    g, data, _, expected = example(kernel, size, 0, density)
    if par > 1:
        parallelize(g, {"i": par})
    res = run_graph(g, data)
    [out] = res.outputs.values()
    return res.cycles, out.to_dense(), expected


def test_expansion_and_duplicates(tmp_path):
    s = load_sweep(_write(tmp_path, KERNELS + '[[grid]]\nkernel = "spmv"\nsize = 8\npar = ["", "i=2"]\n'))
    assert len(s.configs) == 8 and s.duplicates == 2
    assert s.axes == ["density", "kernel", "size", "par"]
    assert ("--par", "i=2") in {tuple(c.argv[i:i + 2]) for c in s.configs for i in range(len(c.argv) - 1)}


@pytest.mark.parametrize("text, words", [
    ('[[grid]]\nkernal = "spmv"\n', ["grid 1", "unknown key 'kernal'"]),
    ('[[grid]]\nkernel = "spmv"\nsize = "big"\n', ["grid 1", "size = 'big'", "integer"]),
    ('[[grid]]\nkernel = "nosuch"\n', ["grid 1", "kernel=nosuch", "invalid choice"]),
    ('[[grid]]\nsize = 8\n', ["needs model, kernel or graph"]),
    ('[[grid]]\nkernel = []\n', ["kernel = [] has no values"]),
    ('[defaults]\nsize = [8, 16]\n[[grid]]\nkernel = "spmv"\n', ["[defaults] holds single values"]),
    ('name = "x"\n', ["no [[grid]]"]),
    ('[[grid]\n', ["not valid TOML"]),
    ('grids = 1\n', ["unknown top-level key"]),
])
def test_bad_sweep_files(tmp_path, text, words):
    with pytest.raises(UserError) as exc:
        load_sweep(_write(tmp_path, text))
    assert all(w in str(exc.value) for w in words), str(exc.value)
    assert "s.toml" in str(exc.value) or "nosuch" in str(exc.value)


def test_missing_sweep_file(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "none.toml"), "-o", str(tmp_path / "o")]) == 2
    assert "none.toml" in capsys.readouterr().err


def test_rows_equal_sw_sim_and_numpy_run_directly(tmp_path):
    s = load_sweep(_write(tmp_path, KERNELS))
    with Executor() as ex:
        res = run_sweep(s, tmp_path / "cache", ex)
    assert res.ran == 8 and res.cached == 0
    for row in res.rows:
        cycles, out, expected = _direct(row["kernel"], row["size"], row["density"], row["lanes"])
        assert row["status"] == "ok" and row["cycles"] == cycles
        assert np.array_equal(out, expected) and row["check"] is True


def test_cache_resume_runs_each_configuration_once(tmp_path):
    s = load_sweep(_write(tmp_path, KERNELS))
    cache = tmp_path / "cache"
    with Executor() as ex:
        first = run_sweep(s, cache, ex)
        again = run_sweep(s, cache, ex)
        assert (again.ran, again.cached) == (0, 8)
        for row in first.rows[:3]:
            (cache / f"{row['key']}.json").unlink()
        third = run_sweep(s, cache, ex)
    assert (third.ran, third.cached) == (3, 5)
    assert [r["cycles"] for r in third.rows] == [r["cycles"] for r in first.rows]
    log = [json.loads(line)["key"] for line in (cache / "runs.log").read_text().splitlines()]
    assert len(log) == 11 and sorted(set(log)) == sorted(r["key"] for r in first.rows)


def test_killed_sweep_resumes_without_rerunning(tmp_path):
    # configurations slow enough to kill the sweep in the middle
    sweep = _write(tmp_path, '[[grid]]\nkernel = "spmm_csr"\ndensity = 0.3\nsize = [48, 56, 64, 72, 80, 88]\n')
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "fuseflow_cli", "sweep", str(sweep), "-o", str(out), "--scheduler", "serial"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "cache" / "runs.log"
    deadline = time.time() + 120
    while time.time() < deadline and not (log.exists() and log.read_text().count("\n") >= 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = log.read_text().count("\n")
    assert 2 <= before < 6, "the sweep was not interrupted in the middle"
    done = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout)
    assert (summary["ran"], summary["cached"]) == (6 - before, before)
    keys = [json.loads(line)["key"] for line in log.read_text().splitlines()]
    assert len(keys) == 6 == len(set(keys))


def test_executors_agree(tmp_path):
    s = load_sweep(_write(tmp_path, KERNELS))
    rows = {}
    for name in ("serial", "processes", "dask"):
        with make_executor(name, 2) as ex:
            rows[name] = run_sweep(s, tmp_path / name, ex).rows
    workers = {r["worker"].split(":")[1] for r in rows["dask"]}
    assert str(os.getpid()) not in workers  # Dask ran them in its worker processes
    for name in ("processes", "dask"):
        assert [r["cycles"] for r in rows[name]] == [r["cycles"] for r in rows["serial"]]


def test_executor_map_and_errors():
    with make_executor("processes", 2) as ex:
        assert sorted(ex.map_unordered(_square, [(i,) for i in range(5)])) == [(i, i * i) for i in range(5)]
    with pytest.raises(ExecutorError, match="scheduler 'cluster'"):
        make_executor("cluster", 2)
    with pytest.raises(ExecutorError, match="at least 1"):
        make_executor("processes", 0)
    with pytest.raises(ExecutorError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        make_executor("tcp://127.0.0.1:1", 1)


def test_real_dask_scheduler_and_two_workers(tmp_path, dask_cluster):
    address, procs = dask_cluster
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    sweep = _write(tmp_path, KERNELS)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "fuseflow_cli", "sweep", str(sweep), "-o", str(out),
                           "--scheduler", address, "--json"], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert "Dask, 2 workers" in summary["executor"] and summary["ran"] == 8
    assert len({r["worker"] for r in summary["rows"]}) >= 1
    assert all(r["worker"].split(":")[1] not in {str(p.pid) for p in procs[:1]} for r in summary["rows"])
    for row in summary["rows"]:
        assert row["cycles"] == _direct(row["kernel"], row["size"], row["density"], row["lanes"])[0]


def test_cli_outputs_and_failed_configurations(tmp_path, capsys):
    # a configuration that fails when it runs (its values are well-formed: the sweep file is
    # checked before any worker starts): 64 lanes of an index with 8 coordinates
    sweep = _write(tmp_path, KERNELS + '[[grid]]\nkernel = "spmv"\nsize = 8\npar = "i=64"\n')
    out = tmp_path / "o"
    assert main(["sweep", str(sweep), "-o", str(out), "--scheduler", "serial", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["configs"] == 9 and summary["failed"] == 1
    [bad] = [r for r in summary["rows"] if r["status"] != "ok"]
    assert "i=64" in bad["message"] and "cycles" not in bad
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert len(rows) == len(table) == 9
    assert [int(r["cycles"]) for r in rows if r["status"] == "ok"] == \
        [r["cycles"] for r in table if r["status"] == "ok"]
    assert (out / "scaling.png").stat().st_size > 0 and (out / "report.md").exists()
    # the failed configuration runs again only when asked
    assert main(["sweep", str(sweep), "-o", str(out), "--scheduler", "serial", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ran"] == 0
    assert main(["sweep", str(sweep), "-o", str(out), "--scheduler", "serial", "--json", "--rerun-errors"]) == 1
    assert json.loads(capsys.readouterr().out)["ran"] == 1


def test_bad_scheduler_is_a_clear_error(tmp_path, capsys):
    sweep = _write(tmp_path, KERNELS)
    assert main(["sweep", str(sweep), "-o", str(tmp_path / "o"), "--scheduler", "nowhere"]) == 2
    assert "--scheduler nowhere" in capsys.readouterr().err


def test_example_sweeps_load():
    for f in sorted((ROOT / "examples" / "sweeps").glob("*.toml")):
        assert load_sweep(f).configs, f


def test_fusion_speedups(tmp_path):
    pytest.importorskip("torch")
    sweep = _write(tmp_path, '[[grid]]\nmodel = "gcn"\ndataset = "karate"\nfusion = ["unfused", "partial", "full"]\n')
    out = tmp_path / "o"
    assert main(["sweep", str(sweep), "-o", str(out), "--scheduler", "processes", "-j", "2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert all(r["check"] for r in rows)  # each model run matched PyTorch
    cycles = {r["fusion"]: r["cycles"] for r in rows}
    assert {s["fusion"]: s["speedup"] for s in summary["speedups"]} == pytest.approx(
        {f: cycles["unfused"] / c for f, c in cycles.items()}, rel=1e-3)
    assert (out / "speedup.png").exists()
