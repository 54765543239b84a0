"""Cycle model of the value load."""

from __future__ import annotations

from fuseflow.samml import (
    PRIMITIVES,
)
from fuseflow.tokens import EMPTY, Control, Vec

from .alu import Staged
from .engine import Primitive
from .registry import Build, model

LATENCY = next(s.latency for s in PRIMITIVES.values() if s.name == "array_load")


class ArrayLoad(Staged):
    """Value load ``vals[ref]`` (``N`` -> 0, control passes); II 1, latency 2 (the primitive
    table's): a block-RAM read stage, then a register for the word read, so the memory's slow
    clock-to-output has a cycle of its own.

    Stages advance back to front as in :class:`Alu`: a full last stage whose output has room
    emits; the read stage moves up when the last stage is free; a free read stage pops."""

    def __init__(self, name, ins, outs, *, vals, mem=None):
        super().__init__(name, ins, outs)
        self.mvals = (mem or {}).get("vals")  # off-chip port (sw_sim.dram)
        self.inp = ins["ref"]
        self.out = outs["val"]
        self.vals = list(vals)
        self.stages: list = [None] * LATENCY
        self.reads = 0  # vals words read

    def step(self) -> bool:
        progressed = self.advance()
        if progressed is None:
            return True
        st = self.stages
        if st[0] is None and self.inp.q:
            tok = self.inp.q[0]
            if not isinstance(tok, Control):
                if not 0 <= tok < len(self.vals):
                    raise self.error(f"reference {tok} outside vals array of {len(self.vals)} entries")
                if self.mvals is not None and not self.mvals.read(self.engine.cycle, tok, tok):
                    return progressed
                self.reads += 1
                tok = self.vals[tok]
            elif tok is EMPTY:
                tok = 0
            self.inp.pop()
            st[0] = tok
            progressed = True
        return progressed



class VecArrayLoad(ArrayLoad):
    """Vector load (``lanes`` W > 1): a data reference ``r`` reads the W values
    ``vals[r*W .. r*W+W-1]`` as one vector token (``N`` -> a vector of zeros), with the timing of
    :class:`ArrayLoad` (one W-lane-wide memory word per cycle)."""

    def __init__(self, name, ins, outs, *, vals, lanes: int, mem=None):
        super().__init__(name, ins, outs, vals=vals, mem=mem)
        self.lanes = lanes
        self.zero = Vec((0,) * lanes)

    def step(self) -> bool:
        progressed = self.advance()
        if progressed is None:
            return True
        st = self.stages
        if st[0] is None and self.inp.q:
            tok = self.inp.q[0]
            w = self.lanes
            if not isinstance(tok, Control):
                if not (0 <= tok and (tok + 1) * w <= len(self.vals)):
                    raise self.error(f"reference {tok} outside vals array of {len(self.vals)} entries "
                                     f"({len(self.vals) // w} vectors of {w} lanes)")
                if self.mvals is not None and not self.mvals.read(self.engine.cycle, tok * w, tok * w + w - 1):
                    return progressed
                self.reads += w
                tok = Vec(self.vals[tok * w:(tok + 1) * w])
            elif tok is EMPTY:
                tok = self.zero
            self.inp.pop()
            st[0] = tok
            progressed = True
        return progressed


@model("array_load")
def _array_load(b: Build) -> Primitive:
    lanes = b.params.get("lanes", 1)
    if lanes > 1:
        return VecArrayLoad(b.name, b.ins, b.outs, vals=b.params["vals"], lanes=lanes, mem=b.params.get("mem"))
    return ArrayLoad(b.name, b.ins, b.outs, vals=b.params["vals"], mem=b.params.get("mem"))
