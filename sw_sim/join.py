"""Cycle models of the joiners: n-ary intersection and union."""

from __future__ import annotations

from fuseflow.ir.tokens import DONE, EMPTY, Control, stop

from .engine import Primitive
from .registry import Build, model

S0 = stop(0)


class _Joiner(Primitive):
    def __init__(self, name, ins, outs, *, n: int):
        super().__init__(name, ins, outs)
        self.n = n
        self.icrd = [ins[f"crd{i}"] for i in range(n)]
        self.iref = [ins[f"ref{i}"] for i in range(n)]
        self.ocrd = outs["crd"]
        self.oref = [outs[f"ref{i}"] for i in range(n)]
        self.all_in = self.icrd + self.iref

    def _heads(self):
        for c in self.all_in:
            if not c.q:
                return None
        if not self.outs_ready():
            return None
        return [c.q[0] for c in self.icrd]

    def _all_control(self, heads):
        """Handle the all-stop / all-done cases; returns True if it acted."""
        first = heads[0]
        for h in heads:
            if h is not first:
                raise self.error(
                    "inputs disagree on control tokens: " + ", ".join([str(x) for x in heads])
                )
        for i in range(self.n):
            self.icrd[i].pop()
            self.iref[i].pop()
            self.oref[i].push(first)
        self.ocrd.push(first)
        if first is DONE:
            self.finish()
        return True



class Intersect(_Joiner):
    """n-ary intersection.  Fires when every input (crd and ref) has a token and every output
    has room.  All data, equal: emit the coordinate and each ref, pop all.  All data, unequal:
    pop the inputs below the maximum.  Some data, some stops: pop the data inputs.  All control:
    they must be equal; emit and pop all."""

    def step(self) -> bool:
        heads = self._heads()
        if heads is None:
            return False
        n = self.n
        nctl = 0
        m = None
        for h in heads:
            if isinstance(h, Control):
                nctl += 1
            elif m is None or h > m:
                m = h
        if nctl == 0:
            return self._all_data(heads, m)
        if nctl == n:
            return self._all_control(heads)
        for h in heads:
            if h is DONE:
                raise self.error("an input reached D while another still has data")
        for i in range(n):
            if not isinstance(heads[i], Control):
                self._drop(i, S0)
        return True

    def _all_data(self, heads, m) -> bool:
        """Every head is a coordinate, ``m`` the largest: all equal -> emit it and the refs,
        pop all; else pop the inputs below ``m``."""
        for h in heads:
            if h != m:
                for i in range(self.n):
                    if heads[i] < m:
                        self._drop(i, m)
                return True
        self.ocrd.push(m)
        for i in range(self.n):
            self.icrd[i].pop()
            self.oref[i].push(self.iref[i].pop())
        return True

    def _drop(self, i: int, target) -> None:
        """Pop input ``i`` as lagging: everything of it below ``target`` (a coordinate, or
        ``S0``: the rest of its fiber) is not in the intersection."""
        self.icrd[i].pop()
        self.iref[i].pop()


class SkipIntersect(Intersect):
    """Intersection with skip outputs (``skip=true``): fires and pops exactly like
    :class:`Intersect` (its every output, the skip outputs included, must have room), and also
    tells each input it pops as lagging where to go: all data, unequal -> each input below the
    maximum ``m`` gets ``m`` on ``skip<i>``; some data, some stops -> each data input gets
    ``S0`` (the rest of its fiber is not needed); all ``D`` -> ``D`` on every skip output."""

    def __init__(self, name, ins, outs, *, n: int):
        super().__init__(name, ins, outs, n=n)
        self.oskip = [outs[f"skip{i}"] for i in range(n)]

    def _drop(self, i: int, target) -> None:
        Intersect._drop(self, i, target)  # (explicit base: the compiled model has no super() here)
        self.oskip[i].push(target)

    def _all_control(self, heads):
        if heads[0] is DONE:  # before finish(); disagreeing heads raise in the base class
            for o in self.oskip:
                o.push(DONE)
        return Intersect._all_control(self, heads)


class Union(_Joiner):
    """n-ary union.  Fires like Intersect.  Some data: emit the minimum coordinate ``m``; inputs
    at ``m`` pop and emit their ref, the others emit ``N``.  All control: equal, emit, pop all."""

    def step(self) -> bool:
        heads = self._heads()
        if heads is None:
            return False
        m = None
        for h in heads:
            if not isinstance(h, Control) and (m is None or h < m):
                m = h
        if m is None:
            return self._all_control(heads)
        for h in heads:
            if h is DONE:
                raise self.error("an input reached D while another still has data")
        self.ocrd.push(m)
        for i in range(self.n):
            if heads[i] == m and not isinstance(heads[i], Control):
                self.icrd[i].pop()
                self.oref[i].push(self.iref[i].pop())
            else:
                self.oref[i].push(EMPTY)
        return True



@model("intersect")
def _intersect(b: Build) -> Primitive:
    cls = SkipIntersect if b.params.get("skip") else Intersect
    return cls(b.name, b.ins, b.outs, n=b.params["n"])


@model("union")
def _union(b: Build) -> Primitive:
    return Union(b.name, b.ins, b.outs, n=b.params["n"])
