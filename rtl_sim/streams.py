"""Reusable cocotb helpers: stream driver / monitor with seeded random valid gaps and ready
back-pressure, and the host-port bus master.  They follow Amaranth's stream rules: the driver
holds ``valid`` and ``payload`` until the beat is taken; ready may change every cycle.

Each helper works per clock cycle: after a rising edge it sets its outputs for the cycle, then
samples in the read-only phase whether a transfer happens at the next edge.
"""

from __future__ import annotations

import random

from cocotb.triggers import ReadOnly, RisingEdge

__all__ = ["HostPort", "StreamDriver", "StreamMonitor", "port_signal"]


def port_signal(dut, prefix: str, member: str):
    return getattr(dut, f"{prefix}__{member}")


class StreamDriver:
    """Drives ``words`` into stream port ``prefix``; ``gap`` is the chance of idling a cycle."""

    def __init__(self, dut, prefix: str, words: list[int], *, gap: float = 0.0, seed: int = 0) -> None:
        self.clk = dut.clk
        self.valid = port_signal(dut, prefix, "valid")
        self.payload = port_signal(dut, prefix, "payload")
        self.ready = port_signal(dut, prefix, "ready")
        self.words = list(words)
        self.gap = gap
        self.rng = random.Random(seed)
        self.valid.value = 0

    async def run(self) -> None:
        i = 0
        holding = False
        while i < len(self.words):
            if holding or self.rng.random() >= self.gap:
                self.valid.value = 1
                self.payload.value = self.words[i]
                holding = True
            else:
                self.valid.value = 0
            await ReadOnly()
            if holding and int(self.ready.value):
                i += 1
                holding = False
            await RisingEdge(self.clk)
        self.valid.value = 0


class StreamMonitor:
    """Collects words from stream port ``prefix`` until a done word; ``stall`` is the chance of
    dropping ready in a cycle.  ``last_cycle`` is the cycle of the last transfer."""

    def __init__(self, dut, prefix: str, width: int, *, stall: float = 0.0, seed: int = 0) -> None:
        self.clk = dut.clk
        self.valid = port_signal(dut, prefix, "valid")
        self.payload = port_signal(dut, prefix, "payload")
        self.ready = port_signal(dut, prefix, "ready")
        self.width = width
        self.stall = stall
        self.rng = random.Random(seed)
        self.words: list[int] = []
        self.last_cycle = -1
        self.ready.value = 0

    def _is_done(self, word: int) -> bool:
        return bool(word >> self.width & 1) and (word >> 8 & 3) == 1

    async def run(self, cycle_ref: list[int], limit: int) -> None:
        while True:
            self.ready.value = 0 if self.rng.random() < self.stall else 1
            await ReadOnly()
            if int(self.valid.value) and int(self.ready.value):
                w = int(self.payload.value)
                self.words.append(w)
                self.last_cycle = cycle_ref[0]
                if self._is_done(w):
                    await RisingEdge(self.clk)
                    self.ready.value = 0
                    return
            if cycle_ref[0] > limit:
                raise TimeoutError(f"no done word on {self.valid._name[:-7]} after {limit} cycles")
            await RisingEdge(self.clk)


class HostPort:
    """Bus master for the elaborated tops' host port (one access per cycle)."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.clk = dut.clk
        dut.host_we.value = 0
        dut.host_addr.value = 0
        dut.host_wdata.value = 0

    async def write(self, addr: int, data: int) -> None:
        self.dut.host_addr.value = addr
        self.dut.host_wdata.value = data & 0xFFFFFFFF
        self.dut.host_we.value = 1
        await RisingEdge(self.clk)
        self.dut.host_we.value = 0

    async def write_block(self, base: int, words: list[int]) -> None:
        dut = self.dut
        dut.host_we.value = 1
        for i, w in enumerate(words):
            dut.host_addr.value = base + i
            dut.host_wdata.value = w & 0xFFFFFFFF
            await RisingEdge(self.clk)
        dut.host_we.value = 0

    async def read(self, addr: int) -> int:
        self.dut.host_we.value = 0
        self.dut.host_addr.value = addr
        await RisingEdge(self.clk)
        await ReadOnly()
        v = int(self.dut.host_rdata.value)
        await RisingEdge(self.clk)
        return v

    async def read_block(self, base: int, n: int) -> list[int]:
        """Pipelined reads: address ``i`` in cycle ``i``, its data in cycle ``i + 1``."""
        if n == 0:
            return []
        dut = self.dut
        dut.host_we.value = 0
        out = []
        dut.host_addr.value = base
        await RisingEdge(self.clk)
        for i in range(1, n + 1):
            if i < n:
                dut.host_addr.value = base + i
            await ReadOnly()
            out.append(int(dut.host_rdata.value))
            await RisingEdge(self.clk)
        return out
