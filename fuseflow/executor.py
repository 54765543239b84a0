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

Ctrl-C: a terminal sends SIGINT to the whole foreground process group, the local workers
included.  Only the process that started the jobs acts on it: it gets the
:class:`KeyboardInterrupt`, and leaving the executor's ``with`` block on it ends the local
workers and whatever they started (compilers, simulators) and cancels the jobs on a Dask
scheduler.  The workers' own SIGINT handler does nothing, so a worker cannot die before this
process has seen the interrupt (that race used to surface as ``BrokenProcessPool``), and SIGINT
is held back while a worker starts, before that handler is in place.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
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


def _ignore_sigint(signum: int, frame: object) -> None:
    """A worker's SIGINT handler: nothing (the parent decides, see the module docstring)."""


def _quiet_sigint() -> None:
    """In a worker (as it starts, in its main thread): Ctrl-C no longer raises
    KeyboardInterrupt; the parent ends the worker.  A handler, not SIG_IGN: an ignored signal
    stays ignored in the compilers and simulators a job starts, and they must die with the
    Ctrl-C.  Then SIGINT, held back since the worker was started (:func:`_sigint_held`), is
    let in (one that came meanwhile lands in this handler)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _ignore_sigint)
    _let_sigint_in()


def _let_sigint_in() -> None:
    """Unblock SIGINT in this thread (the processes a thread starts inherit its signal mask)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """SIGINT blocked in this thread while the block starts worker processes and threads: they
    inherit the mask, so a Ctrl-C while a worker imports cannot raise a KeyboardInterrupt (and
    print its traceback) in it, and this process's helper threads leave SIGINT to its main
    thread.  A SIGINT that came meanwhile is delivered (KeyboardInterrupt here) when the block
    ends."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks
        yield
        return
    # multiprocessing starts its resource tracker process with the first queue or lock, and
    # (Python < 3.13) unblocks SIGINT in the starting thread afterwards: start it now
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _sigint_recorded(*, defer: bool = False) -> Iterator[Callable[[], bool]]:
    """While jobs run: yields ``interrupted()``, true once a SIGINT came.  The handler (in
    the main thread, in place of Python's default one) notes the interrupt, so it stays known
    even where the KeyboardInterrupt is lost (raised inside a finalizer, which Python prints
    and drops) or not raised yet (a SIGINT that another thread took is handled only when the
    main thread next runs).  Then it raises KeyboardInterrupt; with ``defer`` only a second
    SIGINT does, and the caller raises it where it checks ``interrupted()`` (Dask: a
    KeyboardInterrupt inside one of its blocking calls makes it log a traceback)."""
    seen: list[bool] = []
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is not signal.default_int_handler:
        yield lambda: bool(seen)  # someone else's handling: left alone
        return

    def handler(signum: int, frame: Any) -> None:
        seen.append(True)
        if not defer or len(seen) > 1:
            signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGINT, previous)


def _descendants(pids: Iterable[int]) -> list[int]:
    """Every process started (directly or not) by one of ``pids``, children first."""
    pids = set(pids)
    children: dict[int, list[int]] = {}
    try:
        import psutil  # comes with dask.distributed; /proc below without it
    except ImportError:
        for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat", "rb") as f:
                        stat = f.read()
                except OSError:  # gone meanwhile
                    continue
                ppid = int(stat[stat.rindex(b")") + 2:].split()[1])  # the name may hold spaces and ')'
                children.setdefault(ppid, []).append(int(d))
    else:
        for proc in psutil.process_iter(["ppid"]):
            children.setdefault(proc.info["ppid"], []).append(proc.pid)
    out: list[int] = []
    todo = list(pids)
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in pids and c not in out:
                out.append(c)
                todo.append(c)
    return out


def _end_process_trees(pids: Iterable[int]) -> None:
    """End the worker processes ``pids`` and everything they started.  (After a Ctrl-C the
    processes a job started got the SIGINT too, but not one a worker started just after it.)
    The trees are stopped first, from the workers down, so that nothing starts anything more;
    then what the workers started gets SIGTERM (compilers remove their half-written files) and
    the workers SIGKILL."""
    workers = [p for p in dict.fromkeys(pids) if p and p != os.getpid()]
    if not hasattr(signal, "SIGSTOP"):  # Windows: no process trees to walk; end the workers
        for pid in workers:
            with contextlib.suppress(OSError):  # already gone
                os.kill(pid, signal.SIGTERM)
        return
    stopped: list[int] = []
    new = workers
    while new:
        for pid in new:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
        stopped += new
        new = [c for c in _descendants(stopped) if c not in stopped]
    started = stopped[len(workers):]
    for pid in started:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)  # acted on when continued
    for pid in workers:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in started:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)


def _interrupted_exit(exitcode: int | None) -> bool:
    """The exit status of a process that a SIGINT ended (killed by it, or the 130 of a
    handler or a shell)."""
    return exitcode in (-signal.SIGINT, 130)


class ProcessExecutor(Executor):
    name = "processes"

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        # spawn, not fork: a forked child inherits the parent's threads' locks (torch's intra-op
        # pool, a test runner's I/O threads) held by threads that do not exist in the child, and
        # can wait on them forever
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_quiet_sigint)
        self._procs: dict[int, multiprocessing.process.BaseProcess] = {}

    def _workers(self) -> dict[int, multiprocessing.process.BaseProcess]:
        """The pool's worker processes, including those it has let go of after one died."""
        self._procs.update(getattr(self._pool, "_processes", None) or {})
        return self._procs

    def close(self, *, abort: bool = False) -> None:
        if abort:
            # concurrent.futures has no way to stop a running job: end the worker processes (and
            # what their jobs started); a second Ctrl-C does not cut this short
            with _sigint_held():
                # only the living: the pid of one that ended may belong to another process by now
                _end_process_trees(pid for pid, proc in self._workers().items() if proc.is_alive())
        self._pool.shutdown(wait=True, cancel_futures=True)

    def map_unordered(self, fn: Callable[..., Any], jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        # finished futures arrive on a queue (not concurrent.futures.wait, which holds every
        # future's lock for a moment: a KeyboardInterrupt then could leave one held, and the
        # pool's thread would wait for it forever)
        finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
        pending: dict[Future, int] = {}
        with _sigint_held():  # the first submit starts the workers and the pool's threads
            for i, job in enumerate(jobs):
                fut = self._pool.submit(fn, *job)
                pending[fut] = i
                fut.add_done_callback(finished.put)
            self._workers()
        with _sigint_recorded() as interrupted:
            while pending:
                if interrupted():
                    raise KeyboardInterrupt
                try:
                    # the timeout only lets this thread run a SIGINT handler now and then,
                    # should the signal have landed in another thread
                    fut = finished.get(timeout=1.0)
                except queue.Empty:
                    continue
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    # a worker died: after a Ctrl-C, or of a SIGINT itself (a job that put back the
                    # default handler, a kill -INT of the worker), that is the interrupt, not an error
                    if interrupted() or self._ended_by_sigint():
                        raise KeyboardInterrupt from None
                    raise
                yield pending.pop(fut), result
            if interrupted():  # a KeyboardInterrupt lost while the caller took the last result
                raise KeyboardInterrupt

    def _ended_by_sigint(self) -> bool:
        """Whether a worker process was ended by a SIGINT."""
        procs = list(self._workers().values())
        ended = set(multiprocessing.connection.wait([p.sentinel for p in procs], timeout=0))
        for p in procs:
            if p.sentinel in ended:
                p.join()  # it is gone; its exit status is there in a moment
        return any(_interrupted_exit(p.exitcode) for p in procs)

    def describe(self) -> str:
        return f"{self.workers} local processes"


def _quiet_sigint_plugin() -> Any:
    """A Dask worker plugin: :func:`_quiet_sigint` in each worker process of a local cluster as
    it joins (``setup`` runs in the worker's main thread).  Defined here, not at module level,
    so that importing this module does not import Dask (Dask pickles the class by value)."""
    from distributed.diagnostics.plugin import WorkerPlugin  # optional: see DaskExecutor

    class QuietSigint(WorkerPlugin):
        name = "fuseflow-quiet-sigint"
        idempotent = True

        def setup(self, worker: object) -> None:
            _quiet_sigint()

    return QuietSigint()


def _dask_job(fn: Callable[..., Any], *args: Any) -> Any:
    """A job on a Dask worker thread: the processes it starts get a terminal's Ctrl-C (the
    thread may have been started while the worker held SIGINT back)."""
    _let_sigint_in()
    return fn(*args)


class DaskExecutor(Executor):
    """A ``dask.distributed`` client: of a local cluster started here, or of ``address``."""

    name = "dask"

    def __init__(self, workers: int, address: str | None = None) -> None:
        self._cluster = None
        self._client = None
        self._futures: list = []
        self.address = address
        # Dask's threads (the first of them started by the import) and the workers start with
        # SIGINT held back; a Ctrl-C meanwhile takes effect once they are up (the ``with`` block
        # is not entered yet then: this closes what it started), a second one at once
        try:
            with _sigint_recorded(defer=True) as interrupted:
                with _sigint_held():
                    try:
                        from dask.distributed import (  # optional at import time: only this scheduler needs it
                            Client,
                            LocalCluster,
                        )
                    except ImportError:
                        raise ExecutorError("the dask scheduler needs dask.distributed: "
                                            "pip install 'dask[distributed]'") from None
                    if address is None:
                        # silence_logs: the workers' shutdown warnings are not the user's business
                        self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                     dashboard_address=None, silence_logs=logging.ERROR)
                        self._client = Client(self._cluster)
                        # each worker process: Ctrl-C is this process's business, see _quiet_sigint
                        self._client.register_plugin(_quiet_sigint_plugin())
                    else:
                        self._client = Client(address, timeout="5s")
                    n = len(self._client.scheduler_info().get("workers", {}))
                if interrupted():  # (one held back by _sigint_held arrives as it ends)
                    raise KeyboardInterrupt
        except (OSError, TimeoutError) as exc:
            self.close(abort=True)
            raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        except BaseException:
            self.close(abort=True)
            raise
        super().__init__(n or workers)

    def _local_workers(self) -> list[int]:
        """The process ids of the local cluster's living workers (none for a remote scheduler)."""
        nannies = getattr(self._cluster, "workers", None) or {}
        return [pid for n in list(nannies.values()) if (pid := getattr(n, "pid", None))]

    def close(self, *, abort: bool = False) -> None:
        with _dask_quiet() if abort else contextlib.nullcontext():
            if abort and self._client is not None and self._futures:
                # the scheduler forgets them: a remote cluster's workers drop the queued jobs
                # (Dask cannot stop a running one: its result is thrown away)
                with contextlib.suppress(Exception):
                    self._client.cancel(list(self._futures), force=True)
            if abort and self._cluster is not None:
                # the local workers are ours: end them now (a running job cannot be cancelled)
                # rather than wait for the jobs; their nannies must not start new ones
                with _sigint_held():
                    for nanny in list(self._cluster.workers.values()):
                        nanny.auto_restart = False
                    _end_process_trees(self._local_workers())
            self._futures = []
            if self._client is not None:
                self._client.close()
            if self._cluster is not None:
                self._cluster.close()

    def map_unordered(self, fn: Callable[..., Any], jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        from dask.distributed import wait  # optional: see __init__

        if not jobs:
            return
        # a key of its own for every job (results are cached by the caller, not by Dask's key),
        # named after the job's function as Dask would name it
        name = getattr(fn, "__name__", "job")
        futs = [self._client.submit(_dask_job, fn, *job, key=f"{name}-{uuid.uuid4().hex}") for job in jobs]
        self._futures = futs
        index = {f.key: i for i, f in enumerate(futs)}
        pending = set(futs)
        # Ctrl-C takes effect here, between Dask's calls (within a second), not inside them
        with _sigint_recorded(defer=True) as interrupted:
            while pending:
                if interrupted():
                    raise KeyboardInterrupt
                try:
                    done, pending = wait(pending, timeout=1.0, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    continue
                for fut in done:
                    result = fut.result()
                    if interrupted():
                        raise KeyboardInterrupt
                    yield index[fut.key], result
            if interrupted():  # while the caller took the last result
                raise KeyboardInterrupt

    def describe(self) -> str:
        where = f"scheduler {self.address}" if self.address else "a local cluster"
        return f"Dask, {self.workers} workers on {where}"


@contextlib.contextmanager
def _dask_quiet() -> Iterator[None]:
    """Closing a client and cluster on an interrupt, Dask logs what it finds (workers gone,
    jobs cancelled, connections closed): not the user's business; only critical messages are
    shown meanwhile."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


# the address schemes of Dask's communication layer (distributed.comm)
DASK_SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")
WORKERS_PER_CORE = 4
WORKER_MEMORY = 256 << 20  # bytes a local worker process takes at least (Python, numpy, the simulator)


def max_workers() -> int:
    """The most local workers this machine is given: four per core, and no more than its memory
    holds at :data:`WORKER_MEMORY` each."""
    cores = os.cpu_count() or 1
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = None
    by_memory = max(1, mem // WORKER_MEMORY) if mem else WORKERS_PER_CORE * cores
    return max(1, min(WORKERS_PER_CORE * cores, by_memory))


def make_executor(scheduler: str | None = None, workers: int | None = None) -> Executor:
    """The executor a scheduler string names (module docstring); ``workers`` is the number of
    local workers (default: the machine's cores; at most :func:`max_workers`), ignored for a
    remote scheduler."""
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise ExecutorError(f"workers = {workers}: need at least 1")
    if workers > max_workers():
        raise ExecutorError(f"{workers} workers: at most {max_workers()} on this machine ({os.cpu_count() or 1} "
                            f"cores, {WORKERS_PER_CORE} workers per core and {WORKER_MEMORY >> 20} MiB each)")
    scheduler = scheduler or "processes"
    if scheduler == "serial" or (scheduler == "processes" and workers == 1):
        return Executor(1)
    if scheduler == "processes":
        return ProcessExecutor(workers)
    if scheduler == "dask":
        return DaskExecutor(workers)
    if "://" in scheduler:
        scheme = scheduler.split("://", 1)[0]
        if scheme not in DASK_SCHEMES:
            raise ExecutorError(f"scheduler {scheduler!r}: unknown address scheme {scheme!r}; a Dask scheduler "
                                f"address starts with {', '.join(s + '://' for s in DASK_SCHEMES)}")
        return DaskExecutor(workers, scheduler)
    limit = max_workers()
    raise ExecutorError(f"scheduler {scheduler!r} (up to {limit} local workers): expected {', '.join(SCHEDULERS)} or a Dask scheduler address "
                        f"such as tcp://HOST:8786")

