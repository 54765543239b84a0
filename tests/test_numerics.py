"""fuseflow.ir.numerics: rounding / saturation against exact rational arithmetic, and the
approximation error of the table-based nonlinear functions against ``math``."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from fuseflow.ir.numerics import DEFAULT_FIXED, FLOAT, INT32, Mode, Numerics, tables
from fuseflow.ir.samml import AluOp, NodeKind, ReduceOp
from hw.elaborate import HwConfig, make_primitive

Q = DEFAULT_FIXED
LSB = 2.0**-Q.frac


def _round_half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def _clamp(v: int, num: Numerics) -> int:
    return max(-(2 ** (num.width - 1)), min(2 ** (num.width - 1) - 1, v))


def _raws(rng: random.Random, num: Numerics, n: int = 400) -> list[int]:
    edge = [0, 1, -1, num.lo, num.hi, num.lo + 1, 1 << num.frac, -(1 << num.frac)]
    small = [rng.randint(-(8 << num.frac), 8 << num.frac) for _ in range(n)]
    big = [rng.randint(num.lo, num.hi) for _ in range(n // 4)]
    return edge + small + big


@pytest.mark.parametrize("num", [Q, Numerics.fixed(8, 8), Numerics.fixed(4, 12)], ids=str)
def test_fixed_mul_div_add_match_exact_rationals(num):
    rng = random.Random(1)
    xs = _raws(rng, num)
    ys = _raws(rng, num)
    rng.shuffle(ys)
    scale = 2**num.frac
    for a, b in zip(xs, ys):
        assert num.add(a, b) == _clamp(a + b, num)
        assert num.sub(a, b) == _clamp(a - b, num)
        assert num.mul(a, b) == _clamp(_round_half_up(Fraction(a * b, scale)), num)
        if b:
            assert num.div(a, b) == _clamp(_round_half_up(Fraction(a * scale, b)), num), (a, b)
        else:
            assert num.div(a, b) == (0 if a == 0 else num.hi if a > 0 else num.lo)


def test_int_mode_wraps_like_int32():
    rng = random.Random(2)
    for _ in range(500):
        a, b = rng.randint(-(2**31), 2**31 - 1), rng.randint(-(2**31), 2**31 - 1)
        with np.errstate(over="ignore"):
            assert INT32.add(a, b) == int(np.int32(a) + np.int32(b))
            assert INT32.mul(a, b) == int(np.int32(a) * np.int32(b))
        assert INT32.div(a, b) == int(np.int64(a) // np.int64(b)) if b and (a, b) != (-(2**31), -1) else True
    assert INT32.div(-(2**31), -1) == -(2**31)  # wraps
    assert INT32.div(7, 0) == INT32.hi and INT32.div(-7, 0) == INT32.lo and INT32.div(0, 0) == 0
    assert INT32.add(1.5, 2.0) == 3.5  # float tokens pass through int mode unchanged (old behaviour)


def test_conversions_round_half_up_and_saturate():
    assert Q.to_raw(1.0) == 65536
    assert Q.to_raw(0.5 * LSB) == 1 and Q.to_raw(-0.5 * LSB) == 0 and Q.to_raw(-0.75 * LSB) == -1
    assert Q.to_raw(1e9) == Q.hi and Q.to_raw(-1e9) == Q.lo
    assert Q.from_raw(Q.to_raw(-3.25)) == -3.25
    arr = np.array([[0.0, 1.5, -2.25], [1e9, -1e9, 0.5 * LSB]])
    np.testing.assert_array_equal(Q.quantize(arr), [[0, 98304, -147456], [Q.hi, Q.lo, 1]])
    np.testing.assert_allclose(Q.dequantize(Q.quantize(arr[:1])), arr[:1])
    with pytest.raises(ValueError, match="not an integer"):
        INT32.to_raw(0.5)


def test_parse_and_text():
    assert Numerics.parse("q16.16") == Q and str(Q) == "q16.16"
    assert Numerics.parse("int16") == Numerics.integer(16) and str(INT32) == "int32"
    assert Numerics.parse("float") is FLOAT
    for bad in ("q16", "fp32", "q1.40"):
        with pytest.raises(ValueError, match=repr(bad)[1:-1] if bad != "q1.40" else "fraction bits"):
            Numerics.parse(bad)


def test_reduce_init():
    assert Q.reduce_init(ReduceOp.MAX) == Q.lo and Q.reduce_init(ReduceOp.ADD) == 0
    assert FLOAT.reduce_init(ReduceOp.MAX) == -math.inf


def _err(num: Numerics, op: AluOp, xs, exact) -> tuple[float, float]:
    """Max absolute error, and max relative error beyond the output's half-LSB quantisation."""
    f = num.unop(op)
    half = 0.5 * 2.0**-num.frac
    abs_e = rel_e = 0.0
    for x in xs:
        raw = num.to_raw(x)
        xq = num.from_raw(raw)  # the function is judged on the quantised input
        got, want = num.from_raw(f(raw)), exact(xq)
        abs_e = max(abs_e, abs(got - want))
        rel_e = max(rel_e, max(abs(got - want) - half, 0.0) / max(abs(want), 1e-300))
    return abs_e, rel_e


def test_exp_error():
    xs = np.linspace(-16, 10, 20001)
    abs_e, _ = _err(Q, AluOp.EXP, xs[xs <= 0], math.exp)
    assert abs_e <= 1.5 * LSB  # softmax range: within 1.5 LSB
    _, rel_e = _err(Q, AluOp.EXP, xs[xs > 0], math.exp)
    assert rel_e < 2e-5
    assert Q.from_raw(Q.exp(Q.to_raw(11.0))) == Q.from_raw(Q.hi)  # e**11 > 32767: saturates
    assert Q.exp(Q.lo) == 0


def test_rsqrt_error():
    xs = np.geomspace(2.0**-10, 2.0**14, 20001)
    _, rel_e = _err(Q, AluOp.RSQRT, xs, lambda x: 1 / math.sqrt(x))
    assert rel_e < 3e-5
    assert Q.rsqrt(0) == Q.hi and Q.rsqrt(-5) == Q.hi


@pytest.mark.parametrize("op,exact,bound", [
    (AluOp.SIGMOID, lambda x: 1 / (1 + math.exp(-x)), 1.5 * LSB),
    (AluOp.GELU, lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))), 2.5 * LSB),
], ids=["sigmoid", "gelu"])
def test_pwl_error(op, exact, bound):
    xs = np.linspace(-20, 20, 40001)
    abs_e, _ = _err(Q, op, xs, exact)
    assert abs_e <= bound


def test_tables_are_fixed_only_and_shared():
    assert tables(Q) is tables(Numerics.fixed(16, 16))  # generated once per format
    with pytest.raises(ValueError, match="fixed-point"):
        tables(INT32)
    with pytest.raises(ValueError, match="node 'e'.*needs fixed-point or float"):
        INT32.unop(AluOp.EXP, where="node 'e'")


def test_float_mode_is_exact():
    assert FLOAT.unop(AluOp.EXP)(1.0) == math.e
    assert FLOAT.div(1.0, 4.0) == 0.25 and FLOAT.div(-1.0, 0.0) == -math.inf
    assert FLOAT.unop(AluOp.MUL_SCALAR, 0.5)(3.0) == 1.5


def test_scalar_quantised_by_mode():
    assert Q.unop(AluOp.ADD_SCALAR, 0.5)(Q.to_raw(1.0)) == Q.to_raw(1.5)
    assert Q.unop(AluOp.MUL_SCALAR, -2.0)(Q.to_raw(3.0)) == Q.to_raw(-6.0)
    assert INT32.unop(AluOp.MUL_SCALAR, 3)(5) == 15
    with pytest.raises(ValueError, match="node 'm'.*not an integer"):
        INT32.unop(AluOp.ADD_SCALAR, 0.5, where="node 'm'")


def test_hwconfig_numerics():
    cfg = HwConfig.for_numerics("q8.8")
    assert cfg.vw == 16 and cfg.num == Numerics.fixed(8, 8)
    assert HwConfig().num == INT32
    with pytest.raises(ValueError, match="vw=32"):
        HwConfig(numerics=Numerics.fixed(8, 8))
    with pytest.raises(ValueError, match="sw_sim only"):
        HwConfig(numerics=FLOAT)
    with pytest.raises(ValueError, match="exp needs fixed-point or float numerics, not int32"):
        make_primitive(NodeKind.ALU, {"op": AluOp.EXP}, HwConfig())
    comp, _ = make_primitive(NodeKind.ALU, {"op": AluOp.EXP}, cfg)
    assert comp.num == cfg.num


def test_invalid_formats():
    with pytest.raises(ValueError, match="width 70"):
        Numerics(Mode.INT, 70)
    with pytest.raises(ValueError, match="Q31.0|fraction"):
        Numerics(Mode.FIXED, 31, 0)


# ----------------------------------------------------------------------------- model-level tolerance
def _fixed_ops(num: Numerics):
    """Matrix helpers that apply the fixed-point rules element by element, as the dataflow does
    (each product rounded, then a saturating accumulate)."""

    def mm(a, b):
        out = np.empty((a.shape[0], b.shape[1]), dtype=object)
        for i in range(a.shape[0]):
            for j in range(b.shape[1]):
                acc = 0
                for k in range(a.shape[1]):
                    acc = num.add(acc, num.mul(int(a[i, k]), int(b[k, j])))
                out[i, j] = acc
        return out

    def un(op, x, s=0.0):
        return np.vectorize(num.unop(op, s), otypes=[object])(x)

    def add(x, y):
        return np.vectorize(num.add, otypes=[object])(x, y)

    def softmax_row(r):
        m = max(r)
        e = [num.exp(num.sub(v, m)) for v in r]
        s = 0
        for v in e:
            s = num.add(s, v)
        return [num.div(v, s) for v in e]

    def layernorm(x):
        n = x.shape[1]
        out = np.empty_like(x)
        for i, r in enumerate(x):
            s = 0
            for v in r:
                s = num.add(s, v)
            mean = num.mul(s, num.to_raw(1 / n))
            xc = [num.sub(v, mean) for v in r]
            s2 = 0
            for v in xc:
                s2 = num.add(s2, num.mul(v, v))
            inv = num.rsqrt(num.add(num.mul(s2, num.to_raw(1 / n)), num.to_raw(1e-5)))
            out[i] = [num.mul(v, inv) for v in xc]
        return out

    return mm, un, add, softmax_row, layernorm


def model_errors(num: Numerics, seed: int = 0) -> dict[str, float]:
    """Max error relative to the output scale of a GCN layer, a GraphSAGE (mean) layer, a sparse
    autoencoder and a one-head causal GPT block, fixed point vs float64 numpy."""
    rng = np.random.default_rng(seed)
    mm, un, add, softmax_row, layernorm = _fixed_ops(num)

    def q(a):
        return num.quantize(a).astype(object)

    def dq(a):
        return num.dequantize(a.astype(np.int64))

    def rel(got, ref):
        return float(np.abs(got - ref).max() / np.abs(ref).max())

    n, f = 24, 8
    adj = (rng.random((n, n)) < 0.2).astype(float)
    adj = np.maximum(adj, adj.T) + np.eye(n)
    deg = adj.sum(1)
    ahat = adj / np.sqrt(np.outer(deg, deg))
    x = rng.normal(0, 1, (n, f))
    w = rng.normal(0, 1 / math.sqrt(f), (f, f))
    out = {"gcn": rel(dq(un(AluOp.RELU, mm(mm(q(ahat), q(x)), q(w)))), np.maximum(ahat @ x @ w, 0))}
    amean = adj / deg[:, None]
    w2 = rng.normal(0, 1 / math.sqrt(2 * f), (2 * f, f))
    ref = np.maximum(np.hstack([x, amean @ x]) @ w2, 0)
    out["graphsage"] = rel(dq(un(AluOp.RELU, mm(np.hstack([q(x), mm(q(amean), q(x))]), q(w2)))), ref)
    we = rng.normal(0, 1 / math.sqrt(f), (f, 32))
    we[rng.random(we.shape) < 0.7] = 0
    wd = rng.normal(0, 1 / math.sqrt(32), (32, f))
    ref = 1 / (1 + np.exp(-(np.maximum(x @ we, 0) @ wd)))
    out["autoencoder"] = rel(dq(un(AluOp.SIGMOID, mm(un(AluOp.RELU, mm(q(x), q(we))), q(wd)))), ref)

    t, dm = 8, 16
    xs = rng.normal(0, 1, (t, dm))
    wq, wk, wv, wo = (rng.normal(0, 1 / math.sqrt(dm), (dm, dm)) for _ in range(4))
    w1 = rng.normal(0, 1 / math.sqrt(dm), (dm, 4 * dm))
    w2m = rng.normal(0, 1 / math.sqrt(4 * dm), (4 * dm, dm))

    def ln(a):
        return (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, keepdims=True) + 1e-5)

    h = ln(xs)
    s = (h @ wq) @ (h @ wk).T / math.sqrt(dm) + np.triu(np.full((t, t), -1e9), 1)
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    x1 = xs + p @ (h @ wv) @ wo
    ref = x1 + (0.5 * (z := ln(x1) @ w1) * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))) @ w2m
    hq = layernorm(q(xs))
    sq = un(AluOp.MUL_SCALAR, mm(mm(hq, q(wq)), mm(hq, q(wk)).T), 1 / math.sqrt(dm))
    pq = np.zeros_like(sq)
    for i in range(t):  # causal: the mask keeps j <= i
        pq[i, : i + 1] = softmax_row(list(sq[i, : i + 1]))
    x1q = add(q(xs), mm(mm(pq, mm(hq, q(wv))), q(wo)))
    outq = add(x1q, mm(un(AluOp.GELU, mm(layernorm(x1q), q(w1))), q(w2m)))
    out["gpt_block"] = rel(dq(outq), ref)
    return out


def test_default_format_keeps_models_within_tolerance():
    errs = model_errors(Q)
    assert max(errs.values()) < 5e-4, errs
    coarse = model_errors(Numerics.fixed(8, 8))  # the 16-bit alternative is visibly worse
    assert max(coarse.values()) > 2e-3, coarse
