"""Differential fuzzing of the RTL: the module generator of the float fuzzer (:mod:`model_gen`)
drives whole models through the generated hardware at Q16.16.

Each generated module is traced, compiled under a fusion drawn from its seed and run with
``run_model(numerics="q16.16")`` through a simulate function that runs every graph in sw_sim
and in RTL (amaranth.sim by default, the Verilator-built native harness on request) and
requires the two to agree bit for bit: the output arrays (segments, coordinates, values), the
dense tensors they store, the cycle count and the overflow flags.  The dequantised result is
then checked against PyTorch (float64 on the dense tensors) with the project's checker
(``fuseflow.models.bounds.check_model``: the end-to-end bound derived from Q16.16 and the op
chain, and a stage check of each materialised tensor).

Verdicts per case: ``ok``; ``mismatch-rtl`` (RTL and sw_sim differ: which graph, what);
``bound-fail`` (a check failed: its text); ``refused`` (a clear error of the toolkit, the
normalised reason, as in the float fuzzer); ``overflow`` (a Q16.16 result saturated: a
legitimate refusal of the format, counted apart); ``crash`` (anything else); ``invalid``
(PyTorch cannot evaluate the module, or an intermediate is non-finite or above
:data:`RTL_LIMIT`: the case says nothing about the hardware); ``large`` (a graph's sw_sim
cycle count is above :data:`MAX_RTL_CYCLES`: not simulated in RTL, so amaranth.sim stays
fast).

The default suite runs :data:`AMARANTH_SEEDS` on amaranth.sim and :data:`NATIVE_SEEDS` on the
native Verilator runner (``rtl`` mark; the builds are cached in ``~/.cache/fuseflow-hw``, so
the fixed seeds build once); the large run is ``run_large.py --rtl amaranth|native``.
"""

from __future__ import annotations

import random
import time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch")

from draws import RngDraw
from harness import _reference, classify
from known import known
from model_gen import Case, gen_case

from fuseflow.models import trace
from fuseflow.models.bounds import check_model
from fuseflow.models.plan import FUSIONS, compile_model, run_model
from fuseflow.ir.overflow import NumericOverflowError, enforce
from hw import HwConfig
from rtl_sim import run_graph_batch
from sw_sim import run_graph

__all__ = ["NUMERICS", "RtlRecord", "rtl_case", "rtl_seed"]

pytestmark = [pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state"),
              pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")]

NUMERICS = "q16.16"
RTL_LIMIT = 1e3  # |intermediate| above this (PyTorch, float64) makes a case invalid: Q16.16 holds < 32768
MAX_RTL_CYCLES = 20_000  # a graph longer than this in sw_sim is not run in amaranth.sim (~1-2 k cycles/s)
SW_MAX_CYCLES = 2_000_000
RUNNERS = ("amaranth", "native")


class RtlMismatch(Exception):
    """RTL and sw_sim disagree on a graph (the message says which and what)."""


class TooLarge(Exception):
    """A graph too long to simulate in RTL here (sw_sim's cycle count says so before RTL runs)."""


@dataclass
class RtlRecord:
    fusion: str
    verdict: str  # ok | mismatch-rtl | bound-fail | refused | overflow | crash | invalid | large
    detail: str = ""
    stage: str = ""  # reference | trace | compile | run | check
    graphs: int = 0  # graphs run in RTL (and sw_sim)
    cycles: int = 0  # their total cycles
    checks: list[str] = field(default_factory=list)  # every check's text (bound-fail and ok alike)
    known: str = ""  # the regression test of a known failure class (known.py), if one matches


# ----------------------------------------------------------------------------- RTL next to sw_sim
def _arrays_differ(t: str, sw, rtl) -> str | None:
    """Where the stored arrays of output ``t`` differ (None when they are identical)."""
    if rtl is None:
        return f"output {t!r} missing in RTL"
    for name, a, b in [("vals", [sw.vals], [rtl.vals]), ("seg", sw.seg, rtl.seg), ("crd", sw.crd, rtl.crd)]:
        for lvl, (x, y) in enumerate(zip(a, b, strict=True)):
            if (x is None) != (y is None) or (x is not None and not np.array_equal(x, y)):
                return f"output {t!r} {name}[{lvl}]: sw_sim {_short(x)}, RTL {_short(y)}"
    if not np.array_equal(sw.to_dense(), rtl.to_dense()):
        return f"output {t!r}: dense tensors differ"
    return None


def _short(a) -> str:
    if a is None:
        return "None"
    a = np.asarray(a)
    return f"{a[:12].tolist()}{'...' if a.size > 12 else ''} (len {a.size})"


def rtl_vs_sw(sw, rtl) -> str | None:
    """How ``rtl`` (an ``RtlResult``) differs from ``sw`` (sw_sim's result of the same graph):
    output arrays, dense tensors, cycles, overflow flags; None when bit-exact."""
    if set(rtl.outputs) != set(sw.outputs):
        return f"outputs: sw_sim {sorted(sw.outputs)}, RTL {sorted(rtl.outputs)}"
    for t, out in sw.outputs.items():
        why = _arrays_differ(t, out, rtl.outputs.get(t))
        if why:
            return why
    if rtl.cycles != sw.cycles:
        return f"cycles: sw_sim {sw.cycles}, RTL {rtl.cycles}"
    sw_flags = sorted(n for n, c in sw.overflows.items() if c)
    if sorted(rtl.overflow) != sw_flags:
        return f"overflow flags: sw_sim {sw_flags}, RTL {sorted(rtl.overflow)}"
    return None


class Both:
    """A ``simulate`` for ``run_model``: each graph in sw_sim and in RTL (``runner``), bit-exact
    agreement required (:class:`RtlMismatch` otherwise); an overflow of either raises
    :class:`NumericOverflowError` after the comparison (the flags must agree first)."""

    def __init__(self, runner: str = "amaranth", max_rtl_cycles: int = MAX_RTL_CYCLES) -> None:
        self.runner = runner
        self.cfg = HwConfig.for_numerics(NUMERICS)
        self.max_rtl_cycles = max_rtl_cycles
        self.graphs: list[tuple[str, int]] = []

    def __call__(self, graph, data, **kw):
        kw["on_overflow"] = "ignore"
        sw = run_graph(graph, data, **kw)
        if self.max_rtl_cycles and sw.cycles > self.max_rtl_cycles:
            raise TooLarge(f"graph {graph.name!r}: {sw.cycles} cycles in sw_sim (limit {self.max_rtl_cycles})")
        try:
            [rtl] = run_graph_batch(graph, [data], cfg=self.cfg, runner=self.runner, on_overflow="ignore",
                                    max_cycles=2 * sw.cycles + 1000)
        except NumericOverflowError:
            raise
        except Exception as exc:
            raise RtlMismatch(f"graph {graph.name!r}: RTL failed where sw_sim ran ({sw.cycles} cycles): "
                              f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}") from exc
        why = rtl_vs_sw(sw, rtl)
        if why:
            raise RtlMismatch(f"graph {graph.name!r}: {why}")
        self.graphs.append((graph.name, sw.cycles))
        enforce(sw.overflow_records, "raise", f"graph {graph.name!r} (sw_sim and RTL agree)")
        return sw


# ----------------------------------------------------------------------------- one case
def _rtl_reference(case: Case):
    """(module, inputs, want) or an ``invalid`` reason (:func:`harness._reference`, and every
    intermediate within :data:`RTL_LIMIT`)."""
    ref = _reference(case)
    if isinstance(ref, str):
        return ref
    m, inputs, _formats, want = ref
    dense = {k: v.to_dense() if v.layout != torch.strided else v for k, v in inputs.items()}
    for k, t in case.probe(m, dense).items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() and float(t.abs().max()) > RTL_LIMIT:
            return f"intermediate {k} above {RTL_LIMIT:g} (Q16.16)"
    return m, inputs, want


def _traced(case: Case, rec: RtlRecord):
    """(ir, want), or None with ``rec`` holding the verdict."""
    ref = _rtl_reference(case)
    if isinstance(ref, str):
        rec.verdict, rec.detail, rec.stage = "invalid", ref, "reference"
        return None
    m, inputs, want = ref
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ir = trace(m, inputs, dict(case.formats) or None, name=f"fuzz_{case.key()}")
    except Exception as exc:  # noqa: BLE001 - every exception is a verdict
        rec.verdict, rec.detail = classify(exc)
        rec.stage = "trace"
        return None
    return ir, want


def _run(ir, want, rec: RtlRecord, runner: str, max_rtl_cycles: int):
    """Compile, run with :class:`Both`, check; the verdict goes into ``rec``."""
    both = Both(runner, max_rtl_cycles)
    try:
        rec.stage = "compile"
        cm = compile_model(ir, rec.fusion)
        rec.stage = "run"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = run_model(cm, numerics=NUMERICS, simulate=both, max_cycles=SW_MAX_CYCLES)
        rec.stage = "check"
        checks = check_model(cm, run, want, NUMERICS)
    except RtlMismatch as exc:
        rec.verdict, rec.detail = "mismatch-rtl", str(exc)
    except TooLarge as exc:
        rec.verdict, rec.detail = "large", str(exc)
    except NumericOverflowError as exc:
        rec.verdict, rec.detail = "overflow", str(exc).strip().splitlines()[0][:200]
    except Exception as exc:  # noqa: BLE001 - every exception is a verdict
        rec.verdict, rec.detail = classify(exc)
    else:
        rec.checks = [c.text() for c in checks]
        bad = [c.text() for c in checks if not c.ok]
        rec.verdict, rec.detail = ("bound-fail", "; ".join(bad)) if bad else ("ok", "")
    rec.graphs = len(both.graphs)
    rec.cycles = sum(c for _, c in both.graphs)


def rtl_case(case: Case, runner: str = "amaranth", fusion: str | None = None,
             max_rtl_cycles: int | None = None) -> RtlRecord:
    """``case`` under ``fusion`` (default: drawn from the case's seed) in RTL next to sw_sim at
    Q16.16, then checked against PyTorch.  ``max_rtl_cycles``: a graph longer than that in
    sw_sim is not run in RTL (verdict ``large``; default :data:`MAX_RTL_CYCLES` on amaranth.sim,
    no limit on the native runner; 0: no limit)."""
    if runner not in RUNNERS:
        raise ValueError(f"runner {runner!r}: use one of {RUNNERS}")
    if max_rtl_cycles is None:
        max_rtl_cycles = MAX_RTL_CYCLES if runner == "amaranth" else 0
    fusion = fusion or random.Random(case.seed).choice(FUSIONS)
    rec = RtlRecord(fusion, "ok")
    traced = _traced(case, rec)
    if traced is not None:
        _run(*traced, rec, runner, max_rtl_cycles)
    if rec.verdict in ("crash", "refused", "mismatch-rtl", "bound-fail"):
        # the RTL classes first: the float fuzzer's mismatch classes match by what a case holds,
        # and a bound failure of another kind would borrow their name
        k = None if known_rtl(rec) else known(case, _as_float_record(rec))
        rec.known = k.test if k else known_rtl(rec)
    return rec


# The RTL fuzzer's own failure classes (its xfail tests below; /work/scratch/fuzz/findings-rtl.md):
# (test, how a record of the class reads).  Delete an entry with its test's xfail mark.
KNOWN_RTL: list[tuple[str, object]] = []


def known_rtl(rec: RtlRecord) -> str:
    """The xfail test of the RTL fuzzer's known class ``rec`` belongs to, or ``""``."""
    return next((test for test, matches in KNOWN_RTL if matches(rec)), "")


def _as_float_record(rec: RtlRecord):
    """``rec`` as the float fuzzer's record for :func:`known.known` (a bound failure is its
    ``mismatch``)."""
    verdict = {"bound-fail": "mismatch"}.get(rec.verdict, rec.verdict)
    return type("R", (), {"verdict": verdict, "detail": rec.detail, "schedule": rec.fusion})()


def rtl_seed(seed: int, runner: str = "amaranth") -> dict:
    """The large run's case ``seed`` (the float fuzzer's module of that seed): a JSON-able dict
    with the case, its record and the seconds it took."""
    t0 = time.perf_counter()
    case = gen_case(RngDraw(seed), seed=seed)
    rec = rtl_case(case, runner)
    return {"case": case.to_json(), "record": asdict(rec), "runner": runner,
            "seconds": round(time.perf_counter() - t0, 2)}


# ----------------------------------------------------------------------------- the tests
# Module seeds of the large run (run_large.py --rtl) that run in RTL in a few seconds each: 1 to 7
# graphs, the three fusions, inputs in CSR, COO with duplicates, BSR, annotated DCSR / CSC / CSR
# and dense, and layernorm, softmax, masked softmax, rsqrt, cat, slice, linear, matmul, matvec,
# row dots, gelu, clamp, minimum, mean, min, where and scalar ops between them.
AMARANTH_SEEDS = [3, 4, 5, 8, 9, 10, 13, 14]
NATIVE_SEEDS = [13, 9]  # 3 graphs; their Verilator builds stay in ~/.cache/fuseflow-hw between runs
FAILURES = ("crash", "mismatch-rtl", "bound-fail", "large")


def _report(case: Case, rec: RtlRecord) -> str:
    checks = "\n".join(rec.checks)
    return (f"{rec.fusion}: {rec.verdict} at {rec.stage}: {rec.detail}\n{checks}\n"
            f"(known: {rec.known or 'no'})\n{case.describe()}")


def _full() -> bool:
    """``FUSEFLOW_FUZZ=full`` (:mod:`fuzz_settings`; outside pytest, as run_large.py imports
    this module, the reduced form)."""
    try:
        from fuzz_settings import FULL
    except ImportError:
        return False
    return FULL


def _seeds(curated: list[int]) -> list[int]:
    """``curated``, or under ``FUSEFLOW_FUZZ=full`` the large run's first 200 seeds (scaled by
    ``FUSEFLOW_FUZZ_SCALE``)."""
    if not _full():
        return curated
    from fuzz_settings import examples

    return list(range(examples(len(curated), 200)))


def _in_rtl(seed: int, runner: str) -> None:
    case = gen_case(RngDraw(seed), seed=seed)
    rec = rtl_case(case, runner)
    if not _full():  # the curated seeds were chosen because they reach RTL: a refusal is a regression too
        assert rec.verdict == "ok", _report(case, rec)
    else:
        assert rec.verdict not in FAILURES or rec.known, _report(case, rec)


@pytest.mark.parametrize("seed", _seeds(AMARANTH_SEEDS))
def test_generated_model_in_amaranth_sim_matches_sw_sim_and_pytorch(seed: int) -> None:
    """Every graph of the generated model bit-exact in RTL (amaranth.sim) and sw_sim at Q16.16,
    the result within the derived bound of PyTorch."""
    _in_rtl(seed, "amaranth")


@pytest.mark.rtl
@pytest.mark.parametrize("seed", _seeds(NATIVE_SEEDS))
def test_generated_model_on_verilator_matches_sw_sim_and_pytorch(seed: int) -> None:
    """The same on the native Verilator runner (the builds are cached)."""
    _in_rtl(seed, "native")


def test_comparison_names_what_differs() -> None:
    """The bit-exact comparison is not vacuous: each kind of difference is found and named."""
    from dataclasses import replace
    from types import SimpleNamespace as NS

    from fuseflow.ir.tensor import Format, TensorData, TensorFormat

    a = np.array([[0, 3], [5, 0]])
    csr = TensorFormat((Format.DENSE, Format.COMPRESSED))
    sw = NS(outputs={"t": TensorData.from_dense(a, csr)}, cycles=40, overflows={"n": 0})

    def rtl(b=a, cycles=40, overflow=()):
        return NS(outputs={"t": TensorData.from_dense(b, csr)}, cycles=cycles, overflow=list(overflow))

    assert rtl_vs_sw(sw, rtl()) is None
    assert "vals[0]" in rtl_vs_sw(sw, rtl(np.array([[0, 3], [6, 0]])))
    assert "crd[1]" in rtl_vs_sw(sw, rtl(np.array([[3, 0], [5, 0]])))
    moved = replace(sw.outputs["t"], seg=[None, np.array([0, 0, 2])])  # same values and coordinates
    assert "seg[1]" in rtl_vs_sw(sw, NS(outputs={"t": moved}, cycles=40, overflow=[]))
    assert "cycles: sw_sim 40, RTL 41" in rtl_vs_sw(sw, rtl(cycles=41))
    assert "overflow flags" in rtl_vs_sw(sw, rtl(overflow=["n"]))
    assert "outputs" in rtl_vs_sw(sw, NS(outputs={}, cycles=40, overflow=[]))


@pytest.mark.slow
def test_large_rtl_run(tmp_path) -> None:
    """The large RTL run in one process (``FUSEFLOW_FUZZ_RTL_CASES`` module seeds, default 200,
    on ``FUSEFLOW_FUZZ_RTL_RUNNER``, default amaranth; ``FUSEFLOW_FUZZ_OUT`` keeps the logs,
    resumable): no RTL mismatch, bound failure or crash outside the known classes."""
    import json
    import os
    from pathlib import Path

    from run_large import run_shard, summary

    out = Path(os.environ.get("FUSEFLOW_FUZZ_OUT", tmp_path))
    runner = os.environ.get("FUSEFLOW_FUZZ_RTL_RUNNER", "amaranth")
    run_shard(0, 1, int(os.environ.get("FUSEFLOW_FUZZ_RTL_CASES", "200")), 0, out, 900, runner)
    print(summary(out))
    bad = []
    for line in (out / "shard-0.jsonl").read_text().splitlines():
        d = json.loads(line)
        bad += [(d["seed"], r["verdict"], r["detail"][:200]) for r in d["records"]
                if r["verdict"] in (*FAILURES, "timeout") and not r.get("known")]
    assert not bad, bad[:20]


# ----------------------------------------------------------------------------- findings
# Minimal modules of the large run's bound failures (R1, R2 in /work/scratch/fuzz/findings-rtl.md,
# fixed in 4f544a4).  RTL and sw_sim agreed bit for bit on every one; the failure was the derived
# bound's, so these run in sw_sim (fast) at Q16.16 (and float).
def _failed_checks(module, x, fusion: str, numerics: str) -> list[str]:
    with torch.no_grad():
        want = module(x).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = compile_model(trace(module, {"x": x}, None, name="finding"), fusion)
        run = run_model(cm, numerics=numerics, simulate=run_graph)
    return [c.text() for c in check_model(cm, run, want, numerics) if not c.ok]


class _Std(torch.nn.Module):
    def forward(self, x):
        return x.std(1, keepdim=False, correction=0)


class _Hardtanh(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.hardtanh(x)


@pytest.mark.parametrize("numerics", [NUMERICS, "float"])
def test_std_over_a_length_one_dim_has_a_finite_bound(numerics: str) -> None:
    """std over a dimension of length 1 is exactly 0 (got == want == 0); the enclosure of the
    variance reaches below 0, where sqrt is undefined: the bound there is unbounded (it was NaN,
    which failed the check)."""
    bad = _failed_checks(_Std(), torch.tensor([[0.5], [0.0]], dtype=torch.float64), "full", numerics)
    assert not bad, bad


@pytest.mark.parametrize("fusion", ["unfused", "full"])
def test_hardtanh_bound_allows_the_float64_rounding_of_its_shifts(fusion: str) -> None:
    """hardtanh lowers to shifts by +-1 around relus; the bound is the input's observed Q16.16
    rounding about the float64 value of the chain, which drifts by ~1.6e-16 from PyTorch's x
    (an ulp of 1): the enclosure carries the float64 rounding of its own values (it did not,
    and 16 ulps of |x| = 0.028 were too little)."""
    x = torch.tensor([[-0.028427676959011872]], dtype=torch.float64)
    bad = _failed_checks(_Hardtanh(), x, fusion, NUMERICS)
    assert not bad, bad
