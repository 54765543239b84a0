"""Fuzzing the compiler and sw_sim: random valid Einsum programs (operands with random index
orders, dense/compressed levels, mode orders and densities including empty fibres, reductions,
scaled and added terms, chained products) under a random fusion granularity and iteration
style; sw_sim's values must equal numpy's, element for element.  Hypothesis shrinks a failure
to a minimal program.  Reduced in the suite; ``FUSEFLOW_FUZZ=full`` runs 10 000 programs."""

from __future__ import annotations

import pytest
from compiler_programs import check
from fuzz_settings import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from random_programs import build, compile_or_assume, programs

from fuseflow.compiler import Fusion, compile_program


@fuzz_settings(reduced=120, full=10_000)
@given(spec=programs(), fusion=st.sampled_from(list(Fusion)), factored=st.booleans())
def test_fuzz_programs_sw_sim_equals_numpy(spec, fusion: Fusion, factored: bool) -> None:
    program, data = build(spec)
    check(compile_or_assume(program, fusion, factored), data)


@pytest.mark.parametrize("density", [0.0, 0.5])
@pytest.mark.parametrize("fusion", list(Fusion))
def test_dense_operand_under_an_intersect_in_a_union(density: float, fusion: Fusion) -> None:
    """Found by the full fuzz run: ``Y_ij = T0_i·T1_ij·T2_j + B_ij`` (T1 dense, T2 compressed,
    B dense over j): at j, T1 only has fibres where T2 has the coordinate, so i does not
    enumerate its dimension there and Y's inner level must be compressed (it was declared
    dense and written short)."""
    spec = ("ij", [("i", ("d",), (0,), density), ("ij", ("d", "d"), (1, 0), density),
                   ("j", ("c",), (0,), density)], ("ij", ("d", "c"), (1, 0), density), 1, False)
    program, data = build(spec)
    check(compile_program(program, fusion, factored=False), data)
