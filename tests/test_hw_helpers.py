"""Small logic helpers of the RTL primitives against their reference behaviour (Amaranth's
simulator, every input for narrow widths, random and one-hot inputs for wider ones)."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hw.accumulate import isolate_lowest
from hw.accumulate import lowest_bit as _lowest_bit
from hw.accumulate import lowest_bit_grouped as _lowest_bit_grouped


@pytest.mark.parametrize(("helper", "n"), [(helper, n) for helper in (_lowest_bit, _lowest_bit_grouped)
                                           for n in (1, 2, 3, 5, 8, 16, 34, 100, 200)])
def test_lowest_bit(helper, n: int) -> None:
    """The index of the lowest set bit (0 when none) and the bits without it, as Python
    computes them (the random values include sparse ones, whose lowest bit lies in a late
    group of the isolation)."""
    m = Module()
    x = Signal(n)
    index, rest = helper(m, x, n, "t")
    rng = random.Random(n)
    if n <= 8:
        values = list(range(1 << n))
    else:
        count = 2000 if n < 100 else 150
        values = [rng.getrandbits(n) for _ in range(count)] + [1 << k for k in range(n)] + [0]
        values += [sum(1 << k for k in rng.sample(range(n), rng.randint(1, 3))) for _ in range(count)]
    bad: list[str] = []

    async def bench(ctx):
        for v in values:
            ctx.set(x, v)
            want_index = (v & -v).bit_length() - 1 if v else 0
            want_rest = v & (v - 1)
            got = (ctx.get(index), ctx.get(rest))
            if got != (want_index, want_rest):
                bad.append(f"{v:#x}: got {got}, want {(want_index, want_rest)}")

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:5]


@pytest.mark.parametrize(("n", "group"), [(7, 2), (9, 4), (100, 4), (70, 32), (64, 32)])
def test_isolate_lowest_in_groups(n: int, group: int) -> None:
    """``x & -x`` from groups of ``group`` bits, up to three levels of groups deep (100 bits in
    fours: 25 groups, then 7, then 2), equals Python's for every tested value: all of a few
    bits, random ones, sparse ones and each single bit."""
    m = Module()
    x = Signal(n)
    low = Signal(n)
    m.d.comb += low.eq(isolate_lowest(m, x, n, "t", group))
    rng = random.Random(n * group)
    values = list(range(1 << n)) if n <= 9 else (
        [rng.getrandbits(n) for _ in range(300)] + [1 << k for k in range(n)] + [0]
        + [sum(1 << k for k in rng.sample(range(n), rng.randint(1, 3))) for _ in range(300)])
    bad: list[str] = []

    async def bench(ctx):
        for v in values:
            ctx.set(x, v)
            if ctx.get(low) != v & -v:
                bad.append(f"{v:#x}: got {ctx.get(low):#x}, want {v & -v:#x}")

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:5]
