"""Stream utilities: fan-out and empty-fiber pruning."""

from __future__ import annotations

from dataclasses import dataclass

from .base import PrimitiveSpec, StreamKind, doc


@dataclass(frozen=True)
class BroadcastParams:
    n: int = doc("number of consumers")
    stream: StreamKind = doc("kind of the stream", StreamKind.CRD)

    def check(self) -> list[str]:
        return [] if self.n >= 1 else [f"n={self.n} is too small"]


@dataclass(frozen=True)
class StknDropParams:
    stream: StreamKind = doc("kind of the stream", StreamKind.CRD)


DECLARATIONS = (
    PrimitiveSpec("broadcast", "stream", BroadcastParams, lambda p: {"in": p.stream},
                  lambda p: {f"out{i}": p.stream for i in range(p.n)}, "fan-out of one stream to n consumers"),
    PrimitiveSpec("stkn_drop", "stream", StknDropParams, lambda p: {"in": p.stream}, lambda p: {"out": p.stream},
                  "prunes empty fibers: merges runs of stops into the highest, drops a leading run", latency=1),
)
