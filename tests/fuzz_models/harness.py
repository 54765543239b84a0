"""Run a generated module (:mod:`model_gen`) through ``trace`` / ``compile_model`` / ``run_model``
under a sample of schedules and compare with PyTorch on the dense float64 tensors.

Verdicts per schedule: ``ok``, ``mismatch`` (``check`` failed: max error), ``refused`` (a clear
error of the toolkit: FrontendError / LoweringError / FusionError / ProgramError, or a
ValueError raised by the toolkit's own code, with its normalised reason), ``crash`` (any other
exception: a bug), and per case ``invalid`` when PyTorch itself cannot evaluate the module on
the dense tensors or an intermediate is non-finite or above ``LIMIT`` (the case says nothing
about the compiler then).
"""

from __future__ import annotations

import contextlib
import pickle
import random
import re
import sys
import traceback
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from model_gen import Case, dense_of

from fuseflow.compiler import FusionError, LoweringError, ProgramError
from fuseflow.models import trace
from fuseflow.models.ir import FrontendError
from fuseflow.models.plan import FUSIONS, CompilerStep, compile_model, run_model
from fuseflow.compiler.passes.par import _index_dim
from sw_sim import run_graph

__all__ = ["LIMIT", "TOL", "Record", "check", "classify", "run_case"]

TOL = 1e-9  # |got - want| <= TOL * max(1, max |want|)   (the lead replaces this with derived bounds)
LIMIT = 1e4  # intermediates above this (or non-finite) make a case invalid: float64 rounding would dominate
CLEAR = (FrontendError, LoweringError, FusionError, ProgramError)
MAX_CYCLES = 2_000_000


def check(name: str, got, want) -> str | None:
    """None if ``got`` matches ``want`` (same shape, ``|got - want| <= TOL * max(1, max|want|)``
    element for element); otherwise why not, naming ``name``, the worst element and the bound."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != PyTorch's {want.shape}"
    if want.size == 0:
        return None
    bound = TOL * max(1.0, float(np.max(np.abs(want))))
    err = np.nan_to_num(np.abs(got - want), nan=np.inf)
    if np.all(err <= bound):
        return None
    at = np.unravel_index(int(np.argmax(err)), err.shape)
    return (f"{name}: max |got - want| = {float(err[at]):.3g} > bound {bound:.3g} at {tuple(map(int, at))}: "
            f"got {float(got[at])!r}, want {float(want[at])!r}")


def max_err(got, want) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or want.size == 0:
        return float("nan") if got.shape != want.shape else 0.0
    return float(np.max(np.nan_to_num(np.abs(got - want), nan=np.inf)))


# ----------------------------------------------------------------------------- exceptions
def _normalise(msg: str) -> str:
    line = msg.strip().split("\n")[0]
    line = re.sub(r"^model [\w.]+: ", "", line)
    line = re.sub(r"<fuzz \w+>:\d+: ?", "", line)
    line = re.sub(r"\bt\d+_", "t_", line)
    line = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", line)
    return line[:60]


def _raised_by_toolkit(exc: BaseException) -> bool:
    tb = traceback.extract_tb(exc.__traceback__)
    if not tb:
        return False
    f, line = tb[-1].filename, (tb[-1].line or "").strip()
    ours = any(p in f for p in ("/fuseflow/", "/sw_sim/", "/fuseflow_cli/")) and "site-packages" not in f
    return ours and line.startswith("raise")


def classify(exc: BaseException) -> tuple[str, str]:
    """("refused", normalised reason) for a clear error, else ("crash", type and message)."""
    msg = str(exc).strip()
    if type(exc).__name__ == "RegionOrderError":  # plan.py: "a frontend bug, never a graph break"
        return "crash", f"RegionOrderError (a frontend bug): {_normalise(msg)}"
    if msg and (isinstance(exc, CLEAR) or (type(exc) is ValueError and _raised_by_toolkit(exc))):
        return "refused", _normalise(msg)
    where = traceback.extract_tb(exc.__traceback__)
    loc = f" at {where[-1].filename.split('/')[-1]}:{where[-1].lineno}" if where else ""
    return "crash", f"{type(exc).__name__}{loc}: {_normalise(msg)}"


# ----------------------------------------------------------------------------- schedules
@dataclass
class Schedule:
    fusion: str
    par: dict[str, int] | None = None
    skip: bool = False

    def describe(self) -> str:
        extra = (f" par={self.par}" if self.par else "") + (" skip" if self.skip else "")
        return self.fusion + extra


@dataclass
class Record:
    schedule: str
    verdict: str  # ok | mismatch | refused | crash | invalid
    detail: str = ""
    err: float = 0.0
    stage: str = ""  # reference | trace | compile | run | check
    breaks: int = 0  # graph breaks (host op steps)


@dataclass
class CaseResult:
    case: Case
    records: list[Record] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"case": self.case.to_json(), "records": [asdict(r) for r in self.records]}


def _par_choices(cm) -> dict[str, int]:
    """Index -> the smallest number of coordinates it has in the graphs that iterate it (a
    ``par`` factor above it is refused by the par pass, rightly)."""
    dims: dict[str, int] = {}
    for s in cm.steps:
        if not isinstance(s, CompilerStep):
            continue
        for g in s.compiled.groups:
            for i, ports in g.graph.indices.items():
                d = _index_dim(g.graph, ports[0])
                dims[i] = min(dims.get(i, 1 << 30), d if d is not None else 1 << 30)
    return {i: d for i, d in dims.items() if d >= 2}


def _reference(case: Case):
    """(module, inputs, formats, want) or an ``invalid`` reason."""
    m, inputs, formats = case.build()
    dense = {k: dense_of(v) for k, v in inputs.items()}
    try:
        env = case.probe(m, dense)
        with torch.no_grad():
            want = m(**dense)
    except Exception as exc:  # noqa: BLE001 - PyTorch refuses the dense module: no verdict
        return f"pytorch on dense: {type(exc).__name__}: {_normalise(str(exc))}"
    for k, t in env.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() and \
                (not bool(torch.isfinite(t).all()) or float(t.abs().max()) > LIMIT):
            return f"intermediate {k} non-finite or above {LIMIT:g}"
    return m, inputs, formats, want.detach().to(torch.float64).numpy()


def _one(ir, want: np.ndarray, sched: Schedule) -> tuple[Record, object]:
    stage = "compile"
    try:
        cm = compile_model(ir, sched.fusion, par=sched.par, skip=sched.skip)
        stage = "run"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run_model(cm, simulate=run_graph, max_cycles=MAX_CYCLES)
    except Exception as exc:  # noqa: BLE001 - every exception is a verdict
        verdict, why = classify(exc)
        return Record(sched.describe(), verdict, why, stage=stage), None
    got = res.outputs[ir.outputs[0]]
    why = check(ir.outputs[0], got, want)
    rec = Record(sched.describe(), "ok" if why is None else "mismatch", why or "", max_err(got, want), "check",
                 len(cm.breaks))
    return rec, cm


class CompileMemo:
    """The planner decides each candidate program with ``check_program`` (the analysis passes)
    and then compiles the accepted one with ``run_pipeline``, and the schedules of one module
    compile many identical programs (one region: ``partial`` and ``full`` alike): while
    installed (``with memo:``), ``check_program`` runs the whole pipeline once per (program,
    options) and keeps the result, which ``run_pipeline`` hands out (or re-raises its
    exception).  A program the pipeline rejects gets the real ``check_program``'s verdict, so
    the planner's choices are the same as without the memo.  Patched where the planner looks
    the two names up (every loaded ``fuseflow.models`` module that imports both)."""

    def __init__(self) -> None:
        self.results: dict[bytes, tuple[bool, object]] = {}
        self.hits = self.misses = 0
        self._saved: list[tuple[object, object, object]] = []

    @staticmethod
    def _key(program, options) -> bytes | None:
        try:
            return pickle.dumps((program, options), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - not picklable: no memo for it
            return None

    def __enter__(self) -> CompileMemo:
        import fuseflow.compiler as fc

        check, pipeline = fc.check_program, fc.run_pipeline
        for name, mod in list(sys.modules.items()):
            if name.startswith("fuseflow.models") and getattr(mod, "check_program", None) is check \
                    and getattr(mod, "run_pipeline", None) is pipeline:
                self._saved.append((mod, check, pipeline))
                mod.check_program = self._checker(check, pipeline)
                mod.run_pipeline = self._runner(pipeline)
        return self

    def __exit__(self, *exc) -> None:
        for mod, check, pipeline in self._saved:
            mod.check_program, mod.run_pipeline = check, pipeline
        self._saved.clear()
        self.results.clear()

    def _checker(self, check, pipeline):
        def check_program(program, options=None, *args, **kw):
            key = self._key(program, options) if not args and not kw and options is not None else None
            if key is None:
                return check(program, options, *args, **kw) if options is not None else check(program)
            hit = self.results.get(key)
            if hit is None:
                self.misses += 1
                try:
                    hit = (True, pipeline(program, options))
                except Exception as exc:  # noqa: BLE001 - the real check decides (below)
                    hit = (False, exc)
                self.results[key] = hit
            else:
                self.hits += 1
            if hit[0]:
                return None
            why = check(program, options)
            return why
        return check_program

    def _runner(self, pipeline):
        def run_pipeline(program, options=None, *args, **kw):
            key = self._key(program, options) if not args and not kw and options is not None else None
            hit = self.results.get(key) if key is not None else None
            if hit is None:
                return pipeline(program, options, *args, **kw) if options is not None else pipeline(program)
            self.hits += 1
            if hit[0]:
                return hit[1]
            raise hit[1]
        return run_pipeline


def run_case(case: Case, fusions=FUSIONS, extra: int = 1) -> CaseResult:
    """:func:`_run_case` with the compile memo installed (identical programs compiled once)."""
    with CompileMemo() if MEMO else contextlib.nullcontext():
        return _run_case(case, fusions, extra)


MEMO = True  # the compile memo of run_case (False: every schedule compiles from scratch)


def _cache_cia_ops() -> None:
    """torch.export's ``run_decompositions`` lists every CompositeImplicitAutograd op of every
    op namespace on each call (it caches only ``aten``'s): a fixed set once the libraries are
    loaded, computed once here for the run (about a sixth of a capture)."""
    try:
        import torch._export.utils as tu
        import torch.export.decomp_utils as du
        import torch.export.exported_program as ep
    except ImportError:
        return
    orig = getattr(tu, "_collect_all_valid_cia_ops", None)
    if orig is None or getattr(orig, "_fuzz_cached", False):
        return
    memo: list = []

    def cached():
        if not memo:
            memo.append(frozenset(orig()))
        return set(memo[0])

    cached._fuzz_cached = True
    for mod in (tu, du, ep):
        if getattr(mod, "_collect_all_valid_cia_ops", None) is orig:
            mod._collect_all_valid_cia_ops = cached


_cache_cia_ops()


def _run_case(case: Case, fusions=FUSIONS, extra: int = 1) -> CaseResult:
    """The case under every fusion in ``fusions`` and ``extra`` schedules with a random fusion,
    ``par`` on an index its graphs iterate and ``skip`` (drawn from the case's seed)."""
    out = CaseResult(case)
    ref = _reference(case)
    if isinstance(ref, str):
        out.records.append(Record("-", "invalid", ref, stage="reference"))
        return out
    m, inputs, formats, want = ref
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ir = trace(m, inputs, formats or None, name=f"fuzz_{case.key()}")
    except Exception as exc:  # noqa: BLE001
        verdict, why = classify(exc)
        out.records.append(Record("-", verdict, why, stage="trace"))
        return out
    compiled = {}
    for f in fusions:
        rec, cm = _one(ir, want, Schedule(f))
        out.records.append(rec)
        compiled[f] = cm
    rnd = random.Random(case.seed)
    for _ in range(extra):
        f = rnd.choice(FUSIONS)
        base = compiled.get(f)
        dims = _par_choices(base) if base is not None else {}
        i = rnd.choice(sorted(dims)) if dims and rnd.random() < 0.8 else None
        par = {i: rnd.choice([f for f in (2, 3) if f <= dims[i]])} if i else None
        rec, _ = _one(ir, want, Schedule(f, par, rnd.random() < 0.5))
        out.records.append(rec)
    return out
