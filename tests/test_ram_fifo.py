"""hw.fifo.RamFIFO and HeadFIFO against Amaranth's SyncFIFO (the channel FIFO of the timing contract): the
same w_rdy, r_rdy and level in every cycle, and the same r_data whenever r_rdy, on random
traffic (bursts of writes, of reads, both, and back-pressure from either side)."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib.fifo import SyncFIFO
from amaranth.sim import Simulator

from hw.fifo import HeadFIFO, RamFIFO


@pytest.mark.parametrize("cls,depth", [(RamFIFO, 2), (RamFIFO, 3), (RamFIFO, 5), (RamFIFO, 16),
                                       (HeadFIFO, 2), (HeadFIFO, 3), (HeadFIFO, 4), (HeadFIFO, 7)])
def test_fifo_matches_sync_fifo(cls, depth: int) -> None:
    m = Module()
    ref = m.submodules.ref = SyncFIFO(width=12, depth=depth)
    dut = m.submodules.dut = cls(width=12, depth=depth)
    rng = random.Random(depth)
    mismatches: list[str] = []
    seen = {"reads": 0, "full": 0}

    async def bench(ctx):
        for cycle in range(3000):
            phase = (cycle // 200) % 4  # write-heavy, read-heavy, balanced, random
            pw, pr = [(0.9, 0.2), (0.2, 0.9), (0.6, 0.6), (0.5, 0.5)][phase]
            w_en, r_en, data = rng.random() < pw, rng.random() < pr, rng.randrange(1 << 12)
            for f in (ref, dut):
                ctx.set(f.w_en, w_en)
                ctx.set(f.r_en, r_en)
                ctx.set(f.w_data, data)
            got = {s: (ctx.get(getattr(ref, s)), ctx.get(getattr(dut, s))) for s in ("w_rdy", "r_rdy", "level")}
            for s, (a, b) in got.items():
                if a != b:
                    mismatches.append(f"cycle {cycle}: {s} SyncFIFO {a}, {cls.__name__} {b}")
            if got["r_rdy"][0]:
                a, b = ctx.get(ref.r_data), ctx.get(dut.r_data)
                if a != b:
                    mismatches.append(f"cycle {cycle}: r_data SyncFIFO {a}, {cls.__name__} {b}")
                seen["reads"] += r_en
            seen["full"] += not got["w_rdy"][0]
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert not mismatches, mismatches[:5]
    assert seen["reads"] > 500 and seen["full"] > 10  # the traffic filled and drained it


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_ram_fifo_rejects_depth_1() -> None:
    with pytest.raises(ValueError, match="RamFIFO depth 1"):
        RamFIFO(width=8, depth=1)
    with pytest.raises(ValueError, match="HeadFIFO depth 1"):
        HeadFIFO(width=8, depth=1)
