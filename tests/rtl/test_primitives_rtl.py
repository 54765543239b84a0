"""Every primitive in RTL against sw_sim: same vectors, tokens equal; cycles equal without
back-pressure; tokens still equal with seeded random valid gaps and ready back-pressure; the
sticky overflow flag set exactly when sw_sim counts a wrapped result (and, on vectors at the
int32 bounds, when exact Python arithmetic leaves the range).

The harnesses run under amaranth.sim (``run_primitive_batch``'s default: nothing to build);
:func:`test_cocotb_testbench_equals_amaranth` runs a sample through the Verilator build and the
cocotb testbench as well, plain and under back-pressure, and requires the same outputs, arrays,
flags and cycle counts from both."""

import itertools

import pytest
from vectors import all_vectors, overflow_vectors

from rtl_sim import run_primitive_batch
from sw_sim import simulate_primitive

pytestmark = pytest.mark.rtl

VECTORS = all_vectors()
GROUPS = {k: list(g) for k, g in itertools.groupby(sorted(VECTORS, key=lambda v: str(v.key())), key=lambda v: v.key())}


def _sw(v):
    return simulate_primitive(v.kind, v.inputs, **v.params, **v.memory)


def _strip(d):
    return {k: list(v) for k, v in d.items() if k not in ("cycles", "overflow")}


def _flag(r) -> bool:
    """The RTL's overflow flag (a primitive whose operation cannot overflow has none)."""
    return r.get("overflow", False)


@pytest.mark.parametrize("key", sorted(GROUPS, key=str), ids=lambda k: "-".join(str(x) for x in (k[0], *[v for _, v in k[1]])))
def test_primitive_matches_sw_sim(key):
    vecs = GROUPS[key]
    kind, params = vecs[0].kind, vecs[0].params
    runs = [{"inputs": v.inputs, **v.memory} for v in vecs]
    plain = run_primitive_batch(kind, runs, **params)
    stressed = run_primitive_batch(kind, runs, gap=0.3, stall=0.3, seed=11, **params)
    for v, r, s in zip(vecs, plain, stressed):
        ref = _sw(v)
        assert _strip(r) == _strip(ref), f"{kind} {v.inputs}"
        # cycles count from the first cycle an input offers a token; a source (the root) has no
        # input, so its single-primitive count has no common origin (its timing is checked
        # cycle-exactly inside every graph: test_kernels_rtl, the correlation suites)
        if v.inputs:
            assert r["cycles"] == ref.cycles, f"{kind} cycles {r['cycles']} != sw_sim {ref.cycles}"
        assert _strip(s) == _strip(ref), f"{kind} under back-pressure {v.inputs}"
        assert _flag(r) == _flag(s) == (ref.overflows > 0), f"{kind} overflow flag {v.inputs}"


OVERFLOW = {k: list(g) for k, g in itertools.groupby(sorted(overflow_vectors(), key=lambda v: str(v.key())),
                                                      key=lambda v: v.key())}


@pytest.mark.parametrize("key", sorted(OVERFLOW, key=str), ids=lambda k: "-".join(str(x) for x in (k[0], *[v for _, v in k[1]])))
def test_overflow_flag_at_the_int32_bounds(key):
    """Results at and just beyond the int32 bounds (the builds of the tests above): tokens as
    sw_sim's, and the flag set exactly for the vectors whose exact results leave the range,
    plain and under back-pressure; every run starts from reset, so a flag never carries over."""
    vecs = OVERFLOW[key]
    kind, params = vecs[0].kind, vecs[0].params
    runs = [{"inputs": v.inputs} for v in vecs]
    assert any(v.overflow for v in vecs) or kind in ("alu", "reduce") and params["op"] in ("max", "min")
    for got in (run_primitive_batch(kind, runs, **params),
                run_primitive_batch(kind, runs, gap=0.4, stall=0.4, seed=3, **params)):
        for v, r in zip(vecs, got):
            ref = _sw(v)
            assert _strip(r) == _strip(ref), f"{kind} {v.inputs}"
            assert _flag(r) == v.overflow == (ref.overflows > 0), f"{kind} {params} {v.inputs}"


PARALLEL = sorted((k for k, g in GROUPS.items() if k[0] in ("parallelize", "serialize") and g[0].expected), key=str)


def _heavy(key) -> bool:
    """The 64-lane serializer under back pressure: over a minute of Verilator, behind -m slow
    (the 64-lane parallelizer and the narrower serializers stay in the default suite)."""
    return key[0] == "serialize" and any(str(v) == "64" for _, v in key[1])


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.slow) if _heavy(k) else k for k in PARALLEL],
                         ids=lambda k: "-".join(str(x) for x in (k[0], *[v for _, v in k[1]])))
def test_parallel_regions_under_heavy_back_pressure(key):
    """The parallel-region primitives (one lane's room decides a split; a merge waits on one
    lane, on sel or on all lanes) with more input gaps and output stalls than above, each vector
    twice with different random patterns: exactly the tokens expected from the split trees,
    none lost, none duplicated."""
    vecs = GROUPS[key] * 2
    kind, params = vecs[0].kind, vecs[0].params
    runs = [{"inputs": v.inputs} for v in vecs]
    for v, r in zip(vecs, run_primitive_batch(kind, runs, gap=0.5, stall=0.6, seed=23, **params)):
        assert {p: r[p] for p in v.expected} == v.expected, f"{kind} {params} {v.inputs}"


# one configuration per path of the cocotb testbench: a scanner reading memories, a join, an
# ALU with its overflow flag, a reduction, an accumulator, a values writer (arrays read back)
COCOTB_SAMPLE = [k for k in sorted(GROUPS, key=str)
                 if (k[0], tuple(str(v) for _, v in k[1])) in {("scan", ("compressed",)), ("intersect", ("2",)),
                                                               ("alu", ("mul",)), ("reduce", ("add",)),
                                                               ("spacc1", ("8",)), ("vals_write", ())}]


@pytest.mark.parametrize("key", COCOTB_SAMPLE, ids=lambda k: "-".join(str(x) for x in (k[0], *[v for _, v in k[1]])))
def test_cocotb_testbench_equals_amaranth(key):
    vecs = GROUPS[key]
    kind, params = vecs[0].kind, vecs[0].params
    runs = [{"inputs": v.inputs, **v.memory} for v in vecs]
    for stress in ({}, {"gap": 0.3, "stall": 0.3, "seed": 11}):
        got = {r: run_primitive_batch(kind, runs, runner=r, **stress, **params) for r in ("amaranth", "cocotb")}
        assert got["cocotb"] == got["amaranth"], f"{kind} {stress}"
