"""8N1 UART and the UART <-> host-port bridge of the board top.

Wire protocol (all integers little-endian; the host speaks first, the bridge answers):

=========  =======================================  ==========================================
command    request bytes                            reply bytes
=========  =======================================  ==========================================
``W``      ``0x57`` addr:u32 n:u16 then n × u32     ``0x4B`` (``K``) once the n words are written,
                                                    then checksum:u32 of the words received
``R``      ``0x52`` addr:u32 n:u16                  n × u32: the words at addr, addr+1, …
``I``      ``0x49``                                 ident:u32 (identifies the built design)
=========  =======================================  ==========================================

Word ``i`` of a ``W``/``R`` goes to / comes from host-port address ``addr + i``.  The checksum
of a write (:func:`checksum`) starts at 0 and takes each word ``w`` as ``c = rotl(c, 1) ^ w``:
any single flipped bit, and most bursts, change it, so the host re-sends a transfer the board
received wrong (:mod:`fpga.host`).  Unknown command
bytes are ignored, so a host can resynchronise by sending a few zero bytes.  The host-port
registers (CTRL, CYCLES, lengths) and the tensor regions are those of :class:`hw.elaborate.MemoryMap`.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["ACK", "CMD_IDENT", "CMD_READ", "CMD_WRITE", "HostBridge", "UARTRx", "UARTTx", "checksum"]

CMD_WRITE, CMD_READ, CMD_IDENT, ACK = 0x57, 0x52, 0x49, 0x4B


def checksum(words) -> int:
    """The bridge's checksum of the words of a write (module docstring)."""
    c = 0
    for w in words:
        c = (((c << 1) | (c >> 31)) & 0xFFFFFFFF) ^ (w & 0xFFFFFFFF)
    return c


class UARTRx(wiring.Component):
    """Receives 8N1 frames on ``rx`` at ``divisor`` clock cycles per bit.

    Each byte appears on ``data`` for one cycle with ``valid`` high, about half a bit after its
    stop bit starts; a frame whose stop bit is low is dropped.  ``rx`` is synchronised inside.
    """

    def __init__(self, divisor: int) -> None:
        if divisor < 4:
            raise ValueError(f"UART divisor {divisor} is below 4 clock cycles per bit")
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(8), "valid": Out(1)})

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        timer = Signal(range(self.divisor))
        bit = Signal(range(9))
        shreg = Signal(8)
        m.d.sync += self.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"), m.If(~rx):
                m.d.sync += timer.eq(self.divisor // 2 - 1)
                m.next = "START"
            with m.State("START"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(rx):  # glitch, not a start bit
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [timer.eq(self.divisor - 1), bit.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [
                        timer.eq(self.divisor - 1),
                        shreg.eq(Cat(shreg[1:], rx)),
                        bit.eq(bit + 1),
                    ]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    with m.If(rx):
                        m.d.sync += [self.data.eq(shreg), self.valid.eq(1)]
                    m.next = "IDLE"
        return m


class UARTTx(wiring.Component):
    """Sends the bytes of stream ``i`` as 8N1 frames on ``tx``, ``divisor`` cycles per bit.

    ``i.ready`` is high while the transmitter is idle; a byte is taken in the cycle both are high.
    """

    def __init__(self, divisor: int) -> None:
        if divisor < 4:
            raise ValueError(f"UART divisor {divisor} is below 4 clock cycles per bit")
        self.divisor = divisor
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        shreg = Signal(10, init=0x3FF)
        left = Signal(range(11))
        m.d.comb += [self.tx.eq(shreg[0]), self.i.ready.eq(left == 0)]
        with m.If(left == 0), m.If(self.i.valid):
            m.d.sync += [
                shreg.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))),
                left.eq(10),
                timer.eq(self.divisor - 1),
            ]
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Else():
            m.d.sync += [
                shreg.eq(Cat(shreg[1:], Const(1, 1))),
                left.eq(left - 1),
                timer.eq(self.divisor - 1),
            ]
        return m


class HostBridge(wiring.Component):
    """Decodes the wire protocol (module docstring) from ``rx_*`` bytes into host-port accesses
    and sends replies on ``tx``.

    Host port: ``host_addr``/``host_wdata``/``host_we`` driven here, ``host_rdata`` is sampled
    two cycles after the address: the graph top's read latency plus the register
    :class:`fpga.board_top.BoardCore` puts after its read multiplexer (so the block-RAM
    clock-to-output and that multiplexer have a cycle of their own).  ``activity`` pulses for
    every command byte taken.  With ``wait`` (a top with its tensors in DRAM) a write is held,
    and a read's data waited for, while ``host_wait`` is high; the longest hold (a DRAM write,
    a refresh) is far shorter than a byte on the line, so no byte is missed; the ident reply
    waits for it too, so a host that starts with the ident (as :mod:`fpga.host` does) never
    writes while the DRAM initialises.
    """

    def __init__(self, addr_width: int, ident: int, wait: bool = False) -> None:
        self.addr_width, self.ident, self.wait = addr_width, ident & 0xFFFFFFFF, wait
        super().__init__(
            {
                "rx_data": In(8),
                "rx_valid": In(1),
                "tx": Out(stream.Signature(8)),
                "host_addr": Out(addr_width),
                "host_wdata": Out(32),
                "host_we": Out(1),
                "host_rdata": In(32),
                "activity": Out(1),
                # ``wait``: a top that is not always ready (DRAM: initialising, a write on its way,
                # a read being fetched) holds a write, and a read's data, while this is high
                "host_wait": In(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        cmd = Signal(8)
        addr = Signal(self.addr_width)  # the bits of the u32 address the host port decodes
        count = Signal(16)
        word = Signal(32)
        csum = Signal(32)  # the checksum of this write's words
        nbyte = Signal(range(4))
        byte_in = self.rx_data
        got = self.rx_valid
        m.d.comb += [self.host_addr.eq(addr), self.host_wdata.eq(word)]
        m.d.sync += self.activity.eq(0)
        with m.FSM():
            with m.State("CMD"), m.If(got):
                m.d.sync += [cmd.eq(byte_in), nbyte.eq(0), self.activity.eq(1), csum.eq(0)]
                with m.If((byte_in == CMD_WRITE) | (byte_in == CMD_READ)):
                    m.next = "ADDR"
                with m.Elif(byte_in == CMD_IDENT):
                    m.d.sync += [word.eq(self.ident), nbyte.eq(0)]
                    m.next = "IWAIT" if self.wait else "SEND"
            if self.wait:  # the ident answers once the top is ready (DRAM initialised)
                with m.State("IWAIT"), m.If(~self.host_wait):
                    m.next = "SEND"
            with m.State("ADDR"), m.If(got):
                m.d.sync += nbyte.eq(nbyte + 1)
                with m.Switch(nbyte):
                    for i in range(4):
                        if 8 * i < self.addr_width:
                            with m.Case(i):
                                hi = min(8 * i + 8, self.addr_width)
                                m.d.sync += addr[8 * i:hi].eq(byte_in[:hi - 8 * i])
                with m.If(nbyte == 3):
                    m.d.sync += nbyte.eq(0)
                    m.next = "COUNT"
            with m.State("COUNT"), m.If(got):
                _shift_in(m, count, byte_in, nbyte, 2, "DISPATCH")
            with m.State("DISPATCH"):
                with m.If(cmd == CMD_WRITE):
                    m.next = "WDATA"
                    with m.If(count == 0):
                        m.next = "ACK"
                with m.Else():
                    m.next = "RADDR"
                    with m.If(count == 0):
                        m.next = "CMD"
            with m.State("WDATA"), m.If(got):
                _shift_in(m, word, byte_in, nbyte, 4, "WRITE")
            with m.State("WRITE"), m.If(~self.host_wait if self.wait else 1):
                m.d.comb += self.host_we.eq(1)
                m.d.sync += [addr.eq(addr + 1), count.eq(count - 1), csum.eq(Cat(csum[31], csum[:31]) ^ word)]
                m.next = "WDATA"
                with m.If(count == 1):
                    m.next = "ACK"
            with m.State("ACK"):  # then the checksum of the words written
                m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(ACK)]
                with m.If(self.tx.ready):
                    m.d.sync += [word.eq(csum), nbyte.eq(0)]
                    m.next = "SEND"
            with m.State("RADDR"):  # host_addr = addr this cycle; the top reads it at the edge
                m.next = "RHOLD" if self.wait else "RWAIT"
            if self.wait:
                with m.State("RHOLD"), m.If(~self.host_wait):  # the top has the word at addr now
                    m.next = "RWAIT"
            with m.State("RWAIT"):  # ... and BoardCore registers host_rdata at the next one
                m.next = "RDATA"
            with m.State("RDATA"):
                m.d.sync += [
                    word.eq(self.host_rdata),
                    nbyte.eq(0),
                    addr.eq(addr + 1),
                    count.eq(count - 1),
                ]
                m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(word[:8])]
                with m.If(self.tx.ready):
                    m.d.sync += [word.eq(word >> 8), nbyte.eq(nbyte + 1)]
                    with m.If(nbyte == 3):
                        m.d.sync += nbyte.eq(0)
                        m.next = "CMD"
                        with m.If((cmd == CMD_READ) & (count != 0)):
                            m.next = "RADDR"
        return m


def _shift_in(m: Module, reg: Signal, byte: Signal, nbyte: Signal, n: int, then: str) -> None:
    """Take ``byte`` as the next of the ``n`` little-endian bytes of ``reg`` (shifted in from the
    top); after the last one, go to state ``then``."""
    m.d.sync += [reg.eq(Cat(reg[8:], byte)), nbyte.eq(nbyte + 1)]
    with m.If(nbyte == n - 1):
        m.d.sync += nbyte.eq(0)
        m.next = then
