"""Fuzzing Einsum programs in float numerics over the program-level ops with documented
semantics (softmax over the visited coordinates, layernorm over whole fibres, unary functions,
scalar ops, max / min reductions, division, maximum / minimum) against a numpy reference written
from docs/compiler.md (:mod:`program_gen`), under every fusion and a random schedule (factored,
locate, skip, par, block).  A refusal must be a clear error.  Reduced and derandomised by
default; ``FUSEFLOW_FUZZ=full`` runs 10 000 programs."""

from __future__ import annotations

from fuzz_settings import fuzz_settings
from hypothesis import event, given
from known import known_program
from program_gen import programs, run_program_case


@fuzz_settings(reduced=200, full=10_000)
@given(pc=programs())
def test_random_float_programs_match_the_documented_semantics(pc) -> None:
    recs = run_program_case(pc)
    for r in recs:
        event(f"{r.verdict}: {r.detail[:60]}" if r.verdict in ("refused", "invalid") else r.verdict)
    bad = []
    for r in recs:
        if r.verdict not in ("crash", "mismatch"):
            continue
        k = known_program(pc, r)
        if k is not None:
            event(f"known: {k.test}")
            continue
        bad.append(f"{r.schedule}: {r.verdict} at {r.stage}: {r.detail}")
    assert not bad, "\n".join(bad) + "\n" + pc.describe()
