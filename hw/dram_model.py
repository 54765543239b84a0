"""All the graphs of a model in one top, their tensors in one DRAM (issue 34; ``docs/board.md``).

:class:`ModelTop` holds one :class:`hw.litedram.DramGraphTop` per graph of a compiled model
(``shared``: without a controller of its own) and one generated LiteDRAM controller.  The
graphs' arrays get their DRAM slots from one :class:`hw.litedram.DramAllocator`, so a tensor
one graph writes and a later one reads in the same format lies in one slot: the intermediate
stays in DRAM, and the later graph reads what the earlier one wrote.

Host port: the address is ``graph | local``: the high bits select a graph, whose own host port
(memory map, registers) the low bits address, as a single-graph top's.  The select one past the
last graph addresses the on-chip sequencer (:data:`SEQ_CTRL`, :data:`SEQ_CYCLES`): told a range
of graphs, it starts each in turn when the one before is done and the controller has returned
every read (no host action between them: the intermediates stay in DRAM), and counts the cycles
of the whole sequence.  The controller's native port belongs to the graph that runs, else to the
graph the sequencer starts next, else to the graph the host addresses (its loader).
``host_wait`` is the addressed graph's (DRAM initialising, a word on its way).
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
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
    sdram_pins,
)

__all__ = ["SEQ_CTRL", "SEQ_CYCLES", "ModelTop"]

# The sequencer's registers (local addresses under the select ``len(graphs)``):
SEQ_CTRL = 0  # write: bit 0 start, bits 8..15 the first graph, bits 16..23 the last;
#               read: bit 0 busy, bit 1 done (a sequence ran to its end), bits 8..15 the graph it runs
SEQ_CYCLES = 1  # cycles from the start to the last graph's done


def _check_banks(graphs) -> None:
    """A later graph reads a tensor from the slot its writer filled: one written in banks (the
    ``par`` lanes' ``Graph.banks``) is not in the layout the reader expects."""
    for k, g in enumerate(graphs):
        for t, banks in g.banks.items():
            for h in graphs[k + 1:]:
                if t in h.input_tensors():
                    raise ValueError(f"graph {g.name!r} writes {t!r} in {len(banks)} banks (one per lane of its "
                                     f"parallel split) and graph {h.name!r} reads it from DRAM, which needs "
                                     f"it whole: compile the model with --no-par-banks")


class ModelTop(wiring.Component):
    """The graphs ``graphs`` (in run order) with config ``cfg`` (from
    :func:`rtl_sim.dram.dram_config`) in one top on board ``board``'s DRAM; ``sim``: LiteDRAM's
    SDRAM model behind the controller instead of the pins."""

    def __init__(self, graphs, cfg, board: str = "ulx3s", sim: bool = True, name: str = "model") -> None:
        if not graphs:
            raise ValueError("ModelTop: no graphs")
        _check_banks(list(graphs))
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
        self.sel_width = max(1, len(self.subs).bit_length())  # the graphs and the sequencer
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

    @property
    def sequencer_base(self) -> int:
        """The host address of the sequencer's registers."""
        return len(self.subs) << self.local_width

    def host_map(self) -> dict:
        """The host's view: the address width, the sequencer's base and, per graph in run order,
        its base and memory map."""
        return {"addr_width": self.addr_width, "local_width": self.local_width,
                "sequencer": {"base": self.sequencer_base, "ctrl": SEQ_CTRL, "cycles": SEQ_CYCLES},
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
        quiet = ctrl.quiet
        n = len(self.subs)
        lw = self.local_width
        local, sel = self.host_addr[:lw], self.host_addr[lw:]
        sel_q = Signal(self.sel_width)
        m.d.sync += sel_q.eq(sel)  # host_rdata is one cycle after the address
        active = [s.running & ~s.done for s in self.subs]
        seq = self._sequencer(m, local, sel, quiet & ctrl.init_done)
        # The port's owner is registered: its multiplexers sit between the controller and every
        # graph, so a select computed from one graph's state in the same cycle crossed the chip
        # twice (the Cora GCN top's critical path, 33 ns, ran from the second graph's running
        # flag to the first graph's write FIFO).  The host addresses a graph before it starts
        # it, and the sequencer names the graph it starts next, so the owner is that graph
        # already when it starts: no cycle changes.
        owner = Signal(self.sel_width)
        owner_next = Signal(self.sel_width)
        m.d.comb += owner_next.eq(Mux(seq.busy, seq.cur, sel))
        for k in reversed(range(n)):  # the running graph owns the port
            with m.If(active[k]):
                m.d.comb += owner_next.eq(k)
        m.d.sync += owner.eq(owner_next)
        running = Signal()
        for k, s in enumerate(self.subs):
            m.submodules[f"g{k}"] = s
            kick = seq.kick & (seq.cur == k)  # the sequencer writes 1 to the graph's CTRL
            m.d.comb += [s.host_addr.eq(Mux(sel == k, local, 0)), s.host_wdata.eq(Mux(kick, 1, self.host_wdata)),
                         s.host_we.eq((self.host_we & (sel == k)) | kick), s.init_done_in.eq(ctrl.init_done),
                         s.quiet_in.eq(quiet)]
            with m.If(owner == k):
                m.d.comb += connect_native(s.dram_port, ctrl.port)
            with m.If(sel_q == k):
                m.d.comb += self.host_rdata.eq(s.host_rdata)
            with m.If(sel == k):
                m.d.comb += self.host_wait.eq(s.host_wait)
            running = running | active[k]
        with m.If(sel_q == n):
            m.d.comb += self.host_rdata.eq(seq.rdata)
        m.d.comb += [self.running.eq(running | seq.busy), self.done.eq(~running & ~seq.busy)]
        return m

    def _sequencer(self, m: Module, local, sel, ready):
        """The on-chip sequencer (module docstring): a write of SEQ_CTRL with bit 0 set runs
        graphs ``first`` to ``last``.  Graph ``cur`` is started (``kick``: a write of 1 to its
        CTRL, as the host's) when ``ready`` (DRAM initialised, no read outstanding: a line the
        last graph prefetched must not reach the next one); two cycles later its ``done``
        reflects the new run (the clear is registered, then ``running`` rises), and when it is
        done the next graph is kicked, or the sequence ends."""
        n = len(self.subs)
        gw = max(1, (n - 1).bit_length())
        cur, last = Signal(gw, name="seq_cur"), Signal(gw, name="seq_last")
        busy, ended, kick = Signal(name="seq_busy"), Signal(name="seq_done"), Signal(name="seq_kick")
        cycles = Signal(32, name="seq_cycles")
        settle = Signal(2, name="seq_settle")  # cycles left before ``cur``'s done is its new run's
        waiting = Signal(name="seq_waiting")  # ``cur`` was kicked; waiting for its done
        done_cur = Signal()
        m.d.comb += done_cur.eq(Cat(*[s.done for s in self.subs]).bit_select(cur, 1))
        write = self.host_we & (sel == n) & (local == SEQ_CTRL)
        with m.If(write & self.host_wdata[0] & ~busy):
            m.d.sync += [cur.eq(self.host_wdata[8:16]), last.eq(self.host_wdata[16:24]), busy.eq(1), ended.eq(0),
                         cycles.eq(0), waiting.eq(0)]
        with m.Elif(busy):
            m.d.sync += cycles.eq(cycles + 1)
            with m.If(~waiting):
                with m.If(ready):
                    m.d.comb += kick.eq(1)
                    m.d.sync += [waiting.eq(1), settle.eq(2)]
            with m.Elif(settle != 0):
                m.d.sync += settle.eq(settle - 1)
            with m.Elif(done_cur):
                m.d.sync += waiting.eq(0)
                with m.If(cur == last):
                    m.d.sync += [busy.eq(0), ended.eq(1)]
                with m.Else():
                    m.d.sync += cur.eq(cur + 1)
        rdata = Signal(HOST_DW, name="seq_rdata")
        local_q = Signal(len(local))
        m.d.sync += local_q.eq(local)
        m.d.comb += rdata.eq(Mux(local_q == SEQ_CYCLES, cycles, Cat(busy, ended, Const(0, 6), cur)))
        return SimpleNamespace(busy=busy, cur=cur, kick=kick, rdata=rdata)
