"""Random small Einsum programs, formats and sparse data: sw_sim agrees with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_programs import assert_canonical
from hypothesis import HealthCheck, assume, given, settings
from random_programs import build, programs

from fuseflow.compiler import (
    Fusion,
    FusionError,
    LoweringError,
    compile_program,
    reference,
    run_program,
)
from sw_sim import run_graph


@pytest.mark.parametrize(("fusion", "factored"), [(Fusion.FULL, True), (Fusion.UNFUSED, True),
                                                  (Fusion.FULL, False)],
                         ids=["full", "unfused", "full_global"])
@settings(max_examples=60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(spec=programs())
def test_random_programs_match_numpy(spec, fusion: Fusion, factored: bool) -> None:
    program, data = build(spec)
    try:
        compiled = compile_program(program, fusion, factored=factored)
    except (FusionError, LoweringError):
        assume(False)  # legitimately rejected (order-2 accumulator, broadcast over compressed)
        return
    expected = reference(program, data)
    result = run_program(compiled, data, simulate=run_graph)
    for name, want in expected.items():
        assert_canonical(name, result.outputs[name])
        np.testing.assert_array_equal(result.dense(name), want)
