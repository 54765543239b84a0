"""Formal proofs of the stream protocol (rtl_sim/formal.py, SymbiYosys with Yices): every
primitive configuration of the primitive tests, playing a vector under every schedule of input
gaps and output back-pressure up to the proof depth, holds valid and payload until ready,
delivers exactly sw_sim's tokens in order (stops at their levels, nothing lost, nothing
duplicated), offers nothing after D and only legal control words; and some schedule delivers
every output completely.  The suite proves one configuration per kind in QUICK; ``-m formal``
(or FUSEFLOW_FORMAL=1) proves every configuration."""

from __future__ import annotations

import pytest
from formal_vectors import depth_of, formal_vectors

from rtl_sim.formal import formal_tools, prove_protocol

pytestmark = pytest.mark.rtl

VECTORS = formal_vectors()
IDS = [f"{v.kind}-{i}" for i, v in enumerate(VECTORS)]
# quick proofs (a few seconds each) that the suite runs: one configuration per kind listed
QUICK = ("alu", "intersect", "union", "crd_drop", "crd_hold", "reduce", "repsig", "root",
         "stkn_drop", "locate", "array_load", "scan", "write", "vals_write", "repeat", "lane_reduce")


def _quick() -> list:
    seen, out = set(), []
    for v, i in zip(VECTORS, IDS):
        if v.kind in QUICK and v.kind not in seen:
            seen.add(v.kind)
            out.append(pytest.param(v, id=i))
    return out


def _prove(v):
    formal_tools()
    res = prove_protocol(v.kind, v.params, v.inputs, v.memory, depth=depth_of(v), timeout=900)
    assert res.passed, f"{v.kind} {v.params} depth {res.depth}: {res.status}: {res.detail}"
    return res


@pytest.mark.parametrize("v", _quick())
def test_protocol_proof_quick(v) -> None:
    _prove(v)


@pytest.mark.formal
@pytest.mark.parametrize("v", VECTORS, ids=IDS)
def test_protocol_proof_every_configuration(v) -> None:
    _prove(v)


def test_a_wrong_reference_fails_the_proof() -> None:
    """The check can fail: one token of the reference changed (an adder's 3 said to be 4), or
    a token dropped from it, and the solver finds the schedule that shows it."""
    formal_tools()
    inputs = {"a": "1, 2, S0, D", "b": "2, 0, S0, D"}
    changed = prove_protocol("alu", {"op": "add"}, inputs, depth=10, expected={"val": "4, 2, S0, D"})
    assert changed.status == "fail" and changed.detail.startswith("order"), changed
    dropped = prove_protocol("alu", {"op": "add"}, inputs, depth=10, expected={"val": "3, S0, D"})
    assert dropped.status == "fail", dropped
    right = prove_protocol("alu", {"op": "add"}, inputs, depth=10)
    assert right.passed, right


def test_reduction_identity_is_the_datapaths() -> None:
    """A max reduction of an empty fibre outputs its identity, the most negative value of the
    datapath: the reference is computed in the harness's width, so the proof holds (it was
    refuted while sw_sim's reference used 32 bits and the harness 33)."""
    formal_tools()
    res = prove_protocol("reduce", {"op": "max", "lanes": 4}, {"val": "S0, (3|-2|5|1), (1|4|-7|0), S1, D"},
                         depth=12)
    assert res.passed, res
