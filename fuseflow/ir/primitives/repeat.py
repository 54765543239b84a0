"""Repeat primitives: repeat-signal generation and reference / value repetition."""

from __future__ import annotations

from dataclasses import dataclass

from .base import LANES_DOC, PrimitiveSpec, StreamKind, doc, stream_lanes_problems


@dataclass(frozen=True)
class RepSigParams:
    stream: StreamKind = doc("kind of the input stream", StreamKind.CRD)
    lanes: int = doc(LANES_DOC + " (of the input, stream=val only)", 1)

    def check(self) -> list[str]:
        return stream_lanes_problems(self.stream, self.lanes)


@dataclass(frozen=True)
class RepeatParams:
    stream: StreamKind = doc("kind of the repeated stream: ref, or val (factored iteration)",
                             StreamKind.REF)
    lanes: int = doc(LANES_DOC + " (stream=val only)", 1)

    def check(self) -> list[str]:
        if self.stream not in (StreamKind.REF, StreamKind.VAL):
            return [f"a repeat carries a ref or val stream, not {self.stream.value!r}"]
        return stream_lanes_problems(self.stream, self.lanes)


DECLARATIONS = (
    PrimitiveSpec("repsig", "repeat", RepSigParams, lambda p: {"in": p.stream},
                  lambda p: {"repsig": StreamKind.REPSIG}, "data -> R, stop -> S, D -> D"),
    PrimitiveSpec("repeat", "repeat", RepeatParams, lambda p: {"ref": p.stream, "repsig": StreamKind.REPSIG},
                  lambda p: {"ref": p.stream}, "repeats each reference (or value, stream=val) once per R",
                  nesting=lambda p, lv: {"ref": lv["repsig"]}),
)
