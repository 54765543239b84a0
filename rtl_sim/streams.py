"""Reusable cocotb helpers for the generated tops (docs/cocotb.md).

* :class:`StreamSource` / :class:`StreamSink`: queue-style ends of an ``amaranth.lib.stream``
  port (``<prefix>__valid``, ``<prefix>__ready``, ``<prefix>__payload`` in the Verilog):
  ``send(word)`` / ``await wait_idle()`` and ``await recv()``, with an optional pause generator
  (an iterator of bools, one per clock cycle, ``True`` to hold back) and the clock passed in.
  The project's primitive testbench uses them too.
* :class:`HostPort`: the bus master of the tops' host port.

All follow Amaranth's stream rules: a source holds ``valid`` and ``payload`` until the beat is
taken; ready may change every cycle.  Each works per clock cycle: after a rising edge it sets
its outputs for the cycle, then samples in the read-only phase whether a transfer happens at
the next edge.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import cocotb
from cocotb.queue import Queue
from cocotb.triggers import Event, ReadOnly, RisingEdge

__all__ = ["HostPort", "StreamSink", "StreamSource", "port_signal"]


def port_signal(dut, prefix: str, member: str):
    return getattr(dut, f"{prefix}__{member}")


def _pauses(pause: Iterable[bool] | None) -> Iterator[bool] | None:
    return None if pause is None else iter(pause)


class _StreamEnd:
    """The three signals of stream port ``prefix``, the clock and the cycle task."""

    def __init__(self, dut, prefix: str, clock, pause: Iterable[bool] | None) -> None:
        self.prefix = prefix
        self.clock = clock
        self.valid = port_signal(dut, prefix, "valid")
        self.ready = port_signal(dut, prefix, "ready")
        self.payload = port_signal(dut, prefix, "payload")
        self.width = len(self.payload)
        self.count = 0  # beats transferred
        self._pause = _pauses(pause)
        self._task = None

    def set_pause_generator(self, pause: Iterable[bool] | None = None) -> None:
        """From the next cycle on, hold back on the cycles ``pause`` yields ``True`` for (a
        finished or absent generator: never)."""
        self._pause = _pauses(pause)

    def _paused(self) -> bool:
        if self._pause is None:
            return False
        try:
            return bool(next(self._pause))
        except StopIteration:
            self._pause = None
            return False

    def _start(self, coro) -> None:
        self._task = cocotb.start_soon(coro)

    def stop(self) -> None:
        """Stop driving the port (the cycle task ends; outputs keep their last value)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None


class StreamSource(_StreamEnd):
    """Drives stream port ``prefix`` of ``dut`` (an input of the top) from a queue of words.

    ``send(word)`` queues a payload word (an integer of the port's width, e.g. from
    :func:`hw.word.encode_word`); ``await wait_idle()`` returns once every queued word has been
    taken.  ``pause`` (or :meth:`set_pause_generator`): one bool per clock cycle; on a ``True``
    cycle the source offers no new word.  A word already offered stays offered until taken
    (Amaranth's stream rule: ``valid`` does not drop before the transfer), so a pause delays
    the next word, never withdraws one.
    """

    def __init__(self, dut, prefix: str, clock, *, pause: Iterable[bool] | None = None) -> None:
        super().__init__(dut, prefix, clock, pause)
        self.queue: deque[int] = deque()
        self._idle = Event()
        self._idle.set()
        self.valid.value = 0
        self._start(self._run())

    def send(self, word: int) -> None:
        """Queue one payload word (sent in order, one per cycle at most)."""
        word = int(word)
        if not 0 <= word < 1 << self.width:
            raise ValueError(f"{self.prefix}: word {word:#x} does not fit the {self.width}-bit payload")
        self.queue.append(word)
        self._idle.clear()

    def send_all(self, words: Iterable[int]) -> None:
        for w in words:
            self.send(w)

    def idle(self) -> bool:
        """Whether every queued word has been taken."""
        return self._idle.is_set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def _run(self) -> None:
        holding = False
        while True:
            paused = self._paused()
            if not holding and self.queue and not paused:
                self.payload.value = self.queue[0]
                holding = True
            self.valid.value = int(holding)
            await ReadOnly()
            if holding and int(self.ready.value):
                self.queue.popleft()
                self.count += 1
                holding = False
                if not self.queue:
                    self._idle.set()
            await RisingEdge(self.clock)


class StreamSink(_StreamEnd):
    """Takes the words of stream port ``prefix`` of ``dut`` (an output of the top) into a queue.

    ``await recv()`` returns the next word (``queue`` is a :class:`cocotb.queue.Queue`;
    ``recv_nowait()`` raises :class:`cocotb.queue.QueueEmpty` when nothing has arrived).  A word
    arrives in the read-only phase of the cycle it is taken in: await a clock edge before
    writing a signal after ``recv``.  ``cycle`` counts clock cycles since construction and
    ``last_cycle`` is the cycle of the last transfer.
    ``pause`` (or :meth:`set_pause_generator`): one bool per clock cycle; on a ``True`` cycle
    ``ready`` is low (back-pressure).
    """

    def __init__(self, dut, prefix: str, clock, *, pause: Iterable[bool] | None = None) -> None:
        super().__init__(dut, prefix, clock, pause)
        self.queue: Queue[int] = Queue()
        self.cycle = 0  # clock cycles since construction
        self.last_cycle = -1  # the cycle of the last transfer
        self.ready.value = 0
        self._start(self._run())

    async def recv(self) -> int:
        return await self.queue.get()

    def recv_nowait(self) -> int:
        return self.queue.get_nowait()

    def empty(self) -> bool:
        return self.queue.empty()

    async def _run(self) -> None:
        while True:
            ready = not self._paused()
            self.ready.value = int(ready)
            await ReadOnly()
            if ready and int(self.valid.value):
                self.queue.put_nowait(int(self.payload.value))
                self.count += 1
                self.last_cycle = self.cycle
            await RisingEdge(self.clock)
            self.cycle += 1


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
