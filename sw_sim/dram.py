"""Cycle model of the off-chip memory: the channel controller and the nodes' memory ports.

The timing contract is ``docs/memory.md`` (the RTL model, ``hw/dram.py``, implements the same).
A node that reads or writes an off-chip array holds a :class:`MemPort` for it and asks it, in
the cycle it would access the array, whether the lines are there (:meth:`MemPort.read`,
:meth:`MemPort.write`, :meth:`MemPort.flush`).  The ports of a run share one
:class:`Controller`, itself a node of the engine: it grants one waiting request per cycle and
wakes the requesting node in the cycle the data is done.
"""

from __future__ import annotations

from fuseflow.ir.memory import MemoryModel
from fuseflow.ir.memory import MemPort as PortSpec

from .engine import Primitive

__all__ = ["Controller", "MemPort"]

IDLE, WAITING, GRANTED = 0, 1, 2


class MemPort:
    """One node's port on one off-chip array: two line tags and one request at a time."""

    __slots__ = ("ctrl", "done", "lines", "node", "req_cycle", "req_line", "spec", "state", "t0",
                 "t1", "unsent", "words")

    def __init__(self, ctrl: Controller, spec: PortSpec) -> None:
        self.ctrl = ctrl
        self.spec = spec
        self.node: Primitive | None = None  # the node that owns the port (woken on fills)
        self.t0 = self.t1 = -1
        self.state = IDLE
        self.req_line = self.req_cycle = self.done = 0
        self.unsent = 1 if spec.write and spec.array == "seg" else 0  # seg[0] = 0 is written first
        self.words = self.unsent  # words accessed (read or written)
        self.lines = 0  # lines moved (requests granted)

    def line(self, word: int) -> int:
        return word * self.spec.word_bytes // self.ctrl.model.burst_bytes

    def _settle(self, now: int) -> None:
        if self.state == GRANTED and now >= self.done:
            self.t1, self.t0 = self.t0, self.req_line
            self.state = IDLE

    def _raise(self, line: int, now: int) -> None:
        self.state = WAITING
        self.req_line = line
        self.req_cycle = now
        self.ctrl.request(self)

    def read(self, now: int, lo: int, hi: int) -> bool:
        """Access words ``lo..hi`` (one or two lines) in cycle ``now``: True if the lines are
        resident (the access proceeds, and the next line is prefetched); otherwise the lowest
        missing line is requested when the port is idle, and False."""
        self._settle(now)
        l0, l1 = self.line(lo), self.line(hi)
        t0, t1 = self.t0, self.t1
        if l0 != t0 and l0 != t1:
            if self.state == IDLE:
                self._raise(l0, now)
            return False
        if l1 != t0 and l1 != t1:
            if self.state == IDLE:
                self._raise(l1, now)
            return False
        self.words += hi - lo + 1
        if self.state == IDLE:
            nxt = l1 + 1
            if nxt != t0 and nxt != t1:
                self._raise(nxt, now)
        return True

    def write(self, now: int, word: int, count: int = 1) -> bool:
        """Write word ``word`` (``count`` > 1: the vector of words ``word .. word+count-1``,
        aligned, inside one line) in cycle ``now``: True if it is written (the last word of a
        line needs the port idle and sends the line)."""
        last = word + count - 1
        if ((last + 1) * self.spec.word_bytes) % self.ctrl.model.burst_bytes:
            self.unsent += count
            self.words += count
            return True
        self._settle(now)
        if self.state != IDLE:
            return False
        self.words += count
        self.unsent = 0
        self._raise(self.line(last), now)
        return True

    def flush(self, now: int, last_word: int) -> bool:
        """At ``D``: send the unsent words (their line holds ``last_word``); True once the port
        is idle with nothing unsent."""
        self._settle(now)
        if self.state != IDLE:
            return False
        if self.unsent:
            self.unsent = 0
            self._raise(self.line(last_word), now)
            return False
        return True


class Controller(Primitive):
    """The memory channel: one grant per cycle, round robin over the waiting ports whose request
    was raised before this cycle; bank rows, bus occupancy, turnarounds and bank switches (see
    ``docs/memory.md``)."""

    def __init__(self, model: MemoryModel, specs: list[PortSpec]) -> None:
        super().__init__("memory", {}, {})
        self.model = model
        self.ports = [MemPort(self, s) for s in specs]
        self.waiting: list[MemPort] = []
        self.rr = 0
        self.bus_free = 0
        self.open_row: list[int | None] = [None] * model.banks
        self.row_hits = self.row_misses = self.row_conflicts = 0
        self.turnarounds = self.bank_switches = 0  # between consecutive grants
        self.last_bank = self.last_write = -1  # of the previous grant (none yet)
        self.xfer = model.xfer_cycles
        m = model
        self.t_hit = m.latency + m.t_cl
        self.t_closed = m.latency + m.t_rcd + m.t_cl
        self.t_conflict = m.latency + m.t_rp + m.t_rcd + m.t_cl
        self.open_policy = m.policy == "open"

    def port(self, node: str, array: str) -> MemPort | None:
        for p in self.ports:
            if p.spec.node == node and p.spec.array == array:
                return p
        return None

    def request(self, port: MemPort) -> None:
        self.waiting.append(port)
        if self.engine is not None:
            self.engine.wake(self)

    def step(self) -> bool:
        now = self.cycle
        n = len(self.ports)
        best, best_key = None, n
        for p in self.waiting:
            if p.req_cycle < now:
                k = (p.spec.index - self.rr) % n
                if k < best_key:
                    best, best_key = p, k
        if best is None:
            return False
        self.waiting.remove(best)
        self._grant(best, now)
        self.rr = (best.spec.index + 1) % n
        return True

    def _grant(self, p: MemPort, now: int) -> None:
        bank, row = p.spec.bank_row(self.model, p.req_line)
        if not self.open_policy:
            a = self.t_closed
            self.row_misses += 1
        else:
            cur = self.open_row[bank]
            if cur == row:
                a = self.t_hit
                self.row_hits += 1
            elif cur is None:
                a = self.t_closed
                self.row_misses += 1
            else:
                a = self.t_conflict
                self.row_conflicts += 1
            self.open_row[bank] = row
        gap = 0  # the bus waits after a transfer of the other direction / in another bank
        if self.last_bank >= 0:
            if p.spec.write != self.last_write:
                gap += self.model.t_turn
                self.turnarounds += 1
            if bank != self.last_bank:
                gap += self.model.t_switch
                self.bank_switches += 1
        self.last_bank, self.last_write = bank, p.spec.write
        start = max(now + a, self.bus_free + gap)
        done = start + self.xfer
        self.bus_free = done
        p.state = GRANTED
        p.done = done
        p.lines += 1
        if p.node is not None and self.engine is not None:
            self.engine.wake_at(p.node, done)
