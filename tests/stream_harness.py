"""Test harness for cycle runs under random timing: sw_sim's stream ``Source`` and ``Sink``
that idle a cycle at random (seeded), so a network sees input gaps and output back-pressure."""

from __future__ import annotations

import random

from sw_sim.engine import Channel
from sw_sim.stream import Sink, Source


class GappySource(Source):
    """Pushes a token list, idling a cycle with probability ``gap`` (seeded) when it could push."""

    def __init__(self, name: str, out: Channel, tokens, gap: float, rng: random.Random):
        super().__init__(name, {"out": out}, tokens)
        self.gap, self.rng = gap, rng

    def step(self) -> bool:
        ready = self.pos < len(self.tokens) and not self.out.isfull
        if ready and self.rng.random() < self.gap:
            return True  # idle this cycle, try again next
        return super().step()


class StallingSink(Sink):
    """Pops with probability ``1 - stall`` per cycle (seeded) when a token waits, records;
    finishes on ``D``."""

    def __init__(self, name: str, inp: Channel, stall: float, rng: random.Random):
        super().__init__(name, {"in": inp})
        self.stall, self.rng = stall, rng

    def step(self) -> bool:
        if self.inp.q and self.rng.random() < self.stall:
            return True
        return super().step()
