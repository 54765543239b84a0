"""All the graphs of a model in one top, their tensors in one DRAM (issue 34; ``docs/board.md``).

:class:`ModelTop` holds one :class:`hw.litedram.DramGraphTop` per graph of a compiled model
(``shared``: without a controller of its own) and one generated LiteDRAM controller.  The
graphs' arrays get their DRAM slots from one :class:`hw.litedram.DramAllocator`, so a tensor
one graph writes and a later one reads in the same format lies in one slot: the intermediate
stays in DRAM, and the later graph reads what the earlier one wrote.

Host port: the address is ``graph | local``: the high bits select a graph, whose own host port
(memory map, registers) the low bits address, as a single-graph top's.  The controller's native
port belongs to the graph that runs, else to the graph the host addresses (its loader).
``host_wait`` is the addressed graph's (DRAM initialising, a word on its way).
"""

from __future__ import annotations

from dataclasses import replace

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .elaborate import HOST_DW
from .litedram import (
    DramAllocator,
    DramGraphTop,
    LiteDRAMCore,
    connect_native,
    dram_board,
    generate_core,
    native_quiet,
    sdram_pins,
)

__all__ = ["ModelTop"]


class ModelTop(wiring.Component):
    """The graphs ``graphs`` (in run order) with config ``cfg`` (from
    :func:`rtl_sim.dram.dram_config`) in one top on board ``board``'s DRAM; ``sim``: LiteDRAM's
    SDRAM model behind the controller instead of the pins."""

    def __init__(self, graphs, cfg, board: str = "ulx3s", sim: bool = True, name: str = "model") -> None:
        if not graphs:
            raise ValueError("ModelTop: no graphs")
        self.name = name
        b = dram_board(board)
        text, info = generate_core(b.name, sim)
        self.dram_info, self.dram_verilog, self.dram_board = info, text, b
        t = info["timings"]
        self.allocator = DramAllocator(b.line_bytes, t["row_bytes"], t["banks"])
        self.graphs = list(graphs)
        # ``cfg.onchip`` names tensors of any graph; each graph gets those it has
        self.subs = [DramGraphTop(g, replace(cfg, onchip=tuple(t for t in cfg.onchip if t in g.tensors)), b.name,
                                  sim, allocator=self.allocator, shared=True) for g in self.graphs]
        self.cfg = self.subs[0].cfg
        self.local_width = max(s.mmap.addr_width for s in self.subs)
        self.sel_width = max(1, (len(self.subs) - 1).bit_length())
        self.addr_width = self.local_width + self.sel_width
        self.sdram_pins = None if sim else sdram_pins(info)
        self.sdram_dq = None
        super().__init__({"host_addr": In(self.addr_width), "host_wdata": In(HOST_DW), "host_we": In(1),
                          "host_rdata": Out(HOST_DW), "done": Out(1), "running": Out(1), "host_wait": Out(1)})

    def discard(self) -> None:
        """This top was made for its layout only: it is not elaborated (no warnings about its
        unused parts)."""
        for obj in [self, *self.subs, *(c for s in self.subs for c in (*s.core.subs.values(), s.core))]:
            obj._MustUse__silence = True

    def graph_base(self, k: int) -> int:
        """The host address of graph ``k``'s local address 0."""
        return k << self.local_width

    def host_map(self) -> dict:
        """The host's view: the address width and, per graph in run order, its base and memory map."""
        return {"addr_width": self.addr_width, "local_width": self.local_width,
                "graphs": [{"name": s.graph.name, "base": self.graph_base(k), "memory_map": s.mmap.to_json(),
                            "layout": {r: v.base for r, v in s.layout.items()}} for k, s in enumerate(self.subs)]}

    def summary(self) -> dict:
        return {"model": self.name, "graphs": [s.graph.name for s in self.subs], "local_width": self.local_width,
                "dram": {"board": self.dram_board.name, "verilog_lines": self.dram_info["verilog_lines"],
                         "slots": {k: {"base": v.base, "bytes": v.nbytes} for k, v in self.allocator.slots.items()},
                         "bytes": self.allocator.next},
                "per_graph": [s.summary() for s in self.subs]}

    def elaborate(self, platform):
        m = Module()
        m.submodules.dram = ctrl = LiteDRAMCore(self.dram_info, self.sdram_pins, self.sdram_dq)
        quiet = native_quiet(m, ctrl.port)
        lw = self.local_width
        local, sel = self.host_addr[:lw], self.host_addr[lw:]
        sel_q = Signal(self.sel_width)
        m.d.sync += sel_q.eq(sel)  # host_rdata is one cycle after the address
        active = [s.running & ~s.done for s in self.subs]
        # The port's owner is registered: its multiplexers sit between the controller and every
        # graph, so a select computed from one graph's state in the same cycle crossed the chip
        # twice (the Cora GCN top's critical path, 33 ns, ran from the second graph's running
        # flag to the first graph's write FIFO).  The host addresses a graph before it starts
        # it, so the owner is that graph already when it starts: no cycle changes.
        owner = Signal(self.sel_width)
        owner_next = Signal(self.sel_width)
        m.d.comb += owner_next.eq(sel)
        for k in reversed(range(len(self.subs))):  # the running graph owns the port
            with m.If(active[k]):
                m.d.comb += owner_next.eq(k)
        m.d.sync += owner.eq(owner_next)
        running = Signal()
        for k, s in enumerate(self.subs):
            m.submodules[f"g{k}"] = s
            m.d.comb += [s.host_addr.eq(Mux(sel == k, local, 0)), s.host_wdata.eq(self.host_wdata),
                         s.host_we.eq(self.host_we & (sel == k)), s.init_done_in.eq(ctrl.init_done),
                         s.quiet_in.eq(quiet)]
            with m.If(owner == k):
                m.d.comb += connect_native(s.dram_port, ctrl.port)
            with m.If(sel_q == k):
                m.d.comb += self.host_rdata.eq(s.host_rdata)
            with m.If(sel == k):
                m.d.comb += self.host_wait.eq(s.host_wait)
            running = running | active[k]
        m.d.comb += [self.running.eq(running), self.done.eq(~running)]
        return m
