"""Differential fuzzing of the PyTorch frontend + planner + compiler + sw_sim against PyTorch on
the dense tensors: random modules over the supported-op table with sparse inputs in every
layout (:mod:`model_gen`), each under every fusion and a random par / skip schedule
(:mod:`harness`).  The rule: a sparse tensor means the dense tensor it stores; a refusal must
be a clear error, anything else is a crash.  Failures of a class in :mod:`known` (an open bug
with an xfail regression test) are events, not failures.

Reduced and derandomised by default; ``FUSEFLOW_FUZZ=full`` draws 5 000 fresh modules
(``FUSEFLOW_FUZZ_SCALE`` scales it).  The sharded large run is ``run_large.py`` (also behind
``-m slow`` below)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch")

from fuzz_settings import fuzz_settings
from harness import run_case
from hypothesis import event, given
from known import known
from model_gen import cases


def _unexpected(res) -> list[str]:
    out = []
    for r in res.records:
        event(f"{r.verdict}: {r.detail[:60]}" if r.verdict in ("refused", "invalid") else r.verdict)
        if r.verdict not in ("crash", "mismatch"):
            continue
        k = known(res.case, r)
        if k is not None:
            event(f"known: {k.test}")
            continue
        out.append(f"{r.schedule}: {r.verdict} at {r.stage}: {r.detail}")
    return out


@fuzz_settings(reduced=60, full=5_000)
@given(case=cases())
def test_random_modules_match_pytorch_on_dense_tensors(case) -> None:
    bad = _unexpected(run_case(case))
    assert not bad, "\n".join(bad) + "\n" + case.describe()


@pytest.mark.slow
def test_large_sharded_run(tmp_path: Path) -> None:
    """The large run in one process (``FUSEFLOW_FUZZ_CASES`` modules, default 5 000, and
    ``FUSEFLOW_FUZZ_PROGRAMS`` programs, default 10 000; ``FUSEFLOW_FUZZ_OUT`` keeps the
    logs, resumable): no crash or mismatch outside the known classes."""
    import json

    from run_large import run_shard, summary

    out = Path(os.environ.get("FUSEFLOW_FUZZ_OUT", tmp_path))
    run_shard(0, 1, int(os.environ.get("FUSEFLOW_FUZZ_CASES", "5000")),
              int(os.environ.get("FUSEFLOW_FUZZ_PROGRAMS", "10000")), out, 300)
    print(summary(out))
    bad = []
    for line in (out / "shard-0.jsonl").read_text().splitlines():
        d = json.loads(line)
        bad += [(d["kind"], d["seed"], r["verdict"], r["detail"][:100]) for r in d["records"]
                if r["verdict"] in ("crash", "mismatch", "timeout") and not r.get("known")]
    assert not bad, bad[:20]


@pytest.mark.parametrize("seed", [7])  # one module: the large runs compare more (findings)
def test_compile_memo_changes_no_verdict(seed: int) -> None:
    """The harness's compile memo (identical programs compiled once per module) gives the same
    records, schedule by schedule, as compiling every schedule from scratch."""
    import harness
    from draws import RngDraw
    from model_gen import gen_case

    case = gen_case(RngDraw(seed), seed=seed)
    try:
        harness.MEMO = False
        plain = harness.run_case(case)
    finally:
        harness.MEMO = True
    memo = harness.run_case(case)
    assert [(r.schedule, r.verdict, r.detail, r.breaks) for r in memo.records] == \
        [(r.schedule, r.verdict, r.detail, r.breaks) for r in plain.records]
