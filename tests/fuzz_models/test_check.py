"""The fuzzers' comparison ``check`` rejects a result perturbed by just over its bound and
accepts one perturbed by just under it (one element, either sign, at small and large scales),
and rejects a wrong shape or a NaN."""

from __future__ import annotations

import numpy as np
import pytest
from harness import TOL, check


@pytest.mark.parametrize("scale", [1e-3, 1.0, 250.0])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_check_rejects_one_element_just_over_the_bound(scale: float, sign: float) -> None:
    rng = np.random.default_rng(0)
    want = rng.standard_normal((4, 5)) * scale
    bound = TOL * max(1.0, float(np.max(np.abs(want))))
    assert check("y", want.copy(), want) is None
    for frac, ok in ((0.9, True), (1.1, False)):
        got = want.copy()
        got[2, 3] += sign * frac * bound
        assert (check("y", got, want) is None) == ok, (frac, check("y", got, want))
    got = want.copy()
    got[0, 0] += sign * 1.1 * bound
    assert "at (0, 0)" in check("y", got, want)


def test_check_rejects_shape_and_nan() -> None:
    want = np.zeros((2, 3))
    assert "shape" in check("y", np.zeros((3, 2)), want)
    assert "shape" in check("y", np.zeros(6), want)
    got = want.copy()
    got[1, 1] = np.nan
    assert check("y", got, want) is not None
    assert check("y", np.zeros((0, 3)), np.zeros((0, 3))) is None
