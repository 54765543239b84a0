"""Cycle engine: FIFO channels with registered handshakes and an event-driven scheduler.

Timing contract, shared with the RTL:

* A channel is the producer's output FIFO of ``depth`` entries (Amaranth ``SyncFIFO``): a token
  pushed in cycle ``t`` is visible to the consumer in cycle ``t + 1``; a slot freed by a pop in
  cycle ``t`` is visible to the producer in cycle ``t + 1`` (``w_rdy = level != depth``,
  ``r_rdy = level != 0``, no pass-through).  With depth 2 a chain sustains one token per cycle.
* Every primitive decides each cycle from its registers, the heads of its input FIFOs and
  whether its output FIFOs have room — all values at the start of the cycle — so the order in
  which this engine steps primitives within a cycle does not matter.
* A primitive that made no progress keeps its state; it sleeps until one of its channels
  changes.  Simulation work therefore grows with tokens moved, not with idle cycles.
"""

from __future__ import annotations

import gc
import heapq
from dataclasses import dataclass

from fuseflow.ir.tokens import Token, format_stream

__all__ = [
    "Channel",
    "DeadlockError",
    "Engine",
    "NodeStats",
    "NullChannel",
    "Primitive",
    "ProtocolError",
    "SimError",
]


class SimError(RuntimeError):
    pass


class ProtocolError(SimError):
    """A stream broke a primitive's protocol; the message names the node."""


class DeadlockError(SimError):
    """The graph stopped with work left; the message names the blocked nodes and channels."""


class Channel:
    __slots__ = (
        "_dirty_list",
        "consumer",
        "count",
        "depth",
        "dirty",
        "freed",
        "inc",
        "isfull",
        "name",
        "producer",
        "q",
    )

    def __init__(self, name: str, depth: int) -> None:
        self.name = name
        self.depth = depth
        self.q: list[Token] = []  # the FIFO's entries, head first (a list: FIFOs are short)
        self.freed = 0  # pops this cycle (their slots become free next cycle)
        self.inc: Token | None = None  # token pushed this cycle (visible next cycle)
        self.dirty = False
        self.producer: Primitive | None = None
        self.consumer: Primitive | None = None
        self.count = 0  # tokens transferred in total
        self.isfull = False  # start-of-cycle fullness (the registered w_rdy), updated at commit
        self._dirty_list: list[Channel] = []

    def full(self) -> bool:
        return self.isfull

    def head(self) -> Token | None:
        q = self.q
        return q[0] if q else None

    def pop(self) -> Token:
        self.freed += 1
        if not self.dirty:
            self.dirty = True
            self._dirty_list.append(self)
        return self.q.pop(0)

    def push(self, tok: Token) -> None:
        self.inc = tok
        self.count += 1
        if not self.dirty:
            self.dirty = True
            self._dirty_list.append(self)

    def occupancy(self) -> int:
        return len(self.q)

    def __repr__(self) -> str:
        return f"<{self.name} [{format_stream(list(self.q))}]>"


class NullChannel(Channel):
    """An output marked as discarded: always has room, keeps nothing (no FIFO in RTL)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, 1)

    def push(self, tok: Token) -> None:
        self.count += 1


@dataclass
class NodeStats:
    tokens_in: int = 0
    tokens_out: int = 0
    fire_cycles: int = 0  # cycles in which the node made progress
    stall_cycles: int = 0  # cycles waiting with an output FIFO full (back-pressure)
    starve_cycles: int = 0  # cycles waiting for input
    mem_cycles: int = 0  # cycles waiting for an off-chip memory line
    done_cycle: int | None = None


class Primitive:
    """Base of the sw_sim primitives: ``step()`` runs one cycle and returns True on progress."""

    def __init__(self, name: str, ins: dict[str, Channel], outs: dict[str, Channel]) -> None:
        self.name = name
        self.ins = ins
        self.outs = outs
        self.done = False
        self.stats = NodeStats()
        self.engine: Engine | None = None  # the engine running this primitive (its clock)
        self._sleep_since = -1
        self._fires = 0
        self._sched = -1  # the cycle the engine has listed this node for
        self.flops = 0  # value operations done (ALUs, reductions, accumulators): the FLOP counters
        for c in ins.values():
            c.consumer = self
        for c in outs.values():
            c.producer = self

    def step(self) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def outs_ready(self) -> bool:
        for c in self.outs.values():
            if c.isfull:
                return False
        return True

    @property
    def cycle(self) -> int:
        """The current cycle of the engine running this primitive (0 before it runs)."""
        return self.engine.cycle if self.engine is not None else 0

    def finish(self) -> None:
        self.done = True
        self.stats.done_cycle = self.cycle

    def error(self, msg: str) -> ProtocolError:
        return ProtocolError(f"node {self.name!r} ({type(self).__name__}): {msg} at cycle {self.cycle}")

    def waiting_on(self) -> str:
        full = [n for n, c in self.outs.items() if c.isfull]
        empty = [n for n, c in self.ins.items() if not c.q]
        parts = []
        if full:
            parts.append("output " + ", ".join(f"{n} full ({self.outs[n].name})" for n in full))
        if empty:
            parts.append("input " + ", ".join(f"{n} empty ({self.ins[n].name})" for n in empty))
        heads = {n: c.q[0] for n, c in self.ins.items() if c.q}
        if heads:
            parts.append("heads " + ", ".join(f"{n}={format_stream([t])}" for n, t in heads.items()))
        return "; ".join(parts) or "no pending input"


class Engine:
    """Runs primitives cycle by cycle until nothing can move.  Each primitive reads the cycle
    from the engine it is given to (``Primitive.engine``).

    The nodes to step in a cycle are kept in a list in the order they were woken; a node's
    ``_sched`` holds the cycle it is listed for, so waking it twice lists it once."""

    def __init__(self, prims: list[Primitive], channels: list[Channel], sinks: list[Primitive]) -> None:
        self.prims = prims
        self.channels = channels
        self.sinks = sinks  # the primitives whose completion ends the run (writers / sinks)
        self.cycle = 0
        self.dirty: list[Channel] = []
        self.node_cycles_active = 0
        self._nxt: list[Primitive] = []
        self._timers: list[tuple[int, int, Primitive]] = []  # (cycle, seq, node) wake-ups
        self._seq = 0
        for p in prims:
            p.engine = self

    def wake(self, p: Primitive) -> None:
        """Step ``p`` next cycle (the memory controller, when a port raises a request)."""
        if p._sched != self.cycle + 1:
            p._sched = self.cycle + 1
            self._nxt.append(p)

    def wake_at(self, p: Primitive, cycle: int) -> None:
        """Step ``p`` in ``cycle`` (a node whose memory line arrives then)."""
        self._seq += 1
        heapq.heappush(self._timers, (cycle, self._seq, p))

    def run(self, max_cycles: int = 50_000_000) -> int:
        """Run to the end (every sink done); the cycle count.  The cyclic garbage collector is
        paused meanwhile: the loop allocates many short-lived tuples and lists (each would count
        toward a collection) but makes no reference cycles."""
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(max_cycles)
        finally:
            if was_enabled:
                gc.enable()

    def _run(self, max_cycles: int) -> int:
        dirty: list[Channel] = []
        for ch in self.channels:
            ch._dirty_list = dirty
        awake: list[Primitive] = list(self.prims)
        for p in awake:
            p._sched = 0
        sinks_left = len(self.sinks)
        sink_set = set(self.sinks)
        end_cycle = 0
        cycle = 0
        timers = self._timers
        while awake or timers:
            if timers:
                cycle = self._due(awake, cycle)
            if cycle >= max_cycles:
                raise SimError(f"simulation exceeded {max_cycles} cycles")
            self.cycle = cycle
            nxt: list[Primitive] = []
            self._nxt = nxt
            after = cycle + 1
            for p in awake:
                if p.step():
                    p._fires += 1
                    if not p.done:
                        if p._sched != after:
                            p._sched = after
                            nxt.append(p)
                    elif p in sink_set:
                        sink_set.discard(p)
                        sinks_left -= 1
                        end_cycle = after
                elif not p.done:
                    p._sleep_since = after
            self.node_cycles_active += len(awake)
            cycle = after
            _commit(dirty, nxt, cycle)
            if sinks_left == 0:
                break
            awake = nxt
        self.cycle = cycle
        self._finish_stats()
        if sinks_left:
            self._deadlock()
        self.cycle = end_cycle
        return end_cycle

    def _due(self, awake: list[Primitive], cycle: int) -> int:
        """Wake the nodes whose timers are due (jumping ahead if nothing else is awake); the
        cycle to run."""
        timers = self._timers
        if not awake:
            cycle = max(cycle, timers[0][0])
        while timers and timers[0][0] <= cycle:
            w = heapq.heappop(timers)[2]
            if not w.done and w._sched != cycle:
                if w._sleep_since >= 0:
                    w.stats.mem_cycles += cycle - w._sleep_since
                    w._sleep_since = -1
                w._sched = cycle
                awake.append(w)
        return cycle

    def _finish_stats(self) -> None:
        for p in self.prims:
            p.stats.fire_cycles = p._fires
            p.stats.tokens_in = sum([c.count for c in p.ins.values()])
            p.stats.tokens_out = sum([c.count for c in p.outs.values()])

    def _deadlock(self) -> None:
        blocked = [p for p in self.prims if not p.done]
        lines = [f"{p.name}: {p.waiting_on()}" for p in blocked]
        raise DeadlockError(
            f"deadlock at cycle {self.cycle}: {len(blocked)} node(s) cannot finish:\n  "
            + "\n  ".join(lines)
        )


def _commit(dirty: list[Channel], nxt: list[Primitive], cycle: int) -> None:
    """End of a cycle: pushed tokens become visible, popped slots free; the consumers and
    producers of the changed channels are listed in ``nxt`` for ``cycle``."""
    # the two wake-ups are written out (not a helper): this loop runs for every token moved
    for ch in dirty:
        ch.dirty = False
        if ch.inc is not None:
            ch.q.append(ch.inc)
            ch.inc = None
            w = ch.consumer
            if w is not None and w._sched != cycle and not w.done:
                if w._sleep_since >= 0:
                    w.stats.starve_cycles += cycle - w._sleep_since
                    w._sleep_since = -1
                w._sched = cycle
                nxt.append(w)
        if ch.freed:
            ch.freed = 0
            w = ch.producer
            if w is not None and w._sched != cycle and not w.done:
                if w._sleep_since >= 0:
                    w.stats.stall_cycles += cycle - w._sleep_since
                    w._sleep_since = -1
                w._sched = cycle
                nxt.append(w)
        ch.isfull = len(ch.q) >= ch.depth
    dirty.clear()
