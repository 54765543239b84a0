"""Embedding a whole generated graph top in your own Amaranth design (docs/embedding.md).

``SpmvSystem`` is a user component that holds the SpMV graph top of fuseflow-hw
(:class:`hw.elaborate.GraphTop` of the built-in ``spmv`` kernel, ``y = B @ c``) as a submodule
and passes its host port through, with one extra output of its own (``busy``).  :func:`simulate`
loads ``B`` (CSR) and ``c`` through the host port under ``amaranth.sim``, starts the graph, waits
for ``done`` and reads the cycle counter and ``y`` back.  Run as a script it prints them::

    python examples/embed_graph.py
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from fuseflow.ir.tensor import TensorData
from fuseflow.kernels import KERNELS
from hw.elaborate import REG_CTRL, REG_CYCLES, GraphTop, HwConfig

__all__ = ["SpmvSystem", "simulate"]


class SpmvSystem(wiring.Component):
    """The SpMV graph top of an ``n`` x ``n`` matrix behind the user's own ports."""

    def __init__(self, n: int) -> None:
        self.graph = KERNELS["spmv"](n)
        self.top = GraphTop(self.graph, HwConfig(cw=16, vw=32))
        self.mmap = self.top.mmap  # where each array lives on the host port
        super().__init__({"addr": In(self.mmap.addr_width), "wdata": In(32), "we": In(1),
                          "rdata": Out(32), "done": Out(1), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.spmv = top = self.top
        m.d.comb += [top.host_addr.eq(self.addr), top.host_wdata.eq(self.wdata), top.host_we.eq(self.we),
                     self.rdata.eq(top.host_rdata), self.done.eq(top.done),
                     self.busy.eq(top.running & ~top.done)]
        return m


def simulate(b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, int]:
    """``y = b @ c`` computed by the graph top under amaranth.sim; returns ``(y, cycles)``."""
    n = len(c)
    dut = SpmvSystem(n)
    data = {"B": TensorData.from_dense(b, dut.graph.tensors["B"].fmt),
            "c": TensorData.from_dense(c, dut.graph.tensors["c"].fmt)}
    result: dict = {}

    async def bench(ctx):
        async def write(addr, value):  # one word a cycle
            ctx.set(dut.addr, addr)
            ctx.set(dut.wdata, int(value) & 0xFFFF_FFFF)
            ctx.set(dut.we, 1)
            await ctx.tick()
            ctx.set(dut.we, 0)

        async def read(addr):  # the word of an address arrives one cycle later
            ctx.set(dut.addr, addr)
            await ctx.tick()
            return ctx.get(dut.rdata)

        for t, td in data.items():  # every array of every input tensor into its region
            for array, values in td.arrays().items():
                name = f"{t}.{array}"
                if name in [r.name for r in dut.mmap.regions]:
                    base = dut.mmap.region(name).base
                    for i, v in enumerate(values):
                        await write(base + i, v)
        await write(REG_CTRL, 1)  # clear and start
        await ctx.tick().until(dut.done)
        result["cycles"] = await read(REG_CYCLES)
        region = dut.mmap.region("y.vals")  # the output: a dense vector of n values
        words = [await read(region.base + i) for i in range(n)]
        result["y"] = np.array([w - (1 << 32) if w >> 31 else w for w in words])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result["y"], result["cycles"]


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    b = rng.integers(-5, 6, (8, 8)) * (rng.random((8, 8)) < 0.3)
    c = rng.integers(-5, 6, 8)
    y, cycles = simulate(b, c)
    print("y      ", y.tolist())
    print("numpy  ", (b @ c).tolist())
    print(f"{cycles} cycles")
