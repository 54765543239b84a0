"""Where independent jobs run: in this process, in local worker processes, or on Dask.

The correlation suite (one job per graph) and design-space sweeps (one job per configuration)
submit their jobs through one :class:`Executor`; which one is chosen by a *scheduler* string:

``serial``
    one job after another in this process (debugging, profiling, one-core machines);
``processes``
    a pool of local worker processes (``concurrent.futures``), one job per process at a time;
``dask``
    a ``dask.distributed`` cluster of local worker processes started for the run;
``tcp://HOST:PORT`` (or any address ``dask.distributed.Client`` takes)
    an existing Dask scheduler whose ``dask worker`` processes may be on other machines; they
    need fuseflow-hw installed (the same version) and get the job's inputs pickled.

Jobs are module-level functions with picklable arguments.  :meth:`Executor.map_unordered`
yields ``(index, result)`` as jobs finish; an exception raised by a job propagates.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Self

__all__ = ["SCHEDULERS", "Executor", "ExecutorError", "make_executor"]

SCHEDULERS = ("serial", "processes", "dask")


class ExecutorError(RuntimeError):
    """A scheduler that cannot be used (unknown name, unreachable address, Dask missing)."""


class Executor:
    """Runs jobs; use as a context manager (workers are shut down on exit)."""

    name = "serial"

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # leaving on an error or Ctrl-C: stop the workers now instead of letting jobs finish
        self.close(abort=exc_type is not None)

    def close(self, *, abort: bool = False) -> None:
        """Release the workers (nothing to release when serial); ``abort`` stops running jobs."""

    def map_unordered(self, fn: Callable[..., Any], jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """``fn(*jobs[i])`` for every ``i``, yielded as ``(i, result)`` in completion order."""
        for i, job in enumerate(jobs):
            yield i, fn(*job)

    def describe(self) -> str:
        return "serial (this process)"


def _quiet_sigint() -> None:
    """In a worker: Ctrl-C ends the process at once, without a traceback.  (A handler, not
    SIG_IGN: an ignored signal stays ignored in the compilers and simulators a job starts,
    which would then outlive the interrupt.)"""
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))


class ProcessExecutor(Executor):
    name = "processes"

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        # spawn, not fork: a forked child inherits the parent's threads' locks (torch's intra-op
        # pool, a test runner's I/O threads) held by threads that do not exist in the child, and
        # can wait on them forever
        # Ctrl-C reaches the whole process group: the workers end quietly, this process reports
        # the interrupt and stops what is left of the pool on the way out
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_quiet_sigint)

    def close(self, *, abort: bool = False) -> None:
        if abort:
            # concurrent.futures has no way to stop a running job: end the worker processes
            for proc in list((getattr(self._pool, "_processes", None) or {}).values()):
                proc.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def map_unordered(self, fn: Callable[..., Any], jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        pending: dict[Future, int] = {self._pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield pending.pop(fut), fut.result()

    def describe(self) -> str:
        return f"{self.workers} local processes"


class DaskExecutor(Executor):
    """A ``dask.distributed`` client: of a local cluster started here, or of ``address``."""

    name = "dask"

    def __init__(self, workers: int, address: str | None = None) -> None:
        try:
            from dask.distributed import (  # optional at import time: only this scheduler needs it
                Client,
                LocalCluster,
            )
        except ImportError:
            raise ExecutorError("the dask scheduler needs dask.distributed: pip install 'dask[distributed]'") from None
        self._cluster = None
        self._futures: list = []
        self.address = address
        try:
            if address is None:
                # silence_logs: the workers' shutdown warnings are not the user's business
                self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                             dashboard_address=None, silence_logs=logging.ERROR)
                self._client = Client(self._cluster)
            else:
                self._client = Client(address, timeout="5s")
        except (OSError, TimeoutError) as exc:
            raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        n = len(self._client.scheduler_info().get("workers", {}))
        super().__init__(n or workers)

    def close(self, *, abort: bool = False) -> None:
        if abort:
            self._client.cancel(list(self._futures), force=True)
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()

    def map_unordered(self, fn: Callable[..., Any], jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        from dask.distributed import as_completed  # optional: see __init__

        if not jobs:
            return
        # pure=False: every job runs (results are cached by the caller, not by Dask's key)
        futs = [self._client.submit(fn, *job, pure=False) for job in jobs]
        self._futures = futs
        index = {f.key: i for i, f in enumerate(futs)}
        for fut in as_completed(futs):
            yield index[fut.key], fut.result()

    def describe(self) -> str:
        where = f"scheduler {self.address}" if self.address else "a local cluster"
        return f"Dask, {self.workers} workers on {where}"


def make_executor(scheduler: str | None = None, workers: int | None = None) -> Executor:
    """The executor a scheduler string names (module docstring); ``workers`` is the number of
    local workers (default: the machine's cores), ignored for a remote scheduler."""
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise ExecutorError(f"workers = {workers}: need at least 1")
    scheduler = scheduler or "processes"
    if scheduler == "serial" or (scheduler == "processes" and workers == 1):
        return Executor(1)
    if scheduler == "processes":
        return ProcessExecutor(workers)
    if scheduler == "dask":
        return DaskExecutor(workers)
    if "://" in scheduler:
        return DaskExecutor(workers, scheduler)
    raise ExecutorError(f"scheduler {scheduler!r}: expected {', '.join(SCHEDULERS)} or a Dask scheduler address "
                        f"such as tcp://HOST:8786")

