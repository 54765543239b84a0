"""Random small Einsum programs, formats and sparse data: sw_sim agrees with numpy."""

from __future__ import annotations

import pytest
from compiler_programs import check
from hypothesis import HealthCheck, given, settings
from random_programs import build, compile_or_assume, programs

from fuseflow.compiler import Fusion


@pytest.mark.parametrize(("fusion", "factored"), [(Fusion.FULL, True), (Fusion.UNFUSED, True),
                                                  (Fusion.FULL, False)],
                         ids=["full", "unfused", "full_global"])
@settings(max_examples=60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(spec=programs())
def test_random_programs_match_numpy(spec, fusion: Fusion, factored: bool) -> None:
    program, data = build(spec)
    check(compile_or_assume(program, fusion, factored), data)
