"""RTL (Verilator) vs sw_sim for the ML primitives and fixed-point arithmetic: the same vectors
through both, tokens bit-exact and cycle counts equal without back-pressure; tokens equal under
random valid gaps and ready stalls.  One Verilator build per primitive configuration, all
vectors of a configuration in one simulator run."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from test_ml_primitives_sw import (
    layernorm_graph,
    layernorm_ref,
    nonempty_reduce_tree,
    random_csr_values,
    softmax_graph,
    spacc1_inputs,
    spacc1_reference,
    spacc1_tree,
    spacc2_many_fibers,
    spacc2_vectors,
    sparse_softmax_ref,
)
from vectors import fiber_stream

from fuseflow.ir.numerics import DEFAULT_FIXED, Numerics
from fuseflow.ir.tensor import CSR, DENSE2, TensorData
from fuseflow.ir.tokens import DONE, EMPTY, Stop, Token, format_stream
from hw.accumulate import spacc_in_block_ram
from hw.elaborate import HwConfig
from rtl_sim import run_graph as rtl_run_graph
from rtl_sim.api import run_primitive_batch
from sw_sim import run_graph, simulate_primitive

pytestmark = pytest.mark.rtl

Q = DEFAULT_FIXED
CFG = HwConfig.for_numerics(Q)


def _val_stream(rng: random.Random, lo: float, hi: float, extremes: list[int], num: Numerics = Q) -> list[Token]:
    """A 2-level value stream with random rows, some N tokens and the given raw extremes."""
    rows = [[num.to_raw(rng.uniform(lo, hi)) for _ in range(rng.randint(0, 5))] for _ in range(rng.randint(1, 5))]
    rows.append(list(extremes))
    toks = fiber_stream(rows, 2)
    for _ in range(2):
        pos = rng.randrange(len(toks) - 1)
        toks.insert(pos, EMPTY)
    return toks


def _check(kind: str, params: dict, inputs: list[dict], cfg: HwConfig = CFG) -> None:
    sw = [simulate_primitive(kind, r, numerics=cfg.num, **params) for r in inputs]
    rtl = run_primitive_batch(kind, [{"inputs": r} for r in inputs], cfg=cfg, **params)
    for i, (s, r) in enumerate(zip(sw, rtl, strict=True)):
        for port, toks in s.items():
            assert r[port] == toks, f"run {i} port {port}: sw {format_stream(toks)} rtl {format_stream(r[port])}"
        assert r["cycles"] == s.cycles, f"run {i}: sw {s.cycles} cycles, rtl {r['cycles']}"
        # the sticky flag: set exactly when sw_sim saturated (or wrapped) a result
        assert r.get("overflow", False) == (s.overflows > 0), f"run {i}: sw {s.overflows} overflow(s)"
    bp = run_primitive_batch(kind, [{"inputs": r} for r in inputs], cfg=cfg, gap=0.3, stall=0.4, seed=9, **params)
    for i, (s, r) in enumerate(zip(sw, bp, strict=True)):
        for port, toks in s.items():
            assert r[port] == toks, f"back-pressure run {i} port {port}"
        assert r.get("overflow", False) == (s.overflows > 0), f"back-pressure run {i}: overflow flag"


UNARY = {
    "exp": (-14.0, 4.0, [Q.to_raw(11.0), Q.lo, Q.hi, 0]),
    "rsqrt": (0.001, 300.0, [0, -5, 1, Q.hi]),
    "sigmoid": (-20.0, 20.0, [Q.lo, Q.hi, 0]),
    "gelu": (-10.0, 10.0, [Q.lo, Q.hi, 0]),
    "relu": (-5.0, 5.0, [Q.lo, Q.hi]),
    "neg": (-5.0, 5.0, [Q.lo, Q.hi]),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_fixed(op):
    lo, hi, extremes = UNARY[op]
    rng = random.Random(op)
    _check("alu", {"op": op}, [{"a": _val_stream(rng, lo, hi, extremes)} for _ in range(6)])


@pytest.mark.parametrize("op,scalar", [("add_scalar", -0.75), ("mul_scalar", 2.5)])
def test_scalar_fixed(op, scalar):
    rng = random.Random(op)
    _check("alu", {"op": op, "scalar": scalar}, [{"a": _val_stream(rng, -100, 100, [Q.lo, Q.hi])} for _ in range(5)])


def _pair(rng: random.Random, lo: float, hi: float, zeros: bool, num: Numerics = Q) -> dict:
    a = [[num.to_raw(rng.uniform(lo, hi)) for _ in range(rng.randint(0, 5))] for _ in range(rng.randint(1, 4))]
    b = [[0 if zeros and rng.random() < 0.2 else num.to_raw(rng.uniform(lo, hi)) for _ in r] for r in a]
    a.append([num.lo, num.hi, num.hi, 0, num.lo])
    b.append([num.to_raw(-1.0), num.to_raw(0.5), num.to_raw(-0.25), 0, 0])
    return {"a": fiber_stream(a, 2), "b": fiber_stream(b, 2)}


@pytest.mark.parametrize("op", ["mul", "div", "add"])
def test_binary_fixed(op):
    rng = random.Random(op)
    _check("alu", {"op": op}, [_pair(rng, -300, 300, op == "div") for _ in range(6)])


def test_mul_q8_8():
    """The iCE40 format: one 16x16 product (the DSP block), saturation at +-128."""
    num = Numerics.parse("q8.8")
    rng = random.Random(88)
    _check("alu", {"op": "mul"}, [_pair(rng, -40, 40, False, num) for _ in range(6)], HwConfig.for_numerics(num))


def test_div_int():
    rng = random.Random(4)
    runs = []
    for _ in range(4):
        a = [[rng.randint(-1000, 1000) for _ in range(rng.randint(0, 5))] for _ in range(3)]
        b = [[rng.choice([0, rng.randint(-30, 30)]) for _ in r] for r in a]
        a.append([-(2**31), 5])
        b.append([-1, 0])
        runs.append({"a": fiber_stream(a, 2), "b": fiber_stream(b, 2)})
    _check("alu", {"op": "div"}, runs, HwConfig())


@pytest.mark.parametrize("op", ["max", "min"])
def test_alu_identity_empty(op):
    """Max / min taking an ``N`` operand as no value: the same tokens and cycles as sw_sim,
    with ``N`` on either side, both, and negative values (a plain ALU would give 0)."""
    rng = random.Random(op)
    runs = []
    for _ in range(5):
        a, b = [], []
        for t in _val_stream(rng, -20000, 100, [Q.lo]):  # its N tokens: N on both sides
            if isinstance(t, Stop) or t is DONE or t is EMPTY:
                a.append(t)
                b.append(t)
                continue
            side = rng.choice(["both", "a", "b"])  # which sides hold a value
            a.append(t if side != "b" else EMPTY)
            b.append(Q.to_raw(rng.uniform(-20000, 50)) if side != "a" else EMPTY)
        runs.append({"a": a, "b": b})
    _check("alu", {"op": op, "identity_empty": True}, runs)


@pytest.mark.parametrize("op", ["add", "max"])
def test_reduce_fixed(op):
    rng = random.Random(op)
    runs = [{"val": _val_stream(rng, -20000, 20000, [Q.hi, Q.hi, Q.lo])} for _ in range(6)]
    _check("reduce", {"op": op}, runs)


@pytest.mark.parametrize("op", ["add", "max"])
def test_reduce_nonempty(op):
    """Bare stops (empty outer fibers over never-empty inner ones) give no value: the same
    tokens and cycles as sw_sim, at nesting 3 and 4."""
    rng = random.Random(f"nonempty-{op}")
    runs = [{"val": fiber_stream(nonempty_reduce_tree(rng, d), d)} for d in (3, 4, 3, 4, 3)]
    _check("reduce", {"op": op, "nonempty": True}, runs)


def _many_fiber_runs(seed: int, dim: int = 8) -> list[dict]:
    """spacc1 inputs of many outer fibers (nesting 2 and 3, some fibers empty, fibers of
    different sizes so that some ends wait for the previous flush), saturating fixed values."""
    rng = random.Random(seed)
    lo, hi = Q.to_raw(-20000.0), Q.to_raw(20000.0)
    return [spacc1_inputs(*spacc1_tree(rng, depth, rng.randint(6, 14), dim, lo, hi), depth)
            for depth in (2, 3, 2, 3)]


@pytest.mark.parametrize("buffers", [1, 2])
@pytest.mark.parametrize("block_ram", [False, True], ids=["lutram", "block_ram"])
def test_spacc1_fixed(block_ram, buffers):
    """Also with the sums in block RAM (synchronous reads with write forwarding, the iCE40
    build) and double-buffered: the same tokens and cycles as sw_sim, with and without
    back-pressure."""
    rng = random.Random(8)
    runs = []
    for _ in range(5):
        outer = [sorted(rng.sample(range(6), rng.randint(0, 3))) for _ in range(rng.randint(1, 3))]
        inner = [[sorted(rng.sample(range(8), rng.randint(0, 5))) for _ in ks] for ks in outer]
        vals = [[[Q.to_raw(rng.uniform(-20000, 20000)) for _ in f] for f in row] for row in inner]
        runs.append({"outer": fiber_stream(outer, 2), "inner": fiber_stream(inner, 3), "val": fiber_stream(vals, 3)})
    runs += _many_fiber_runs(80)
    _check("spacc1", {"dim": 8, "buffers": buffers}, runs, replace(CFG, spacc_block_ram=block_ram))


STALLS = [(0.5, 0.0, 1), (0.0, 0.6, 2), (0.3, 0.8, 3), (0.7, 0.5, 4)]  # (input gap, output stall, seed)


def _same_tokens_under_stalls(kind: str, params: dict, runs: list[dict], cfg: HwConfig) -> None:
    """Seeded random input gaps and output stalls at several rates: every output port carries
    exactly sw_sim's tokens (none lost, repeated or reordered)."""
    sw = [simulate_primitive(kind, r, numerics=cfg.num, **params) for r in runs]
    for gap, stall, seed in STALLS:
        rtl = run_primitive_batch(kind, [{"inputs": r} for r in runs], cfg=cfg, gap=gap, stall=stall, seed=seed, **params)
        for i, (s, r) in enumerate(zip(sw, rtl, strict=True)):
            for port, toks in s.items():
                assert r[port] == toks, f"gap {gap} stall {stall} run {i} port {port}: " \
                                        f"sw {format_stream(toks)} rtl {format_stream(r[port])}"


@pytest.mark.parametrize("block_ram", [False, True], ids=["lutram", "block_ram"])
def test_spacc1_double_random_stalls(block_ram):
    """Double-buffered, with the flusher held by full outputs while the accumulator runs on,
    and hand-overs waiting for it."""
    _same_tokens_under_stalls("spacc1", {"dim": 8, "buffers": 2}, _many_fiber_runs(81),
                              replace(CFG, spacc_block_ram=block_ram))


@pytest.mark.parametrize("block_ram", [False, True], ids=["lutram", "block_ram"])
def test_spacc1_random_stalls(block_ram):
    """Single bank, a dimension that is not a power of two: the same cycles as sw_sim, and the
    flush (held by full outputs) and the registers that follow the valid bits under input
    gaps and output stalls."""
    runs, cfg = _many_fiber_runs(82, dim=13), replace(CFG, spacc_block_ram=block_ram)
    _check("spacc1", {"dim": 13}, runs, cfg)
    _same_tokens_under_stalls("spacc1", {"dim": 13}, runs, cfg)


@pytest.mark.parametrize("cfg_kw", [{}, {"spacc_block_ram_min_dim": 256}], ids=["lutram", "block_ram_by_width"])
def test_spacc1_wide(cfg_kw):
    """300 entries, sparse fibers: the lowest valid bit found over ten groups of 32 (LUT RAM,
    walking ahead; block RAM, as the ECP5 default picks it from 256 entries, where the
    encoder is the grouped one): the same tokens and cycles as sw_sim."""
    cfg = replace(CFG, **cfg_kw)
    assert spacc_in_block_ram(cfg, 300) == bool(cfg_kw) and not spacc_in_block_ram(cfg, 255)
    _check("spacc1", {"dim": 300}, _many_fiber_runs(83, dim=300), cfg)


def _clustered_runs(seed: int, dim: int) -> list[dict]:
    """spacc1 inputs whose fibers crowd a few groups of 32 valid bits: coordinates within
    each group, across neighbouring groups and arriving below, inside and above the lowest
    one so far (every case of the wide block-RAM accumulator's group walk), plus wide
    spread-out fibers."""
    rng = random.Random(seed)
    lo, hi = Q.to_raw(-20000.0), Q.to_raw(20000.0)

    def fiber() -> list[int]:
        if rng.random() < 0.25:  # spread over the whole width
            return sorted(rng.sample(range(dim), rng.randint(1, 40)))
        centres = [rng.randrange(dim) for _ in range(rng.randint(1, 3))]
        picks = {min(dim - 1, max(0, cc + rng.randint(-40, 40))) for cc in centres for _ in range(rng.randint(1, 12))}
        return sorted(picks)

    runs = []
    for _ in range(4):
        outer = [sorted(rng.sample(range(20), rng.randint(1, 4))) if rng.random() > 0.15 else []
                 for _ in range(rng.randint(2, 5))]
        inner = [[fiber() for _ in ks] for ks in outer]
        vals = [[[rng.randint(lo, hi) for _ in f] for f in row] for row in inner]
        runs.append(spacc1_inputs(outer, inner, vals, 2))
    return runs


@pytest.mark.parametrize("dim", [300, 1433])
def test_spacc1_wide_group_walk(dim):
    """Block RAM from 256 entries (the ECP5 default): the flush walks the valid bits a group
    of 32 at a time (the 1,433-wide one is the Cora GCN's).  The sums equal a numpy
    accumulator's, and tokens and cycles equal sw_sim's, also under input gaps and output
    stalls."""
    cfg = replace(CFG, spacc_block_ram_min_dim=256)
    runs = _clustered_runs(84 + dim, dim)
    for r in runs:
        ref = spacc1_reference(r, dim, lambda a, b: Q.sat(a + b))
        sw = simulate_primitive("spacc1", r, numerics=Q, dim=dim)
        assert sw["crd"] == ref["crd"] and sw["val"] == ref["val"]
    _check("spacc1", {"dim": dim}, runs, cfg)
    _same_tokens_under_stalls("spacc1", {"dim": dim}, runs, cfg)


def test_value_repeat():
    rng = random.Random(3)
    runs = []
    for _ in range(6):
        lengths = [rng.randint(0, 4) for _ in range(rng.randint(1, 5))]
        vals = [Q.to_raw(rng.uniform(-9, 9)) for _ in lengths]
        shape = fiber_stream([[0] * k for k in lengths], 2)
        repsig = ["D" if t is DONE else "S" if isinstance(t, Stop) else "R" for t in shape]
        runs.append({"ref": fiber_stream(vals, 1), "repsig": repsig})
    _check("repeat", {"stream": "val"}, runs)


def _mask_runs(rng: random.Random) -> list[dict]:
    runs = []
    for _ in range(6):
        outer = [i for i in range(12) if rng.random() < 0.7]
        rows = [[j for j in range(12) if rng.random() < 0.5] for _ in outer]
        refs, k = [], 0
        for r in rows:
            refs.append(list(range(k, k + len(r))))
            k += len(r)
        runs.append({"outer": fiber_stream(outer, 1), "inner": fiber_stream(rows, 2), "ref": fiber_stream(refs, 2)})
    return runs


@pytest.mark.parametrize("pred,params", [
    ("causal", {}),
    ("band", {"before": 2, "after": 1}),
    ("block", {"block": 4, "pattern": [[1, 0, 1], [0, 1, 1]]}),
])
def test_crd_mask(pred, params):
    _check("crd_mask", {"pred": pred, **params}, _mask_runs(random.Random(pred)), HwConfig())


def test_stkn_drop():
    rng = random.Random(12)

    def tree(depth):
        if depth == 1:
            return [rng.randint(0, 9) for _ in range(rng.choice([0, 0, 1, 2]))]
        return [tree(depth - 1) for _ in range(rng.randint(0, 3))]

    runs = [{"in": fiber_stream(tree(d), d)} for d in (1, 2, 3, 3, 2, 3, 3)]
    _check("stkn_drop", {}, runs, HwConfig())


def test_softmax_graph_rtl_matches_sw_and_numpy():
    rng = np.random.default_rng(5)
    a = random_csr_values(rng, 6, 10)
    g = softmax_graph(6, 10)
    data = {"A": TensorData.from_dense(Q.quantize(a), CSR)}
    sw = run_graph(g, data, numerics=Q)
    rtl = rtl_run_graph(g, data, cfg=CFG, runner="amaranth")
    np.testing.assert_array_equal(rtl.outputs["C"].vals, sw.outputs["C"].vals)
    np.testing.assert_array_equal(rtl.outputs["C"].to_dense(), sw.outputs["C"].to_dense())
    assert rtl.cycles == sw.cycles
    ref = sparse_softmax_ref(Q.dequantize(Q.quantize(a)))
    np.testing.assert_allclose(Q.dequantize(rtl.outputs["C"].to_dense()), ref, atol=4 * 2.0**-Q.frac)


@pytest.mark.parametrize("buffers", [1, 2])
def test_spacc2_fixed(buffers):
    vecs = spacc2_vectors(random.Random(21), 8)
    rng = random.Random(22)
    many = [spacc2_many_fibers(rng, n)[1] for n in (8, 12, 16)]
    runs = [{**inp, "val": [Q.to_raw(v * 1000.5) if isinstance(v, int) else v for v in inp["val"]]}
            for inp in [inp for inp, _ in vecs] + many]
    _check("spacc2", {"dim0": 4, "dim1": 6, "buffers": buffers}, runs)
    if buffers == 2:
        _same_tokens_under_stalls("spacc2", {"dim0": 4, "dim1": 6, "buffers": 2}, runs, CFG)


def test_repsig_on_values():
    """The repeat signal of a value stream (used by the lowerings): words read at the value width."""
    rng = random.Random(13)
    _check("repsig", {"stream": "val"}, [{"in": _val_stream(rng, -30000, 30000, [Q.lo, Q.hi, 1 << 16])}
                                          for _ in range(4)], HwConfig())


def test_layernorm_graph_rtl_matches_sw_and_numpy():
    x = np.random.default_rng(6).normal(0.5, 3.0, (4, 8))
    g = layernorm_graph(4, 8)
    data = {"A": TensorData.from_dense(Q.quantize(x), DENSE2)}
    sw = run_graph(g, data, numerics=Q)
    rtl = rtl_run_graph(g, data, cfg=CFG, runner="amaranth")
    np.testing.assert_array_equal(rtl.outputs["C"].vals, sw.outputs["C"].vals)
    assert rtl.cycles == sw.cycles
    got = Q.dequantize(rtl.outputs["C"].to_dense())
    np.testing.assert_allclose(got, layernorm_ref(Q.dequantize(Q.quantize(x))), atol=2e-4)
