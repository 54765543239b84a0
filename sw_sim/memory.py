"""Cycle model of the value load."""

from __future__ import annotations

from fuseflow.ir.samml import (
    PRIMITIVES,
)
from fuseflow.ir.tokens import EMPTY, Control, Vec

from .engine import Primitive
from .registry import Build, model
from .staged import Staged

LATENCY = next(s.latency for s in PRIMITIVES.values() if s.name == "array_load")


class ArrayLoad(Staged):
    """Value load ``vals[ref]`` (``N`` -> 0, control passes); II 1, latency 2 (the primitive
    table's): a block-RAM read stage, then a register for the word read, so the memory's slow
    clock-to-output has a cycle of its own.  A vector load (``lanes`` W > 1): a data reference
    ``r`` reads the W values ``vals[r*W .. r*W+W-1]`` as one vector token (``N`` -> a vector of
    zeros), with the same timing (one W-lane-wide memory word per cycle).

    Stages advance back to front as in :class:`Alu`: a full last stage whose output has room
    emits; the read stage moves up when the last stage is free; a free read stage pops."""

    def __init__(self, name, ins, outs, *, vals, mem=None, lanes: int = 1):
        super().__init__(name, ins, outs)
        self.mvals = (mem or {}).get("vals")  # off-chip port (sw_sim.dram)
        self.inp = ins["ref"]
        self.out = outs["val"]
        self.vals = list(vals)
        self.stages: list = [None] * LATENCY
        self.reads = 0  # vals words read
        self.lanes = lanes
        self.zero = 0 if lanes == 1 else Vec((0,) * lanes)  # what ``N`` loads

    def fill(self) -> bool:
        if not self.inp.q:
            return False
        tok = self.inp.q[0]
        if not isinstance(tok, Control):
            w = self.lanes
            lo, hi = tok * w, tok * w + w  # the words read: vals[lo:hi]
            if not (0 <= tok and hi <= len(self.vals)):
                raise self.error(self._outside(tok))
            if self.mvals is not None and not self.mvals.read(self.engine.cycle, lo, hi - 1):
                return False
            self.reads += w
            tok = self.vals[tok] if w == 1 else Vec(self.vals[lo:hi])
        elif tok is EMPTY:
            tok = self.zero
        self.inp.pop()
        self.stages[0] = tok
        return True

    def _outside(self, ref) -> str:
        n, w = len(self.vals), self.lanes
        lanes = f" ({n // w} vectors of {w} lanes)" if w > 1 else ""
        return f"reference {ref} outside vals array of {n} entries{lanes}"


class VecArrayLoad(ArrayLoad):
    """:class:`ArrayLoad` of vectors: the name of ``ArrayLoad(lanes=W)``, ``lanes`` required."""

    def __init__(self, name, ins, outs, *, vals, lanes: int, mem=None):
        super().__init__(name, ins, outs, vals=vals, mem=mem, lanes=lanes)


@model("array_load")
def _array_load(b: Build) -> Primitive:
    lanes = b.params.get("lanes", 1)
    if lanes > 1:
        return VecArrayLoad(b.name, b.ins, b.outs, vals=b.params["vals"], lanes=lanes, mem=b.params.get("mem"))
    return ArrayLoad(b.name, b.ins, b.outs, vals=b.params["vals"], mem=b.params.get("mem"))
