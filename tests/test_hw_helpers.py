"""Small logic helpers of the RTL primitives against their reference behaviour (Amaranth's
simulator, every input for narrow widths, random and one-hot inputs for wider ones)."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hw.accumulate import lowest_bit as _lowest_bit
from hw.accumulate import lowest_bit_grouped as _lowest_bit_grouped


@pytest.mark.parametrize("helper", [_lowest_bit, _lowest_bit_grouped], ids=["carry", "grouped"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16, 34])
def test_lowest_bit(helper, n: int) -> None:
    """The index of the lowest set bit (0 when none) and the bits without it, as Python
    computes them."""
    m = Module()
    x = Signal(n)
    index, rest = helper(m, x, n, "t")
    rng = random.Random(n)
    if n <= 8:
        values = list(range(1 << n))
    else:
        values = [rng.getrandbits(n) for _ in range(2000)] + [1 << k for k in range(n)] + [0]
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
