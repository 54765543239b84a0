"""cocotb testbench for the board top (UART bridge + graph accelerator), job-driven.

A UART model stands in for the USB-serial adapter; the host side is the same driver that
``fuseflow-hw run`` uses on a real serial port (:func:`fpga.host.run_on_board`).
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

from fuseflow.ir.samml import Graph
from hw.elaborate import MemoryMap

from .host import BoardLink, LinkError, run_on_board, tensor_from_arrays

__all__ = ["UartModel"]


# Kept instead of cocotbext-uart's UartSource / UartSink: its sink never looks at the stop bit (a
# framing error from the board would pass unseen) and both time bits with Timers rather than
# the DUT's clock cycles; this model counts bad stop bits and steps on the clock.
class UartModel:
    """8N1 UART at ``divisor`` clock cycles per bit on the DUT's ``uart_rx`` / ``uart_tx``.

    A :class:`fpga.host.ByteTransport`: ``write`` drives bytes into the board, ``read`` returns
    bytes the board sent, raising :class:`LinkError` after ``timeout_bits`` idle bit times.
    """

    def __init__(self, dut, divisor: int, timeout_bits: int = 200_000) -> None:
        self.clk, self.rx, self.tx = dut.clk, dut.uart_rx, dut.uart_tx
        self.divisor, self.timeout_bits = divisor, timeout_bits
        self.received: deque[int] = deque()
        self.rx.value = 1
        self.framing_errors = 0
        cocotb.start_soon(self._monitor())

    async def _monitor(self) -> None:
        while True:
            await FallingEdge(self.tx)
            await ClockCycles(self.clk, self.divisor // 2)
            if int(self.tx.value):
                continue  # a glitch, not a start bit
            byte = 0
            for i in range(8):
                await ClockCycles(self.clk, self.divisor)
                byte |= int(self.tx.value) << i
            await ClockCycles(self.clk, self.divisor)
            if not int(self.tx.value):
                self.framing_errors += 1
            self.received.append(byte)

    async def write(self, data: bytes) -> None:
        for byte in data:
            for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                self.rx.value = bit
                await ClockCycles(self.clk, self.divisor)

    async def read(self, n: int) -> bytes:
        idle = 0
        have = len(self.received)
        while len(self.received) < n:
            await ClockCycles(self.clk, self.divisor)
            idle = 0 if len(self.received) != have else idle + 1
            have = len(self.received)
            if idle > self.timeout_bits:
                raise LinkError(f"UART model: expected {n} bytes, got {len(self.received)}")
        if self.framing_errors:
            raise LinkError(
                f"UART model: {self.framing_errors} frames from the board had a low stop bit"
            )
        return bytes(self.received.popleft() for _ in range(n))


@cocotb.test()
async def run_jobs(dut):
    job = json.loads(Path(os.environ["FUSEFLOW_JOB"]).read_text())
    meta = job["meta"]
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    uart = UartModel(dut, meta["divisor"])
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 4)
    # an exception fails this cocotb test: run_cocotb raises it from results.xml
    graph = Graph.from_json(meta["graph"])
    mmap = MemoryMap.from_json(meta["memory_map"])
    link = BoardLink(uart)
    results = []
    for run in job["runs"]:
        data = {
            t: tensor_from_arrays(graph.tensors[t].shape, graph.tensors[t].fmt, arrays)
            for t, arrays in run["inputs"].items()
        }
        # simulate_board applies the overflow policy to the flags returned
        res = await run_on_board(link, graph, data, mmap, meta["ident"], on_overflow="ignore")
        results.append(
            {
                "cycles": res.cycles,
                "polls": res.polls,
                "overflow": res.overflow,
                "status": res.status,
                "load_bytes": res.load_bytes,
                "resent": res.resent,
                "outputs": {t: td.arrays() for t, td in res.outputs.items()},
                "leds": int(dut.leds.value),
            }
        )
    Path(os.environ["FUSEFLOW_RESULT"]).write_text(json.dumps({"results": results}))
