"""Stream utilities: fan-out and empty-fiber pruning."""

from __future__ import annotations

from dataclasses import dataclass

from .base import LANES_DOC, PrimitiveSpec, StreamKind, doc, stream_lanes_problems


@dataclass(frozen=True)
class BroadcastParams:
    n: int = doc("number of consumers")
    stream: StreamKind = doc("kind of the stream", StreamKind.CRD)
    lanes: int = doc(LANES_DOC + " (stream=val only)", 1)

    def check(self) -> list[str]:
        return ([] if self.n >= 1 else [f"n={self.n} is too small"]) + stream_lanes_problems(self.stream, self.lanes)


@dataclass(frozen=True)
class StknDropParams:
    stream: StreamKind = doc("kind of the stream", StreamKind.CRD)
    lanes: int = doc(LANES_DOC + " (stream=val only)", 1)

    def check(self) -> list[str]:
        return stream_lanes_problems(self.stream, self.lanes)


DECLARATIONS = (
    PrimitiveSpec("broadcast", "stream", BroadcastParams, lambda p: {"in": p.stream},
                  lambda p: {f"out{i}": p.stream for i in range(p.n)}, "fan-out of one stream to n consumers"),
    PrimitiveSpec("stkn_drop", "stream", StknDropParams, lambda p: {"in": p.stream}, lambda p: {"out": p.stream},
                  "prunes empty fibers: merges runs of stops into the highest, drops a leading run", latency=1),
)
