"""Cycle models of the parallel-region primitives: the stream parallelizer and serializer
(split policy and stop-token rules: :mod:`fuseflow.ir.primitives.parallel`)."""

from __future__ import annotations

from fuseflow.ir.tokens import DONE, EMPTY, REPEAT, Control, Stop, stop

from .engine import Primitive
from .registry import Build, model


def _is_item(tok) -> bool:
    """A data token, ``N`` or a repeat signal's ``R``: one coordinate position of the stream.
    (``R`` travels as a data word in hardware: a repeat-signal stream splits at its ``R`` tokens.)"""
    return not isinstance(tok, Control) or tok is EMPTY or tok is REPEAT


class Parallelize(Primitive):
    """Round-robin split.  Fires when the input has a token and the outputs it goes to have
    room: a data token (or ``N``, ``R``) goes to lane ``ptr`` (and ``ptr`` to ``sel``), then
    ``ptr`` advances modulo n; a stop or ``D`` goes to every lane and to ``sel``.  ``D`` resets
    ``ptr`` to 0.  Latency 0, II 1."""

    def __init__(self, name, ins, outs, *, n: int):
        super().__init__(name, ins, outs)
        self.inp = ins["in"]
        self.lanes = [outs[f"out{i}"] for i in range(n)]
        self.sel = outs["sel"]
        self.n = n
        self.ptr = 0

    def step(self) -> bool:
        inp = self.inp
        if not inp.q or self.sel.isfull:
            return False
        tok = inp.q[0]
        if _is_item(tok):
            lane = self.lanes[self.ptr]
            if lane.isfull:
                return False
            inp.pop()
            lane.push(tok)
            self.sel.push(self.ptr)
            self.ptr = self.ptr + 1 if self.ptr + 1 < self.n else 0
            return True
        for lane in self.lanes:
            if lane.isfull:
                return False
        inp.pop()
        for lane in self.lanes:
            lane.push(tok)
        self.sel.push(tok)
        if tok is DONE:
            self.ptr = 0
            self.finish()
        return True


class Serialize(Primitive):
    """Merge of n lanes in the order of ``sel``.  Fires only when the output has room.

    below = 0: ``sel`` data p -> pop lane p's token (a data token, ``N`` or ``R``) and emit it;
    ``sel`` control c -> pop c from every lane and emit it once.  II 1.

    below = d >= 1: the register ``cur`` holds the ``sel`` token being served (loading it into an
    empty ``cur`` takes a cycle without output: at the start and after ``D``).  ``cur`` = lane
    p: lane p's data, ``N`` and stops below level d - 1 are copied; its stop of level >= d - 1
    ends the item: the node waits for the next ``sel`` token, then pops the stop and emits
    ``S(d-1)`` if that token is data (the merged fiber goes on), the lane's stop otherwise, and
    loads ``cur`` from ``sel``.  ``cur`` = stop ``Sm`` (the merged fiber ends): every lane that
    had no item in the fiber pops its lone ``S(d+m)``; if no lane had one the node emits it (an
    empty fiber); then ``cur`` is loaded from ``sel`` if it has a token.  ``cur`` = ``D``: pops
    ``D`` from every lane and emits it.
    """

    def __init__(self, name, ins, outs, *, n: int, below: int):
        super().__init__(name, ins, outs)
        self.sel = ins["sel"]
        self.lanes = [ins[f"in{i}"] for i in range(n)]
        self.out = outs["out"]
        self.n = n
        self.below = below
        self.cur = None
        self.had = [False] * n

    def step(self) -> bool:
        if self.out.isfull:
            return False
        return self._step0() if self.below == 0 else self._step_deep()

    def _all_heads(self, expect) -> bool:
        """Pop ``expect`` from every lane if each has a token (a protocol error if one differs)."""
        for lane in self.lanes:
            if not lane.q:
                return False
        for i, lane in enumerate(self.lanes):
            tok = lane.pop()
            if tok is not expect:
                raise self.error(f"lane {i} has {tok} where the others close with {expect}")
        return True

    def _step0(self) -> bool:
        sel = self.sel
        if not sel.q:
            return False
        s = sel.q[0]
        if isinstance(s, Control):
            if not self._all_heads(s):
                return False
            sel.pop()
            self.out.push(s)
            if s is DONE:
                self.finish()
            return True
        lane = self.lanes[s]
        if not lane.q:
            return False
        tok = lane.pop()
        if not _is_item(tok):
            raise self.error(f"lane {s} has {tok} where sel expects a coordinate")
        sel.pop()
        self.out.push(tok)
        return True

    def _step_deep(self) -> bool:
        cur, sel = self.cur, self.sel
        if cur is None:
            if not sel.q:
                return False
            self.cur = sel.pop()
            return True
        if type(cur) is Stop:
            return self._close(cur)
        if cur is DONE:
            if not self._all_heads(DONE):
                return False
            self.out.push(DONE)
            self.cur = None
            self.finish()
            return True
        lane = self.lanes[cur]
        if not lane.q:
            return False
        tok = lane.q[0]
        d = self.below
        if type(tok) is not Stop or tok.level < d - 1:
            if tok is DONE:
                raise self.error(f"lane {cur} ended where sel expects an item")
            self.out.push(lane.pop())
            return True
        if not sel.q:
            return False
        nxt = sel.pop()
        lane.pop()
        self.had[cur] = True
        if _is_item(nxt):
            self.out.push(stop(d - 1))
        elif nxt is DONE or tok.level != d + nxt.level:
            raise self.error(f"lane {cur} closes with {tok} where sel closes with {nxt}")
        else:
            self.out.push(tok)
        self.cur = nxt
        return True

    def _close(self, cur: Stop) -> bool:
        lone = [i for i in range(self.n) if not self.had[i]]
        for i in lone:
            if not self.lanes[i].q:
                return False
        want = stop(self.below + cur.level)
        for i in lone:
            tok = self.lanes[i].pop()
            if tok is not want:
                raise self.error(f"lane {i} has {tok} where its empty fiber closes with {want}")
        if len(lone) == self.n:
            self.out.push(want)
        self.had = [False] * self.n
        self.cur = self.sel.pop() if self.sel.q else None
        return True


@model("parallelize")
def _parallelize(b: Build) -> Primitive:
    return Parallelize(b.name, b.ins, b.outs, n=b.params["n"])


@model("serialize")
def _serialize(b: Build) -> Primitive:
    return Serialize(b.name, b.ins, b.outs, n=b.params["n"], below=b.params["below"])
