"""cocotb testbench for one primitive behind :class:`hw.PrimitiveHarness` (job-driven).

The job (JSON, path in ``FUSEFLOW_JOB``) lists runs; each loads memories through the host port,
drives the input streams, collects the outputs (or the writer's arrays) and counts cycles from
the first cycle the inputs are offered to the cycle the last output ``D`` is taken; a primitive
with an overflow flag also returns the flag as it stands at the end.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, SimTimeoutError, with_timeout

from hw.word import is_done_word
from rtl_sim.pauses import run_pauses
from rtl_sim.streams import HostPort, StreamSink, StreamSource, port_signal

CLOCK_NS = 10


async def _one(dut, meta, run) -> dict:
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    host = HostPort(dut)
    regions = {r["name"]: r for r in meta["memory_map"]["regions"]}
    for name, words in run.get("mem", {}).items():
        await host.write_block(regions[name]["base"], words)
    gaps, stalls = run_pauses(run, run["inputs"], meta["out_ports"])
    for p in run["inputs"]:  # quiet ports until the sources and sinks start, after the next edge
        port_signal(dut, f"in_{p}", "valid").value = 0
    for p in meta["out_ports"]:
        port_signal(dut, f"out_{p}", "ready").value = 0
    dut.go.value = 1
    cycle = [0]
    limit = run.get("limit", 200000)

    async def count():
        while True:
            await RisingEdge(dut.clk)
            cycle[0] += 1

    await RisingEdge(dut.clk)
    counter = cocotb.start_soon(count())
    # from here on, cycle 0: the inputs are offered, the outputs are ready unless stalled
    sources = [StreamSource(dut, f"in_{p}", dut.clk, pause=gaps[p]) for p in run["inputs"]]
    for src, words in zip(sources, run["inputs"].values(), strict=True):
        src.send_all(words)
    sinks = {p: StreamSink(dut, f"out_{p}", dut.clk, pause=stalls[p]) for p in meta["out_ports"]}
    result: dict = {}
    if sinks:
        outputs = {p: await _until_done(sink, f"out_{p}", meta["out_ports"][p], cycle, limit)
                   for p, sink in sinks.items()}
        result["cycles"] = max(sink.last_cycle for sink in sinks.values()) + 1
        result["outputs"] = outputs
        await RisingEdge(dut.clk)  # out of the read-only phase the last word arrived in
    else:  # writer: wait for done
        while True:
            await ReadOnly()
            if int(dut.done.value):
                break
            if cycle[0] > limit:
                raise TimeoutError(f"writer not done after {limit} cycles")
            await RisingEdge(dut.clk)
        result["cycles"] = cycle[0]
        await RisingEdge(dut.clk)
        arrays = {}
        for i, name in enumerate(meta["memory_map"]["lengths"]):
            n = await host.read(2 + i)
            arrays[name] = await host.read_block(regions[name]["base"], n)
        result["arrays"] = arrays
    counter.cancel()
    for end in [*sources, *sinks.values()]:
        end.stop()
    if meta.get("overflow"):  # the sticky flag, after the whole stream (reset before each run)
        await RisingEdge(dut.clk)
        result["overflow"] = int(dut.overflow.value)
    return result


async def _until_done(sink: StreamSink, port: str, width: int, cycle: list[int], limit: int) -> list[int]:
    """The words of ``sink`` up to and including the done word, within ``limit`` cycles."""
    words: list[int] = []
    while not words or not is_done_word(words[-1], width):
        left = limit - cycle[0]
        try:
            words.append(await with_timeout(sink.recv(), max(left, 1) * CLOCK_NS, "ns"))
        except SimTimeoutError:
            raise TimeoutError(f"no done word on {port} after {limit} cycles") from None
    return words


@cocotb.test()
async def run_jobs(dut):
    job = json.loads(Path(os.environ["FUSEFLOW_JOB"]).read_text())
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    # an exception (a timeout included) fails this cocotb test: run_cocotb raises it from results.xml
    results = [await _one(dut, job["meta"], run) for run in job["runs"]]
    Path(os.environ["FUSEFLOW_RESULT"]).write_text(json.dumps({"results": results}))
