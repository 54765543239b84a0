"""A FIFO in synchronous-read (block) RAM with exactly the port timing of Amaranth's ``SyncFIFO``.

The channel FIFOs of the timing contract are ``SyncFIFO``\\ s: storage read asynchronously, so
a word written in cycle ``t`` is at ``r_data`` with ``r_rdy`` in ``t + 1``; ``w_rdy`` is
``level != depth`` and ``r_rdy`` is ``level != 0``.  Asynchronous reads need distributed RAM or
flip-flops, and the iCE40 has no distributed RAM: the deep FIFOs that ``size_fifos`` gives to
reconvergent paths become thousands of flip-flops there.

:class:`RamFIFO` keeps the words in a memory with a *synchronous* read port (block RAM) and the
same cycle behaviour, so the cycle model (sw_sim) does not change:

* the read address is the head pointer as it will be next cycle (advanced when this cycle
  pops), so the RAM's registered output is the head entry in every cycle;
* a RAM read in the cycle its address is written returns the old word, so a word written into
  the slot that becomes the head is also kept in a bypass register, and ``r_data`` selects it.

:class:`HeadFIFO` keeps the head word in a register and the rest in a ring (a register for the
two-slot default channel, distributed RAM for deeper ones), so ``r_data`` comes straight from
flip-flops instead of through a RAM read multiplexer: the consumer's logic starts at a register
on every channel.

``tests/test_ram_fifo.py`` checks both against ``SyncFIFO`` cycle by cycle on random traffic.
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, Mux, Signal, Value
from amaranth.lib import memory

__all__ = ["HeadFIFO", "RamFIFO", "forwarded_read"]


def forwarded_read(m: Module, mem: memory.Memory, wp, addr: Value, name: str,
                   addr_q: Value | None = None) -> Value:
    """A synchronous read of ``mem[addr]`` (the word arrives next cycle) that sees the word
    ``wp`` writes in the cycle of the read: that word comes from a register, never from the
    RAM, so a read-during-write collision's RAM output is not used (``fpga.synth`` lets yosys
    leave it undefined, as the block RAMs do).

    ``addr_q``: a register that holds ``addr`` one cycle later.  The address compare then
    happens after the clock edge, between registers, instead of at the end of whatever logic
    computes ``addr``."""
    rp = mem.read_port(domain="sync")
    word = Signal(len(wp.data), name=f"{name}_fwd")
    m.d.comb += [rp.addr.eq(addr), rp.en.eq(1)]
    m.d.sync += word.eq(wp.data)
    if addr_q is None:
        hit = Signal(name=f"{name}_fwd_hit")
        m.d.sync += hit.eq(wp.en & (wp.addr == addr))
    else:
        wen, waddr = Signal(name=f"{name}_fwd_wen"), Signal(len(wp.addr), name=f"{name}_fwd_waddr")
        m.d.sync += [wen.eq(wp.en), waddr.eq(wp.addr)]
        hit = wen & (waddr == addr_q)
    return Mux(hit, word, rp.data)


class _FifoPorts(Elaboratable):
    """The ``SyncFIFO`` ports and the level / ready logic every FIFO here shares."""

    def __init__(self, width: int, depth: int) -> None:
        self.width, self.depth = width, depth
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.w_rdy = Signal()
        self.r_data = Signal(width)
        self.r_en = Signal()
        self.r_rdy = Signal()
        self.level = Signal(range(depth + 1))
        # the level's comparisons, registered beside it: a full, empty or one-word FIFO is known
        # from a flip-flop, not from logic on the level register (the head's load and select,
        # ``w_rdy`` and ``r_rdy`` fan out to every data bit, across the die once lanes spread)
        self.empty = Signal(init=1)
        self.one = Signal()
        self.full = Signal()

    def _handshake(self, m: Module) -> tuple[Signal, Signal]:
        """``w_rdy``, ``r_rdy`` and the level counter; returns (do_read, do_write)."""
        do_read, do_write = Signal(), Signal()
        nxt = Signal.like(self.level)
        m.d.comb += [
            self.w_rdy.eq(~self.full),
            self.r_rdy.eq(~self.empty),
            do_read.eq(self.r_rdy & self.r_en),
            do_write.eq(self.w_rdy & self.w_en),
            nxt.eq(self.level),
        ]
        with m.If(do_write & ~do_read):
            m.d.comb += nxt.eq(self.level + 1)
        with m.If(do_read & ~do_write):
            m.d.comb += nxt.eq(self.level - 1)
        m.d.sync += [self.level.eq(nxt), self.empty.eq(nxt == 0), self.one.eq(nxt == 1),
                     self.full.eq(nxt == self.depth)]
        return do_read, do_write


class RamFIFO(_FifoPorts):
    """``SyncFIFO``-compatible ports: ``w_data``, ``w_en``, ``w_rdy``, ``r_data``, ``r_en``,
    ``r_rdy``, ``level``."""

    def __init__(self, *, width: int, depth: int) -> None:
        if depth < 2:
            raise ValueError(f"RamFIFO depth {depth}: use at least 2 (smaller FIFOs are registers)")
        super().__init__(width, depth)

    def elaborate(self, platform) -> Module:
        m = Module()
        # The ring has a power-of-two number of words (a block RAM holds at least 256), so the
        # pointers wrap by themselves; the level still stops at ``depth``.
        ring = 1 << (self.depth - 1).bit_length()
        storage = m.submodules.storage = memory.Memory(shape=self.width, depth=ring, init=[])
        wp = storage.write_port()
        produce = Signal(range(ring))
        consume = Signal(range(ring))
        head_next = Signal(range(ring))
        do_read, do_write = self._handshake(m)
        m.d.comb += [
            wp.addr.eq(produce),
            wp.data.eq(self.w_data),
            wp.en.eq(do_write),
            head_next.eq(consume + do_read),
            # registered read (block RAM) of the next head; a word written into the slot that
            # becomes the head comes from the bypass register
            self.r_data.eq(forwarded_read(m, storage, wp, head_next, "head")),
        ]
        m.d.sync += [consume.eq(head_next), produce.eq(produce + do_write)]
        return m


class HeadFIFO(_FifoPorts):
    """``SyncFIFO(depth)``-compatible with the head in a register: ``r_data`` comes straight from
    flip-flops, so the consumer's logic starts at a register on every channel.

    The other ``depth - 1`` words wait in a ring (a register for ``depth == 2``, otherwise a
    memory with an asynchronous read port, distributed RAM on ECP5).  A pop loads the head from
    the ring's oldest word, addressed by a registered pointer, so the RAM read only feeds the
    head register's input.  A word written while nothing older is left (the FIFO is empty, or
    holds one word that is popped now) goes straight to the head: still visible the next cycle,
    as in ``SyncFIFO``.  The head's and the ring's write enables and data selects come from the
    level register (and the consumer's pop, for the head), never from the producer's ``w_en``,
    which only counts: the producer's decision logic ends at the level and write pointer."""

    def __init__(self, *, width: int, depth: int = 2) -> None:
        if depth < 2:
            raise ValueError(f"HeadFIFO depth {depth}: use at least 2")
        super().__init__(width, depth)

    def elaborate(self, platform) -> Module:
        # The producer's ``w_en`` only moves the level and the ring's write pointer: the data
        # is offered to the head and to the ring's free slot in every cycle with room, so no
        # write enable or data select waits for the producer's (or the consumer's) decision.
        m = Module()
        d = self.depth
        head = Signal(self.width)
        do_read, do_write = self._handshake(m)
        m.d.comb += self.r_data.eq(head)
        if d == 2:
            ring = Signal(self.width)
            oldest = ring
            with m.If(self.w_rdy):  # the tail is free whenever there is room
                m.d.sync += ring.eq(self.w_data)
        else:
            storage = m.submodules.storage = memory.Memory(shape=self.width, depth=d - 1, init=[])
            wp = storage.write_port()
            rp = storage.read_port(domain="comb")  # distributed RAM; feeds only `head`
            produce = Signal(range(d - 1))
            consume = Signal(range(d - 1))
            # the slot at ``produce`` is free whenever there is room
            m.d.comb += [wp.addr.eq(produce), wp.data.eq(self.w_data), wp.en.eq(self.w_rdy),
                         rp.addr.eq(consume)]
            oldest = rp.data
            to_head = self.empty | (self.one & do_read)  # nothing older is left
            with m.If(do_write & ~to_head):
                m.d.sync += produce.eq(Mux(produce == d - 2, 0, produce + 1))
            with m.If(do_read & ~self.empty & ~self.one):
                m.d.sync += consume.eq(Mux(consume == d - 2, 0, consume + 1))
        # An empty head, or one popped now, takes the written word when at most one word was
        # stored (else the ring's oldest); without a write it holds garbage and the level is 0.
        with m.If(self.empty | do_read):
            m.d.sync += head.eq(Mux(self.empty | self.one, self.w_data, oldest))
        return m
