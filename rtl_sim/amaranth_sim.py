"""The amaranth.sim runner of graph tops: no Verilator, no C++ compiler.

The graph top (``hw.elaborate.GraphTop``) is simulated by Amaranth's own Python simulator.  One
testbench drives the host port with the protocol of ``rtl_sim/tb_graph.py`` and of the native
harness (``rtl_sim/native.py``): per run, every input word written through the host port (one a
cycle), CTRL start, ``done`` awaited, then the CYCLES counter, STATUS, the OVERFLOW words, the
output lengths and the output arrays read back (pipelined, one address a cycle).  Results and
cycle counts are therefore the Verilator runners'.

Fast paths (``direct=True``, the default): an input array whose every memory copy is a plain
block RAM of the region's depth and width is written into those memories directly
(``ctx.set`` on the rows of each ``MemoryData``, no simulated cycle), and an output array
is read the same way after its length register; the others (vector memories that pack lanes
into a row) go through the host port, one word a cycle.  While the datapath runs the testbench
awaits once per :data:`POLL` cycles (``ctx.tick().repeat``), so the simulator, not Python control
flow, does the work.  Cycles are counted by the top's CYCLES register from the start, so neither
the load path nor the polling changes them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from amaranth.hdl import Elaboratable, MemoryData, Module, ResetInserter, Shape, Signal
from amaranth.sim import Simulator

from fuseflow.ir.samml import Graph
from hw.elaborate import (
    REG_CTRL,
    REG_CYCLES,
    REG_LEN0,
    REG_OVF0,
    REG_STATUS,
    GraphTop,
    HwConfig,
    PrimitiveHarness,
)
from hw.word import is_done_word

from .native import RtlTimeout
from .pauses import run_pauses

__all__ = ["POLL", "amaranth_top", "run_amaranth", "run_primitive_amaranth"]

POLL = 64  # cycles between two looks at ``done`` while a run is under way
_PERIOD = 1e-8  # 100 MHz: only the time axis of a waveform


def amaranth_top(graph: Graph, cfg: HwConfig) -> tuple[GraphTop, dict]:
    """The graph top and its ``meta`` (``{"memory_map": ..., "summary": ...}``, as the Verilator
    builds' ``meta.json``)."""
    top = GraphTop(graph, cfg)
    return top, {"memory_map": top.mmap.to_json(), "summary": top.summary()}


def direct_arrays(sim: Simulator, top: GraphTop, mmap: Mapping[str, Any]) -> dict[str, list[MemoryData]]:
    """The memories of each array the testbench may access directly: every copy of an input
    array (one per node reading it) or the memory of an output array, when each is a block RAM
    of the region's depth and width; arrays with another layout are left out (host port)."""
    design = getattr(sim, "_design", None)  # amaranth 0.5's elaborated design
    if design is None:
        return {}
    found: dict[str, list[MemoryData]] = {}
    regions = {r["name"]: r for r in mmap["regions"]}
    for frag, info in design.fragments.items():
        data = getattr(frag, "_data", None)
        name = info.name
        if not isinstance(data, MemoryData) or len(name) != 4 or name[:2] != ("top", "core"):
            continue
        node = top.graph.nodes.get(name[2][2:]) if name[2].startswith("n_") else None
        params = node.params if node is not None else {}
        if "tensor" not in params or name[3] not in ("seg", "crd", "vals"):
            continue
        region = f"{params['tensor']}.vals" if name[3] == "vals" else f"{params['tensor']}.{params.get('level')}.{name[3]}"
        r = regions.get(region)
        if r is not None and data.depth == r["depth"] and Shape.cast(data.shape).width == r["width"]:
            found.setdefault(region, []).append(data)
    copies = {**{k: len(v) for k, v in top.bus.writes.items()}, **dict.fromkeys(top.bus.reads, 1)}
    return {k: v for k, v in found.items() if len(v) == copies.get(k)}


class _Host:
    """The host port of a top, driven from a testbench context."""

    def __init__(self, ctx, top: GraphTop, direct: Mapping[str, list[MemoryData]]) -> None:
        self.ctx, self.top, self.direct = ctx, top, direct

    async def load(self, name: str, base: int, words: np.ndarray) -> None:
        """An input array: into its memories directly, or through the host port."""
        if name not in self.direct:
            await self.write_block(base, words)
            return
        for mem in self.direct[name]:
            for i, w in enumerate(words.tolist()):
                self.ctx.set(mem[i], w)

    async def fetch(self, name: str, base: int, n: int) -> np.ndarray:
        """An output array of ``n`` entries: from its memory directly, or through the host port."""
        if name not in self.direct:
            return await self.read_block(base, n)
        [mem] = self.direct[name]
        return np.array([self.ctx.get(mem[i]) for i in range(n)], dtype=np.int64)

    async def write_block(self, base: int, words: np.ndarray) -> None:
        ctx, top = self.ctx, self.top
        ctx.set(top.host_we, 1)
        for i, w in enumerate(words.tolist()):
            ctx.set(top.host_addr, base + i)
            ctx.set(top.host_wdata, w)
            await ctx.tick()
        ctx.set(top.host_we, 0)

    async def write(self, addr: int, data: int) -> None:
        await self.write_block(addr, np.array([data]))

    async def read(self, addr: int) -> int:
        """A register: its data one cycle after its address."""
        ctx = self.ctx
        ctx.set(self.top.host_addr, addr)
        await ctx.tick()
        v = ctx.get(self.top.host_rdata)
        await ctx.tick()
        return v

    async def read_block(self, base: int, n: int) -> np.ndarray:
        """Pipelined reads: address ``i`` in cycle ``i``, its data in cycle ``i + 1``."""
        ctx, top = self.ctx, self.top
        out = np.zeros(n, dtype=np.int64)
        if n == 0:
            return out
        ctx.set(top.host_addr, base)
        await ctx.tick()
        for i in range(1, n + 1):
            if i < n:
                ctx.set(top.host_addr, base + i)
            out[i - 1] = ctx.get(top.host_rdata)
            await ctx.tick()
        return out


async def _one(host: _Host, mmap: Mapping[str, Any], run: Mapping[str, Any], limit: int, index: int) -> dict:
    ctx, top = host.ctx, host.top
    regions = {r["name"]: r for r in mmap["regions"]}
    for name, words in run["mem"].items():
        await host.load(name, regions[name]["base"], np.asarray(words, dtype=np.int64) & 0xFFFFFFFF)
    await host.write(REG_CTRL, 1)  # clear + start
    waited = 0
    while True:  # the first look is one edge after the start: done still shows the last run
        step = min(POLL, limit + 1 - waited)
        await ctx.tick().repeat(step)
        waited += step
        if ctx.get(top.done):
            break
        if waited > limit:
            raise RtlTimeout(f"run {index} not done after {limit} cycles")
    await ctx.tick()
    cycles = await host.read(REG_CYCLES)
    status = await host.read(REG_STATUS)
    words = [await host.read(REG_OVF0 + k) for k in range(-(-len(mmap["overflow"]) // 32))]
    arrays = {}
    for i, name in enumerate(mmap["lengths"]):
        n = await host.read(REG_LEN0 + i)
        if n > regions[name]["depth"]:  # a broken writer: reading on would not end (as native)
            arrays[name] = np.zeros(n, dtype=np.int64)
            continue
        arrays[name] = await host.fetch(name, regions[name]["base"], n)
    return {"cycles": cycles, "status": status, "overflow_words": words, "arrays": arrays}


def _simulate(sim: Simulator, bench, wave_file: Path | None) -> None:
    """Run ``bench`` on ``sim``'s clock to its end, with a VCD of everything when asked."""
    sim.add_clock(_PERIOD)
    sim.add_testbench(bench)
    if wave_file is not None:
        with sim.write_vcd(str(wave_file)):
            sim.run()
    else:
        sim.run()


def run_amaranth(top: GraphTop, meta: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], *,
                 max_cycles: int, wave_file: Path | None = None, what: str = "graph",
                 direct: bool = True) -> list[dict]:
    """Run ``runs`` (each ``{"mem": {region: words}}``) through ``top`` under amaranth.sim, one
    simulation, reset once; per run ``{"cycles", "status", "overflow_words", "arrays"}`` as the
    other runners return them.  Raises :class:`RtlTimeout` when a run is not done within
    ``max_cycles`` cycles of its start.  ``direct``: load and read plain memories directly (the
    module docstring); ``False``: every word through the host port."""
    if max_cycles < 1:
        raise ValueError(f"max_cycles = {max_cycles}: must be at least 1")
    mmap = meta["memory_map"]
    results: list[dict] = []
    failure: list[str] = []
    sim = Simulator(top)
    arrays = direct_arrays(sim, top, mmap) if direct else {}

    async def bench(ctx):
        host = _Host(ctx, top, arrays)
        await ctx.tick().repeat(2)  # the other runners hold reset for two cycles: same timing
        for i, run in enumerate(runs):
            try:
                results.append(await _one(host, mmap, run, max_cycles, i))
            except RtlTimeout as exc:
                failure.append(str(exc))
                return

    _simulate(sim, bench, wave_file)
    if failure:
        where = f" (dataset {len(results) + 1} of {len(runs)})" if len(runs) > 1 else ""
        raise RtlTimeout(f"{what} did not finish within {max_cycles} cycles in RTL (amaranth.sim){where}: "
                         "raise the cycle limit (max_cycles, rtl --max-cycles) if it needs more, or it is stuck")
    return results


# ----------------------------------------------------------------------------- one primitive
class _ResetTop(Elaboratable):
    """A primitive harness with a synchronous reset the testbench drives (``rst``), as the
    cocotb testbench drives the Verilog top's ``rst`` port (a ``ResetInserter``: the ``sync``
    domain itself is never reset, so the testbench's ticks go on through it)."""

    def __init__(self, harness: PrimitiveHarness) -> None:
        self.harness = harness
        self.rst = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.harness = ResetInserter(self.rst)(self.harness)
        return m


class _Ends:
    """The input sources and output sinks of one run, stepped once a cycle as the cocotb
    ``StreamSource`` / ``StreamSink`` step: each draws its pause once a cycle, a source holds a
    word until it is taken, a sink takes a word whenever it is ready and ``valid`` is high."""

    def __init__(self, h: PrimitiveHarness, meta: Mapping[str, Any], run: Mapping[str, Any]) -> None:
        gaps, stalls = run_pauses(run, run["inputs"], meta["out_ports"])
        self.ins = [(getattr(h, f"in_{p}"), deque(words), gaps[p]) for p, words in run["inputs"].items()]
        self.outs = {p: (getattr(h, f"out_{p}"), w, stalls[p]) for p, w in meta["out_ports"].items()}
        self.held = [False] * len(self.ins)
        self.got: dict[str, list[int]] = {p: [] for p in self.outs}
        self.last = -1  # the cycle of the last word taken

    def quiet(self, ctx) -> None:
        for port, _, _ in self.ins:
            ctx.set(port.valid, 0)
        for port, _, _ in self.outs.values():
            ctx.set(port.ready, 0)

    def step(self, ctx, cycle: int) -> None:
        """Drive this cycle's offers and readiness, then note the transfers at the next edge
        (values read after every input is set: cocotb's read-only phase)."""
        for k, (port, words, pause) in enumerate(self.ins):
            paused = _paused(pause)  # drawn every cycle, held word or not
            if not self.held[k] and words and not paused:
                ctx.set(port.payload, words[0])
                self.held[k] = True
            ctx.set(port.valid, int(self.held[k]))
        ready = {}
        for p, (port, _, pause) in self.outs.items():
            ready[p] = not _paused(pause)
            ctx.set(port.ready, int(ready[p]))
        for k, (port, words, _) in enumerate(self.ins):
            if self.held[k] and ctx.get(port.ready):
                words.popleft()
                self.held[k] = False
        for p, (port, _, _) in self.outs.items():
            if ready[p] and ctx.get(port.valid):
                self.got[p].append(ctx.get(port.payload))
                self.last = cycle

    def open_ports(self) -> list[str]:
        """The output ports whose done word has not come yet."""
        return [f"out_{p}" for p, (_, w, _) in self.outs.items()
                if not (self.got[p] and is_done_word(self.got[p][-1], w))]


def _paused(pause) -> bool:
    return next(pause) if pause is not None else False


async def _prim_one(ctx, top: _ResetTop, meta: Mapping[str, Any], run: Mapping[str, Any]) -> dict:
    """One run of ``tb_primitive``'s protocol: reset, memories through the host port, the
    input streams offered from cycle 0 (with the run's gaps), the outputs taken (with its
    stalls) up to their done words, or the writer's ``done`` and arrays; the sticky overflow
    flag after the stream.  Cycle ``k`` is the ``k``-th cycle after the one ``go`` rose in."""
    h = top.harness
    ctx.set(top.rst, 1)
    await ctx.tick().repeat(2)
    ctx.set(top.rst, 0)
    host = _Host(ctx, h, {})
    regions = {r["name"]: r for r in meta["memory_map"]["regions"]}
    for name, words in run.get("mem", {}).items():
        await host.write_block(regions[name]["base"], np.asarray(words, dtype=np.int64))
    limit = run.get("limit", 200000)
    ends = _Ends(h, meta, run)
    ends.quiet(ctx)
    ctx.set(h.go, 1)
    await ctx.tick()
    cycle = 0
    while True:
        ends.step(ctx, cycle)
        if (not ends.open_ports()) if ends.outs else ctx.get(h.done):
            break
        if cycle > limit:
            what = "no done word on " + ", ".join(ends.open_ports()) if ends.outs else "writer not done"
            raise TimeoutError(f"{what} after {limit} cycles")
        await ctx.tick()
        cycle += 1
    result: dict[str, Any] = {"cycles": ends.last + 1, "outputs": ends.got} if ends.outs else {"cycles": cycle}
    await ctx.tick()
    for port, _, _ in ends.ins:
        ctx.set(port.valid, 0)
    if not ends.outs:
        result["arrays"] = {name: (await host.read_block(regions[name]["base"], await host.read(2 + i))).tolist()
                            for i, name in enumerate(meta["memory_map"]["lengths"])}
    if meta.get("overflow"):
        await ctx.tick()
        result["overflow"] = int(ctx.get(h.overflow))
    return result


def run_primitive_amaranth(harness: PrimitiveHarness, meta: Mapping[str, Any], runs: Sequence[Mapping[str, Any]],
                           *, wave_file: Path | None = None) -> list[dict]:
    """Run ``runs`` (the job runs of ``rtl_sim/tb_primitive.py``: ``inputs`` as payload words
    per port, ``mem``, ``gap``, ``stall``, ``seed``) through ``harness`` under amaranth.sim,
    reset before each run; per run the testbench's result (``cycles``, ``outputs`` or
    ``arrays``, ``overflow``).  The same protocol and cycle count as the cocotb testbench
    on Verilator, with nothing to build."""
    top = _ResetTop(harness)
    results: list[dict] = []
    failure: list[BaseException] = []
    sim = Simulator(top)

    async def bench(ctx):
        for run in runs:
            try:
                results.append(await _prim_one(ctx, top, meta, run))
            except TimeoutError as exc:
                failure.append(exc)
                return

    _simulate(sim, bench, wave_file)
    if failure:
        raise failure[0]
    return results
