"""RTL timing model of the off-chip memory (``docs/memory.md``; sw_sim: ``sw_sim.dram``).

The data of every array stays in the nodes' block RAMs; this model only decides in which cycle
a node may use it.  (``hw.litedram`` serves the same gates from a board's real DRAM instead:
it fills the block RAMs line by line and acknowledges each line with ``ack``.)  A node that reads or writes an off-chip array holds a port gate for it
(:class:`ReadGate`, :class:`WriteGate`): two line tags and one request at a time.  The gates
of a graph share one :class:`Controller` over a :func:`MemBus` each: one grant per cycle,
round robin, bank rows and data-bus occupancy.  A free-running cycle counter in the
controller times the fills (only differences of it matter; it starts at 0 with the run).

With line buffers (``HwConfig.line_buffers``: the DRAM top of ``hw.litedram``) a node keeps no
array-sized memory for an off-chip array, only its port's lines: a read port three slots (the
two resident lines and the one being filled; the slot of a line follows its tag, so the tags'
timing is unchanged), a write port two (slot = line parity: the line being sent and the one
being written).  The gate translates word indices into buffer addresses (``look`` ->
``look_addr``) and tells the line mover which slot a granted fill goes to (``slot``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fuseflow.ir.memory import MemoryModel, MemPort

__all__ = ["CYCLE_WIDTH", "READ_SLOTS", "WRITE_SLOTS", "Controller", "MemBus", "ReadGate", "WriteGate", "attach",
           "buffer_words", "bus_link", "bus_members", "line_width"]

CYCLE_WIDTH = 32
READ_SLOTS, WRITE_SLOTS = 3, 2  # lines a buffered read / write port keeps
SLOT_WIDTH = 2


def line_width(cw: int) -> int:
    """Bits of a line number: a word index has ``cw`` bits, and the prefetched line after the
    last one needs one more."""
    return cw + 1


def MemBus(lw: int) -> wiring.Signature:
    """A port gate's link to the controller (seen from the gate): ``waiting`` (a request raised
    in an earlier cycle, for ``line``); ``grant`` (this cycle) with the cycle ``done`` its data
    is there; ``cycle``, the controller's counter; ``ack``: the data of the granted request is
    there now (a controller that does not know ``done`` in advance: ``hw.litedram``); ``slot``:
    the buffer slot the requested line goes to (line buffers only)."""
    return wiring.Signature({"waiting": Out(1), "line": Out(lw), "grant": In(1),
                             "done": In(CYCLE_WIDTH), "cycle": In(CYCLE_WIDTH), "ack": In(1),
                             "slot": Out(SLOT_WIDTH)})


def bus_link(ctrl_side, gate_side) -> list:
    """Statements joining a controller port and a gate's (or node's) ``MemBus``."""
    return [ctrl_side.waiting.eq(gate_side.waiting), ctrl_side.line.eq(gate_side.line),
            gate_side.grant.eq(ctrl_side.grant), gate_side.done.eq(ctrl_side.done),
            gate_side.cycle.eq(ctrl_side.cycle), gate_side.ack.eq(ctrl_side.ack),
            ctrl_side.slot.eq(gate_side.slot)]


def bus_members(mem: dict[str, MemPort] | None, cw: int) -> dict:
    """A node's members ``mem_<array>`` for its off-chip arrays (none for on-chip ones)."""
    return {f"mem_{a}": Out(MemBus(line_width(cw))) for a in (mem or {})}


def buffer_words(spec: MemPort, model: MemoryModel, lanes: int = 1) -> int:
    """Words of the line buffers behind a port of ``spec`` (a power of two; at least one row
    of ``lanes`` words)."""
    words = model.burst_bytes // spec.word_bytes
    return max(words, lanes) * (WRITE_SLOTS if spec.write else READ_SLOTS)


def attach(m: Module, node: wiring.Component, array: str, gate: _Gate) -> _Gate:
    """Add ``gate`` to ``node``'s module and join it to the node's ``mem_<array>`` bus."""
    m.submodules[f"mem_{array}"] = gate
    m.d.comb += bus_link(getattr(node, f"mem_{array}"), gate.bus)
    return gate


def _log2(n: int) -> int:
    return n.bit_length() - 1


def round_robin(m: Module, ports) -> tuple[Signal, Signal, Signal]:
    """The arbiter of ``ports`` (each with a ``waiting`` bit): ``sel`` is the first waiting
    port at or after the pointer ``rr`` (else the first waiting port), ``any_w`` whether any
    waits.  The caller moves ``rr`` past ``sel`` on a grant.  Returns ``(rr, sel, any_w)``."""
    n = len(ports)
    rr, sel, any_w = Signal(range(max(n, 2))), Signal(range(max(n, 2))), Signal()  # no 0-bit signals
    for first_pass in (True, False):  # later assignments take priority
        for i in reversed(range(n)):
            cond = ports[i].waiting if first_pass else ports[i].waiting & (rr <= i)
            with m.If(cond):
                m.d.comb += sel.eq(i)
                if first_pass:
                    m.d.comb += any_w.eq(1)
    return rr, sel, any_w


class _Gate(wiring.Component):
    """Line tags ``t0`` (newest) and ``t1``, and the request state: idle, waiting or granted.
    A grant's fill takes effect in cycle ``done``: the tags, idleness and residency a subclass
    sees (``self.idle``, :meth:`resident`) are the ones after it."""

    def __init__(self, spec: MemPort, model: MemoryModel, cw: int, members: dict, buffered: bool = False) -> None:
        self.spec, self.model, self.cw, self.buffered = spec, model, cw, buffered
        self.lw = line_width(cw)
        self.shift = _log2(model.burst_bytes // spec.word_bytes)  # word -> line: >> shift
        super().__init__({"bus": Out(MemBus(self.lw)), **members})

    def line_of(self, word):
        return (word >> self.shift)[:self.lw]

    def resident(self, line):
        return (line == self.e0) | (line == self.e1)

    def elaborate(self, platform) -> Module:
        m = Module()
        lw, bus = self.lw, self.bus
        none = (1 << lw) - 1  # no line: above any line number a port can hold
        t0, t1 = Signal(lw, init=none), Signal(lw, init=none)
        waiting, granted = Signal(), Signal()
        line, done = Signal(lw), Signal(CYCLE_WIDTH)
        fill = Signal()
        self.idle, self.e0, self.e1 = Signal(), Signal(lw), Signal(lw)
        self.req, self.req_line = Signal(), Signal(lw)  # raise a request (only when idle)
        # line buffers: the LiteDRAM line engine acknowledges every fill (its ``done`` is never
        # reached), so no 32-bit compare of the cycle counter sits in front of the tags and the
        # node's memory address (on the ULX3S GCN top it did)
        arrived = bus.ack if self.buffered else (bus.cycle == done) | bus.ack
        m.d.comb += [fill.eq(granted & arrived),
                     self.idle.eq(~(waiting | granted) | fill),
                     self.e0.eq(Mux(fill, line, t0)), self.e1.eq(Mux(fill, t0, t1)),
                     bus.waiting.eq(waiting), bus.line.eq(line)]
        with m.If(fill):
            m.d.sync += [t0.eq(line), t1.eq(t0), granted.eq(0)]
        if self.buffered and not self.spec.write:
            # the slots of t0, t1 and of the line being filled; a fill takes the free slot and
            # frees t1's.  Seen after this cycle's fill, like the tags.
            s0, s1, sf = Signal(SLOT_WIDTH, init=0), Signal(SLOT_WIDTH, init=1), Signal(SLOT_WIDTH, init=2)
            self.es0, self.es1, self.esf = Signal(SLOT_WIDTH), Signal(SLOT_WIDTH), Signal(SLOT_WIDTH)
            m.d.comb += [self.es0.eq(Mux(fill, sf, s0)), self.es1.eq(Mux(fill, s0, s1)),
                         self.esf.eq(Mux(fill, s1, sf)), bus.slot.eq(sf)]
            with m.If(fill):
                m.d.sync += [s0.eq(sf), s1.eq(s0), sf.eq(s1)]
        with m.If(self.req):
            m.d.sync += [waiting.eq(1), line.eq(self.req_line)]
        with m.Elif(bus.grant):
            m.d.sync += [waiting.eq(0), granted.eq(1), done.eq(bus.done)]
        self.gate(m)
        return m

    def buffer_addr(self, word):
        """The buffer address of ``word`` (line buffers; the word itself otherwise): its offset in
        its line below the slot of the line (resident, else the slot being filled)."""
        if not self.buffered:
            return word
        line = self.line_of(word)
        slot = Mux(line == self.e0, self.es0, Mux(line == self.e1, self.es1, self.esf))
        return Cat(word[:self.shift], slot) if self.shift else slot

    def gate(self, m: Module) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class ReadGate(_Gate):
    """A read port.  The node offers ``word`` with ``want`` (it would read it this cycle:
    everything else it needs is there); ``ok``: the line of ``word`` (``pair``: and of
    ``word + 1``) is resident, so the read proceeds.  Otherwise the port, when idle, raises a
    request for the lowest missing line; a read that proceeds raises one for the line after
    the highest it touched if that is not resident (next-line prefetch)."""

    def __init__(self, spec: MemPort, model: MemoryModel, cw: int, *, pair: bool = False,
                 buffered: bool = False) -> None:
        self.pair = pair
        aw = self.addr_width(spec, model, cw, buffered)
        members = {"word": In(cw), "want": In(1), "ok": Out(1), "look": In(cw), "look_addr": Out(aw)}
        if pair:
            members["look_addr_hi"] = Out(aw)  # of look + 1
        super().__init__(spec, model, cw, members, buffered)

    @staticmethod
    def addr_width(spec: MemPort, model: MemoryModel, cw: int, buffered: bool) -> int:
        """Bits of the address the node's memory behind the port takes."""
        if not buffered:
            return cw
        return _log2(model.burst_bytes // spec.word_bytes) + SLOT_WIDTH

    def gate(self, m: Module) -> None:
        m.d.comb += self.look_addr.eq(self.buffer_addr(self.look))
        if self.pair:
            m.d.comb += self.look_addr_hi.eq(self.buffer_addr((self.look + 1)[:self.cw]))
        lo = self.line_of(self.word)
        hi = self.line_of(self.word + 1) if self.pair else lo
        lo_ok, hi_ok, next_ok = Signal(), Signal(), Signal()
        nxt = (hi + 1)[:self.lw]
        m.d.comb += [lo_ok.eq(self.resident(lo)), hi_ok.eq(self.resident(hi) if self.pair else lo_ok),
                     next_ok.eq(self.resident(nxt)), self.ok.eq(lo_ok & hi_ok),
                     self.req.eq(self.want & self.idle & ~(lo_ok & hi_ok & next_ok)),
                     self.req_line.eq(Mux(~lo_ok, lo, Mux(~hi_ok, hi, nxt)))]


class WriteGate(_Gate):
    """A write port.  ``word`` is the index of the next word the node writes (its count of
    words written); ``want``: it writes it this cycle; ``ok``: the write happens (a word that is
    not the last of its line always; the last one when the port is idle, which then sends the
    line).  ``flush`` (the node is at ``D``): the port sends its unsent words when idle;
    ``flushed``: idle with nothing unsent.  A ``seg`` port starts with word 0 written."""

    def __init__(self, spec: MemPort, model: MemoryModel, cw: int, span: int = 1, buffered: bool = False) -> None:
        self.span = span  # words per write: a vector of ``span`` aligned words inside one line
        super().__init__(spec, model, cw, {"word": In(cw), "want": In(1), "ok": Out(1),
                                           "flush": In(1), "flushed": Out(1)}, buffered)

    def gate(self, m: Module) -> None:
        k = self.shift
        end = self.word if self.span == 1 else self.word + (self.span - 1)  # the last word written
        last = end[:k].all() if k else Const(1, 1)
        unsent = Signal(init=1 if self.spec.array == "seg" else 0)
        send_rest = self.flush & self.idle & unsent
        m.d.comb += [self.ok.eq(~last | self.idle), self.flushed.eq(self.idle & ~unsent),
                     self.req.eq((self.want & last & self.idle) | send_rest),
                     self.req_line.eq(Mux(self.flush, self.line_of((self.word - 1)[:self.cw]),
                                         self.line_of(self.word)))]
        with m.If(self.want & self.ok):
            m.d.sync += unsent.eq(~last)
        with m.If(send_rest):
            m.d.sync += unsent.eq(0)


class Controller(wiring.Component):
    """The memory channel: port ``p<i>`` is :class:`fuseflow.ir.memory.MemPort` ``i``.  Each cycle
    it grants the first waiting port at or after its round-robin pointer and moves the pointer
    past it; the grant's access time follows the bank's open row (open policy) and its data is
    done ``xfer_cycles`` after ``max(now + access, bus_free)``."""

    def __init__(self, model: MemoryModel, specs: list[MemPort], cw: int) -> None:
        if model.ideal or not specs:
            raise ValueError("Controller: needs a non-ideal memory model and at least one port")
        self.model, self.specs, self.lw = model, list(specs), line_width(cw)
        super().__init__({f"p{i}": In(MemBus(self.lw)) for i in range(len(specs))})

    def elaborate(self, platform) -> Module:
        m = Module()
        model, n = self.model, len(self.specs)
        ports = [getattr(self, f"p{i}") for i in range(n)]
        cycle = Signal(CYCLE_WIDTH)
        m.d.sync += cycle.eq(cycle + 1)
        m.d.comb += [p.cycle.eq(cycle) for p in ports]
        rr, sel, any_w = round_robin(m, ports)
        aid_w = max(1, max(s.array_id for s in self.specs).bit_length())
        line, aid = Signal(self.lw), Signal(aid_w)
        with m.Switch(sel):
            for i, s in enumerate(self.specs):
                with m.Case(i):
                    m.d.comb += [line.eq(ports[i].line), aid.eq(s.array_id)]
        # (bank, row): the array's rows go round the banks from bank array_id
        bank_bits = _log2(model.banks)
        chunk = line >> _log2(model.lines_per_row)
        bank = Signal(max(bank_bits, 1))
        m.d.comb += bank.eq((chunk + aid)[:bank_bits] if bank_bits else 0)
        tag = Cat(chunk >> bank_bits, aid)
        t_hit = model.latency + model.t_cl
        t_closed = t_hit + model.t_rcd
        t_conflict = t_closed + model.t_rp
        access = Signal(range(t_conflict + 1))
        if model.policy == "open":
            rows = [Signal(len(tag), name=f"open_row{b}") for b in range(model.banks)]
            opened = Signal(model.banks)
            cur, cur_open = Signal(len(tag)), Signal()
            with m.Switch(bank):
                for b in range(model.banks):
                    with m.Case(b):
                        m.d.comb += [cur.eq(rows[b]), cur_open.eq(opened[b])]
            m.d.comb += access.eq(Mux(~cur_open, t_closed, Mux(cur == tag, t_hit, t_conflict)))
            with m.If(any_w), m.Switch(bank):
                for b in range(model.banks):
                    with m.Case(b):
                        m.d.sync += [rows[b].eq(tag), opened[b].eq(1)]
        else:
            m.d.comb += access.eq(t_closed)
        bus_free, ready_at, done = Signal(CYCLE_WIDTH), Signal(CYCLE_WIDTH), Signal(CYCLE_WIDTH)
        # the bus waits t_turn after a transfer of the other direction, t_switch after one in
        # another bank (not before the first grant)
        bus_at = Signal(CYCLE_WIDTH)
        m.d.comb += bus_at.eq(bus_free)
        if model.t_turn or model.t_switch:
            granted, last_bank, last_write, write = Signal(), Signal(len(bank)), Signal(), Signal()
            with m.Switch(sel):
                for i, s in enumerate(self.specs):
                    with m.Case(i):
                        m.d.comb += write.eq(int(s.write))
            turn = Mux(granted & (write != last_write), model.t_turn, 0)
            switch = Mux(granted & (bank != last_bank), model.t_switch, 0)
            m.d.comb += bus_at.eq(bus_free + turn + switch)
            with m.If(any_w):
                m.d.sync += [granted.eq(1), last_bank.eq(bank), last_write.eq(write)]
        m.d.comb += [ready_at.eq(cycle + access),
                     done.eq(Mux(ready_at > bus_at, ready_at, bus_at) + model.xfer_cycles)]
        for i, p in enumerate(ports):
            m.d.comb += [p.grant.eq(any_w & (sel == i)), p.done.eq(done)]
        with m.If(any_w):
            m.d.sync += [bus_free.eq(done), rr.eq(Mux(sel == n - 1, 0, sel + 1))]
        return m
