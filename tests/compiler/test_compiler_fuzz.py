"""Fuzzing the compiler and sw_sim: random valid Einsum programs (operands with random index
orders, dense/compressed levels, mode orders and densities including empty fibres, reductions,
scaled and added terms, chained products) under a random fusion granularity and iteration
style; sw_sim's values must equal numpy's, element for element.  Hypothesis shrinks a failure
to a minimal program.  Reduced in the suite; ``FUSEFLOW_FUZZ=full`` runs 10 000 programs."""

from __future__ import annotations

import numpy as np
from compiler_programs import assert_canonical
from fuzz_settings import fuzz_settings
from hypothesis import assume, event, given
from hypothesis import strategies as st
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


@fuzz_settings(reduced=120, full=10_000)
@given(spec=programs(), fusion=st.sampled_from(list(Fusion)), factored=st.booleans())
def test_fuzz_programs_sw_sim_equals_numpy(spec, fusion: Fusion, factored: bool) -> None:
    program, data = build(spec)
    try:
        compiled = compile_program(program, fusion, factored=factored)
    except (FusionError, LoweringError) as exc:  # refused with a reason (e.g. an order-2 accumulator)
        event(f"refused: {type(exc).__name__}")
        assume(False)
        return
    event("compiled")
    expected = reference(program, data)
    result = run_program(compiled, data, simulate=run_graph)
    for name, want in expected.items():
        assert_canonical(name, result.outputs[name])
        np.testing.assert_array_equal(result.dense(name), want)
