"""The kept coefficients (``fpga/data/resources_<family>.json``) are what ``bench/resource_calibration.py
fit`` makes of the kept place-and-route reports (``docs/resource_calibration/<family>.jsonl``)
with this version's features: a feature that changed, a report added or a coefficient edited by
hand without a refit fails here.  (How well they predict held-out designs is the benchmark's
figure, docs/fpga.md.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fpga.resource_model import load_model

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("resource_calibration", ROOT / "bench" / "resource_calibration.py")
cal = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cal)


@pytest.mark.parametrize("family", ["ice40", "ecp5", "gowin"])
def test_coefficients_are_the_fit_of_the_kept_reports(family):
    train, _held = cal.split(family)
    if any("model" in r["design"] for r in train):
        pytest.importorskip("torch", reason="the zoo-model designs are traced with PyTorch")
    want, kept = cal.fitted(family, train), load_model(family)
    assert kept is not None and kept.note == want.note and kept.designs == want.designs
    for part in ("lut", "ff", "period"):
        a, b = getattr(kept, part), getattr(want, part)
        assert set(a) == set(b), (part, sorted(a), sorted(b))
        for k in a:
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), (part, k)
    assert kept.bram_threshold == pytest.approx(want.bram_threshold)
    assert (kept.dsp_per_mul, kept.dsp_per_wide_mul) == pytest.approx((want.dsp_per_mul, want.dsp_per_wide_mul))
    assert tuple(kept.lut_range) == pytest.approx(tuple(want.lut_range))
