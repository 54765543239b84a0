"""The cycles-vs-nonzeros benchmark (bench/nnz_scaling.py) in a reduced form: every point's
values equal scipy's (checked inside the benchmark), SpMV / SpMM / GCN-aggregation cycles stay
within the bounds computed from each point's own nonzeros, and locating never costs more
cycles than scanning and intersecting the dense level."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "bench" / "nnz_scaling.py"
_spec = importlib.util.spec_from_file_location("nnz_scaling", _PATH)
nnz_scaling = importlib.util.module_from_spec(_spec)
sys.modules["nnz_scaling"] = nnz_scaling
_spec.loader.exec_module(nnz_scaling)


@pytest.mark.parametrize("kernel", ["spmv", "spmm", "gcn_agg", "spmspm_ikj", "spmspm_ijk"])
@pytest.mark.parametrize("pattern", ["uniform", "powerlaw"])
def test_points_meet_their_bounds_and_locate_never_loses(kernel: str, pattern: str) -> None:
    n = 24 if kernel == "spmspm_ijk" else 48
    for density in (0.03, 0.3):
        p = nnz_scaling.run_point(kernel, n, density, pattern, seed=1)
        assert p.within_bound, (kernel, pattern, density, p.cycles, p.bound)
        assert p.cycles <= p.cycles_before, (kernel, pattern, density)


def test_spmv_work_is_proportional_to_nonzeros_across_sizes() -> None:
    # the same density at 4x the rows: cycles grow with nnz + rows, not with n^2
    small = nnz_scaling.run_point("spmv", 64, 0.02, "uniform", before=False)
    large = nnz_scaling.run_point("spmv", 256, 0.02, "uniform", before=False)
    ratio = large.cycles / small.cycles
    work = (large.nnz + 256) / (small.nnz + 64)
    assert ratio <= 1.2 * work and ratio < 16  # 16 = (256/64)^2, a dense scan's growth


def test_powerlaw_rows_are_skewed_and_keep_the_density() -> None:
    a = nnz_scaling.random_matrix(512, 512, 0.05, "powerlaw", 0)
    rows = np.diff(a.indptr)
    assert abs(a.nnz - 0.05 * 512 * 512) < 0.05 * a.nnz
    assert rows.max() > 8 * np.median(rows)  # a few long rows, many short ones


def test_check_mode_reports_a_missed_bound(capsys, monkeypatch) -> None:
    # a bound the hardware cannot meet must fail --check (exit status 1) and name the point
    spec = nnz_scaling.KERNEL_SPECS["spmv"]
    monkeypatch.setitem(nnz_scaling.KERNEL_SPECS, "spmv",
                        nnz_scaling.Kernel(spec.program, spec.operands, spec.reference, spec.ideal,
                                           lambda d: 1.0, spec.output))
    assert nnz_scaling.main(["--kernels", "spmv", "--sizes", "16", "--densities", "0.2",
                             "--patterns", "uniform", "--check"]) == 1
    assert "MISSED: spmv uniform n=16" in capsys.readouterr().out


def test_skipping_never_costs_cycles_on_inner_products() -> None:
    for pattern in ("uniform", "powerlaw"):
        p = nnz_scaling.run_point("spmspm_ijk", 24, 0.2, pattern, seed=2, before=False)
        assert p.cycles_skip is not None and p.cycles_skip <= p.cycles, pattern
