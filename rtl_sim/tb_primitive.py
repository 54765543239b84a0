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
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from rtl_sim.streams import HostPort, StreamDriver, StreamMonitor


async def _one(dut, meta, run) -> dict:
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    host = HostPort(dut)
    regions = {r["name"]: r for r in meta["memory_map"]["regions"]}
    for name, words in run.get("mem", {}).items():
        await host.write_block(regions[name]["base"], words)
    seed = run.get("seed", 0)
    drivers = [StreamDriver(dut, f"in_{p}", w, gap=run.get("gap", 0.0), seed=seed + i)
               for i, (p, w) in enumerate(run["inputs"].items())]
    monitors = {p: StreamMonitor(dut, f"out_{p}", width, stall=run.get("stall", 0.0), seed=seed + 100 + i)
                for i, (p, width) in enumerate(meta["out_ports"].items())}
    dut.go.value = 1
    cycle = [0]
    limit = run.get("limit", 200000)

    async def count():
        while True:
            await RisingEdge(dut.clk)
            cycle[0] += 1

    await RisingEdge(dut.clk)
    counter = cocotb.start_soon(count())
    tasks = [cocotb.start_soon(d.run()) for d in drivers]
    tasks += [cocotb.start_soon(mon.run(cycle, limit)) for mon in monitors.values()]
    result: dict = {}
    if monitors:
        for t in tasks[len(drivers):]:
            await t
        result["cycles"] = max(mon.last_cycle for mon in monitors.values()) + 1
        result["outputs"] = {p: mon.words for p, mon in monitors.items()}
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
    for t in tasks[: len(drivers)]:
        t.cancel()
    if meta.get("overflow"):  # the sticky flag, after the whole stream (reset before each run)
        await RisingEdge(dut.clk)
        result["overflow"] = int(dut.overflow.value)
    return result


@cocotb.test()
async def run_jobs(dut):
    job = json.loads(Path(os.environ["FUSEFLOW_JOB"]).read_text())
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    # an exception (a timeout included) fails this cocotb test: run_cocotb raises it from results.xml
    results = [await _one(dut, job["meta"], run) for run in job["runs"]]
    Path(os.environ["FUSEFLOW_RESULT"]).write_text(json.dumps({"results": results}))
