"""Ctrl-C (SIGINT to the command's process group, what a terminal sends) on ``sweep`` under every
scheduler (serial, local processes, a local Dask cluster, a Dask scheduler with its own
workers) and on ``correlate -j N``: exit status 130, the one line ``fuseflow-hw CMD: interrupted``
(for a sweep with what its cache holds) on stderr and nothing else after the interrupt (no
traceback, no Dask log), no process of the command's session left, and no finished sweep
configuration lost from the cache (a re-run computes only the others).

The interrupt comes at a known point, never after a guessed delay:

* a sweep's grid has a configuration whose graph file is a named pipe (FIFO) that nothing writes
  until after the interrupt: reading it blocks, so that configuration is always still running
  when the SIGINT arrives; the test sends the SIGINT once the quick configurations' results
  are in the cache (two heavier ones are then running or waiting, or done: the checks take the
  cache as they find it);
* ``correlate`` builds its Verilator models in an empty build cache, and the SIGINT goes once a
  worker has started a tool (verilator, make, a compiler) for a job.

With a Dask scheduler of its own (``dask scheduler`` + two ``dask worker`` processes), the
default run checks the interrupt and that the cluster lives on without the sweep's jobs; ``-m
slow`` also runs the sweep again on it.

``FAILSAFE`` only stops a test that would otherwise hang (its expiry fails the test with a
message); no verdict depends on how long anything took.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fuseflow.executor import ProcessExecutor, _ignore_sigint, make_executor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process sessions, /proc and FIFOs")

ROOT = Path(__file__).resolve().parent.parent
FAILSAFE = 300.0  # seconds; see the module docstring
QUICK = 3  # the grid's first configurations, each a fraction of a second
SWEEP = """name = "interrupt"
[[grid]]
kernel = "spmv"
size = [8, 12, 16]
[[grid]]
graph = "gate.json"
[[grid]]
kernel = "spmspm_inner"
density = 0.5
size = [40, 48]
"""
CONFIGS = QUICK + 1 + 2


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """``fuseflow-hw ARGS`` in a session of its own (its process group is the one a terminal
    would signal); output to files (a pipe nobody reads could fill and stall it)."""
    with open(cwd / "stdout.txt", "w") as out, open(cwd / "stderr.txt", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "fuseflow_cli", *args], cwd=cwd, env=env, stdout=out,
                                stderr=err, start_new_session=True, preexec_fn=_sigint_as_in_a_terminal)


def _sigint_as_in_a_terminal() -> None:
    """SIGINT's default action in the command, as in a terminal's foreground job.  An ignored
    signal stays ignored across exec: a suite started in the background (``pytest &``, ``nohup``,
    some CI shells) would hand the command an ignored SIGINT, which it then rightly ignores."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _output(cwd: Path | None) -> str:
    if cwd is None:
        return ""
    return f"stdout:\n{(cwd / 'stdout.txt').read_text()}\nstderr:\n{(cwd / 'stderr.txt').read_text()}"


def _wait_for(what: str, cond: Callable[[], bool], proc: subprocess.Popen | None = None,
              cwd: Path | None = None) -> None:
    """Poll ``cond`` until it holds; the command ending first or the failsafe fail the test."""
    deadline = time.monotonic() + FAILSAFE
    while not cond():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the command ended (status {proc.returncode}) before {what}\n{_output(cwd)}")
        if time.monotonic() > deadline:
            if proc is not None:
                os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"failsafe: still no {what} after {FAILSAFE:.0f} s")
        time.sleep(0.1)


def _session(sid: int) -> list[str]:
    """``pid command`` of every process of session ``sid`` (zombies too, until reaped)."""
    ps = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-s", str(sid)], capture_output=True, text=True,
                        check=False)
    return ps.stdout.splitlines()


def _processes() -> dict[int, int]:
    """pid -> parent pid of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_bytes()
            except OSError:  # gone meanwhile
                continue
            out[int(d)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    return out


def _interrupt(proc: subprocess.Popen, cwd: Path) -> str:
    """Ctrl-C: the command ends with 130, without a traceback, and nothing of its session is
    left.  Returns what it wrote on stderr after the signal (the caller checks it is one line)."""
    err_file = cwd / "stderr.txt"
    before = err_file.stat().st_size  # what it wrote before the interrupt is not the interrupt's
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=FAILSAFE)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"failsafe: the command did not end within {FAILSAFE:.0f} s of the SIGINT\n{_output(cwd)}")
    assert proc.returncode == 130, _output(cwd)
    assert "Traceback" not in _output(cwd)
    # the workers and whatever they started end (zombies are reaped by init soon after)
    _wait_for("end of every process of the command's session", lambda: not _session(proc.pid))
    return err_file.read_bytes()[before:].decode()


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    """``s.toml``, :data:`SWEEP`, and its ``gate.json``, a FIFO."""
    (tmp_path / "s.toml").write_text(SWEEP)
    os.mkfifo(tmp_path / "gate.json")
    return tmp_path


def _open_gate(gate: Path) -> None:
    """Let a job blocked opening the FIFO ``gate`` go on (it reads an empty file: an error row
    that nobody collects) and put a real graph file in its place."""
    from fuseflow.kernels import example

    if gate.is_fifo():
        os.close(os.open(gate, os.O_RDWR | os.O_NONBLOCK))  # a reader and a writer at once: never blocks
        gate.unlink()
        example("spmv", 8, 0, 0.2)[0].save(gate)


def _cache(out: Path) -> dict[str, dict]:
    """The sweep cache's entries; each must be whole (JSON, the key it is filed under)."""
    cache = out / "cache"
    assert not list(cache.glob(".*.tmp")), "a temporary file of an unfinished write was left"
    entries = {}
    for f in cache.glob("*.json"):
        row = json.loads(f.read_text())  # a cut-short entry fails here
        assert row["key"] == f.stem and row["status"] == "ok", row
        entries[f.stem] = row
    logged = {json.loads(line)["key"] for line in (cache / "runs.log").read_text().splitlines()}
    assert logged <= set(entries), "a configuration logged as run has no cache entry"
    return entries


def _interrupted_sweep(sweep_dir: Path, scheduler: str) -> dict[str, dict]:
    """Run the sweep, Ctrl-C it once the quick configurations are cached; the cache then."""
    # absolute paths: a remote worker does not share the command's working directory
    proc = _start(["sweep", str(sweep_dir / "s.toml"), "-o", str(sweep_dir / "out"), "--scheduler", scheduler,
                   "-j", "2"], sweep_dir, _env())
    cache = sweep_dir / "out" / "cache"
    _wait_for(f"{QUICK} results in the sweep cache", lambda: len(list(cache.glob("*.json"))) >= QUICK,
              proc, sweep_dir)
    said = _interrupt(proc, sweep_dir)
    entries = _cache(sweep_dir / "out")
    assert QUICK <= len(entries) < CONFIGS  # the gated configuration cannot have finished
    assert said == (f"fuseflow-hw sweep: interrupted ({len(entries)} of {CONFIGS} configurations are in the "
                    f"cache {cache}; the same command runs the rest)\n"), _output(sweep_dir)
    return entries


def _rerun(sweep_dir: Path, scheduler: str, entries: dict[str, dict], capsys, monkeypatch) -> None:
    """The same sweep again runs only what the interrupted one did not finish, and leaves its
    finished entries as they were."""
    # here: the executor tests' workers import this module
    from fuseflow_cli import sweep
    from fuseflow_cli.cli import main

    _open_gate(sweep_dir / "gate.json")
    # a cache key holds the digest of the sources, which this process took once, maybe before
    # an edit of the working tree: take it again, and compare it with the interrupted run's
    monkeypatch.setattr(sweep, "_CODE_DIGEST", None)
    if not set(entries) <= {sweep.config_key(c) for c in sweep.load_sweep(sweep_dir / "s.toml").configs}:
        pytest.skip("the sources changed between the interrupted sweep and the re-run: the cache keys moved on")
    capsys.readouterr()
    assert main(["sweep", str(sweep_dir / "s.toml"), "-o", str(sweep_dir / "out"), "--scheduler", scheduler,
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["cached"], summary["ran"], summary["failed"]) == (len(entries), CONFIGS - len(entries), 0)
    cached = {r["key"]: r for r in summary["rows"] if r["cached"]}
    assert set(cached) == set(entries)
    assert all(cached[k]["finished"] == entries[k]["finished"] for k in entries)
    assert len(_cache(sweep_dir / "out")) == CONFIGS


@pytest.mark.parametrize("scheduler", ["serial", "processes", "dask"])
def test_ctrl_c_on_a_sweep(sweep_dir, scheduler, capsys, monkeypatch) -> None:
    entries = _interrupted_sweep(sweep_dir, scheduler)
    _rerun(sweep_dir, "serial", entries, capsys, monkeypatch)


@pytest.mark.parametrize("rerun_there", [pytest.param(False, id="interrupt"),
                                         pytest.param(True, id="then-rerun-there", marks=pytest.mark.slow)])
def test_ctrl_c_on_a_sweep_on_a_dask_scheduler(sweep_dir, dask_cluster, capsys, monkeypatch, rerun_there) -> None:
    # (the re-run on the same cluster, under -m slow, shows it still takes jobs; the default run
    # stops after the interrupt's checks)
    from dask.distributed import Client

    address, procs = dask_cluster
    try:
        entries = _interrupted_sweep(sweep_dir, address)
        # the scheduler and its workers live on; the interrupted sweep's jobs are gone from it
        assert all(p.poll() is None for p in procs)
        with Client(address, timeout=FAILSAFE) as client:
            assert len(client.scheduler_info()["workers"]) == 2
            _wait_for("the interrupted sweep's jobs gone from the scheduler",
                      lambda: client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0)
    finally:
        _open_gate(sweep_dir / "gate.json")  # the remote worker reading it is free again
    if rerun_there:
        _rerun(sweep_dir, address, entries, capsys, monkeypatch)


def test_ctrl_c_on_correlate(tmp_path) -> None:
    # an empty build cache: every job builds a Verilator model (FUSEFLOW_SW_SIM=python: no
    # compiled cycle model to build first)
    env = _env(FUSEFLOW_CACHE=str(tmp_path / "cache"), FUSEFLOW_SW_SIM="python")
    proc = _start(["correlate", "--suite", "parallel", "-o", "report", "-j", "2"], tmp_path, env)

    def a_job_runs_a_tool() -> bool:
        parents = _processes()
        children = {p for p, pp in parents.items() if pp == proc.pid}  # the workers (and resource tracker)
        return any(pp in children for pp in parents.values())

    _wait_for("job running a tool (a grandchild of the command)", a_job_runs_a_tool, proc, tmp_path)
    assert _interrupt(proc, tmp_path) == "fuseflow-hw correlate: interrupted\n", _output(tmp_path)


# the executor itself


def _signal_state() -> tuple[bool, str]:
    """In a worker: whether SIGINT has the workers' do-nothing handler, and the SIGINT
    disposition a process the job starts gets (``SigBlk``/``SigIgn`` bits from /proc)."""
    child = subprocess.run(["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"], capture_output=True, text=True,
                           check=True).stdout
    masks = {line.split(":")[0]: int(line.split()[1], 16) for line in child.splitlines()}
    bit = 1 << (signal.SIGINT - 1)
    state = ",".join(k for k in ("SigBlk", "SigIgn") if masks[k] & bit) or "default"
    return signal.getsignal(signal.SIGINT) is _ignore_sigint, state


def _die_of_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(FAILSAFE)  # not reached: the signal ends the process


def _start_sleeper(pidfile: str) -> int:
    """A job that leaves a process running (in a session of its own: no Ctrl-C reaches it)."""
    p = subprocess.Popen(["sleep", str(int(3 * FAILSAFE))], start_new_session=True)  # outlasts the failsafe
    Path(pidfile).write_text(str(p.pid))
    return p.pid


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"  # a zombie: ended
    except OSError:
        return True


def test_process_pool_workers_leave_ctrl_c_to_the_parent(tmp_path) -> None:
    with pytest.raises(KeyboardInterrupt), ProcessExecutor(2) as ex:
        # a worker survives SIGINT; what a job starts gets the default disposition (neither
        # ignored nor blocked), so a terminal's Ctrl-C ends it
        assert [r for _, r in ex.map_unordered(_signal_state, [(), ()])] == [(True, "default")] * 2
        # a job leaves a process running that no Ctrl-C reaches: leaving on an interrupt ends it
        [(_, pid)] = list(ex.map_unordered(_start_sleeper, [(str(tmp_path / "sleeper.pid"),)]))
        raise KeyboardInterrupt
    _wait_for(f"end of the process {pid} a job started", lambda: _gone(pid))
    # a worker that a SIGINT ends is reported as the interrupt, not as a broken pool
    with pytest.raises(KeyboardInterrupt), ProcessExecutor(1) as ex:
        list(ex.map_unordered(_die_of_sigint, [()]))


def test_dask_workers_leave_ctrl_c_to_the_parent() -> None:
    with make_executor("dask", 2) as ex:
        assert [r for _, r in ex.map_unordered(_signal_state, [(), ()])] == [(True, "default")] * 2
