"""hw.dsp: the ECP5 variant of a multiplier lane (``MULT18X18D`` with its own input and output
registers) computes what the generic one does, cycle for cycle.

The block cannot run in a simulator, so the test stands a behavioural model of it in for the
``Instance``, written from the primitive's documented behaviour (operands registered on ``CLK0``
when the clock enable named by ``REG_INPUTA_CE`` / ``REG_INPUTB_CE`` is high, the product of the
registered operands, two's complement when ``SIGNEDA`` / ``SIGNEDB``, registered when the one named
by ``REG_OUTPUT_CE`` is high), and runs whole kernels through the amaranth simulator with it:
outputs equal numpy's and the generic build's, cycles equal sw_sim's."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Cat, Elaboratable, Module, Signal, signed
from amaranth.sim import Simulator
from amaranth_boards.icebreaker import ICEBreakerPlatform
from amaranth_boards.ulx3s import ULX3S_85F_Platform

import hw.dsp
from fuseflow.ir.numerics import Mode, Numerics
from fuseflow.ir.samml import AluOp
from fuseflow.ir.tensor import TensorData
from fuseflow.ir.tokens import DONE
from fuseflow.kernels import example
from hw.alu import Alu
from hw.dsp import ECP5_DSP_WIDTH, is_ecp5
from hw.elaborate import HwConfig
from hw.word import decode_word, encode_word
from rtl_sim import run_graph
from sw_sim import run_graph as sw_run_graph


class Mult18x18dModel(Elaboratable):
    """A ``MULT18X18D`` configured as hw.dsp configures it: input and output registers."""

    def __init__(self, **kw) -> None:
        p = {k[2:]: v for k, v in kw.items() if k.startswith("p_")}
        assert p["REG_INPUTA_CLK"] == p["REG_INPUTB_CLK"] == p["REG_OUTPUT_CLK"] == "CLK0"
        assert p["REG_PIPELINE_CLK"] == p["REG_INPUTC_CLK"] == "NONE"
        self.ports, self.p = kw, p

    def _pins(self, prefix: str, n: int):
        return [self.ports[f"{prefix}{k}"] for k in range(n)]

    def elaborate(self, platform) -> Module:
        m = Module()
        n = ECP5_DSP_WIDTH
        a, b = Signal(signed(n)), Signal(signed(n))
        pr = Signal(signed(2 * n))
        ce = {f"CE{k}": self.ports[f"i_CE{k}"] for k in range(2)}
        assert self.ports["i_SIGNEDA"].value == 1 and self.ports["i_SIGNEDB"].value == 1
        with m.If(ce[self.p["REG_INPUTA_CE"]]):
            m.d.sync += a.eq(Cat(*self._pins("i_A", n)))
        with m.If(ce[self.p["REG_INPUTB_CE"]]):
            m.d.sync += b.eq(Cat(*self._pins("i_B", n)))
        with m.If(ce[self.p["REG_OUTPUT_CE"]]):
            m.d.sync += pr.eq(a * b)
        m.d.comb += [o.eq(pr[k]) for k, o in enumerate(self._pins("o_P", 2 * n))]
        return m


def test_is_ecp5_knows_the_family():
    assert is_ecp5(ULX3S_85F_Platform()) and not is_ecp5(None)
    assert not is_ecp5(ICEBreakerPlatform())


@pytest.mark.parametrize(("label", "cfg"), [
    ("int32: four 16-bit products", HwConfig()),
    ("q16.16: four products, rounded sum", HwConfig(numerics=Numerics.parse("q16.16"))),
    ("int16: one product", HwConfig(cw=10, vw=16)),
])
def test_ecp5_blocks_equal_the_generic_multiplier(monkeypatch, label, cfg):
    g, data, _, ref = example("spmv", 12, seed=4, density=0.4)
    if cfg.numerics is not None:  # fixed point: fractional values
        q = cfg.numerics
        data = {k: TensorData.from_dense(q.quantize(d.to_dense() / 8.0), g.tensors[k].fmt) for k, d in data.items()}
        ref = ref / 64.0
    generic = run_graph(g, data, runner="amaranth", cfg=cfg)
    made: list[Mult18x18dModel] = []

    def instance(name, **kw):
        assert name == "MULT18X18D"
        made.append(Mult18x18dModel(**kw))
        return made[-1]

    monkeypatch.setattr(hw.dsp, "is_ecp5", lambda platform: True)
    monkeypatch.setattr(hw.dsp, "Instance", instance)
    ecp5 = run_graph(g, data, runner="amaranth", cfg=cfg)
    assert made, f"{label}: no DSP block was instantiated"
    assert len(made) == (1 if cfg.vw <= ECP5_DSP_WIDTH else 4), label
    sw = sw_run_graph(g, data, numerics=cfg.num)
    assert ecp5.cycles == generic.cycles == sw.cycles, label
    assert np.array_equal(ecp5.outputs["y"].vals, generic.outputs["y"].vals), label
    if cfg.numerics is None:
        assert np.array_equal(ecp5.outputs["y"].to_dense(), ref), label
    else:
        got = cfg.numerics.dequantize(ecp5.outputs["y"].to_dense())
        assert np.allclose(got, ref, atol=12 * 2.0 ** -16), label


def _mul_trace(num: Numerics, vw: int, tokens_a, tokens_b, seed: int) -> list[tuple[int, int]]:
    """(cycle, word) of every output handshake of a lone multiplier fed with gaps and drained
    with stalls (seeded): the operand and product registers' enables under back-pressure."""
    dut = Alu(op=AluOp.MUL, vw=vw, numerics=num)
    rng = random.Random(seed)
    out: list[tuple[int, int]] = []
    words_a = [encode_word(t, vw) for t in tokens_a]
    words_b = [encode_word(t, vw) for t in tokens_b]

    async def bench(ctx):
        k, cycle = 0, 0
        while cycle < 40 * len(words_a):
            offer = k < len(words_a) and rng.random() < 0.7
            ctx.set(dut.i_a.valid, offer)
            ctx.set(dut.i_b.valid, offer)
            if offer:
                ctx.set(dut.i_a.payload, words_a[k])
                ctx.set(dut.i_b.payload, words_b[k])
            ctx.set(dut.o_val.ready, rng.random() < 0.5)
            await ctx.delay(1e-9)
            if offer and ctx.get(dut.i_a.ready):
                k += 1
            if ctx.get(dut.o_val.valid) and ctx.get(dut.o_val.ready):
                out.append((cycle, ctx.get(dut.o_val.payload)))
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize(("num", "vw"), [(Numerics.integer(32), 32), (Numerics.parse("q16.16"), 32),
                                         (Numerics.integer(16), 16)])
def test_ecp5_blocks_hold_under_back_pressure(monkeypatch, num, vw):
    """Input gaps and output stalls: the same handshakes, cycle by cycle, and the products
    (or their fixed-point roundings) of the operands."""
    rng = random.Random(7)
    lx, ly = 1 << (vw - 12), 1 << 10  # x spans both halves; every product fits vw bits
    xs, ys = [rng.randrange(-lx, lx) for _ in range(40)], [rng.randrange(-ly, ly) for _ in range(40)]
    ta = [*xs, DONE]
    tb = [*ys, DONE]
    generic = _mul_trace(num, vw, ta, tb, seed=3)
    monkeypatch.setattr(hw.dsp, "is_ecp5", lambda platform: True)
    monkeypatch.setattr(hw.dsp, "Instance", lambda name, **kw: Mult18x18dModel(**kw))
    ecp5 = _mul_trace(num, vw, ta, tb, seed=3)
    assert ecp5 == generic
    got = [decode_word(w, vw, signed=True) for _, w in ecp5]
    assert got[-1] == DONE and len(got) == len(xs) + 1
    want = [x * y if num.mode is not Mode.FIXED else (x * y + (1 << (num.frac - 1))) >> num.frac
            for x, y in zip(xs, ys)]
    assert got[:-1] == want
