"""Cycle models of the stream utilities (broadcast, stop-token drop) and the test harness's
stream source and sink."""

from __future__ import annotations

from typing import Any

from fuseflow.ir.tokens import DONE, EMPTY, Control, Stop, stop

from .engine import Channel, Primitive
from .registry import plain


class Broadcast(Primitive):
    """Fan-out: when the input has a token and every output has room, copy it to all."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.inp = ins["in"]
        self.olist = list(outs.values())

    def step(self) -> bool:
        if not self.inp.q:
            return False
        for o in self.olist:
            if o.isfull:
                return False
        tok = self.inp.pop()
        for o in self.olist:
            o.push(tok)
        if tok is DONE:
            self.finish()
        return True



class StknDrop(Primitive):
    """Stop-token drop: prunes empty fibers from one stream (any kind).

    Definition: a run of consecutive stop tokens becomes one stop of the run's highest level; a
    run at the start of the stream is dropped, unless ``D`` follows it directly (then the whole
    stream is one empty fiber and the run's highest stop is kept).  Data and ``N`` pass.  This is
    the stream of the same fibertree with every empty fiber removed, at every level.

    One-token register ``held``.  Fires when the input has a token and the output has room:
    data -> emit ``held`` (unless it is a leading stop), hold the data; stop -> merge into a
    held stop (no output), or emit held data and hold the stop, or hold it; ``D`` -> emit
    ``held`` if any (``D`` stays), else emit ``D``.  Latency: a token leaves when its successor
    arrives; II 1.
    """

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.inp = ins["in"]
        self.out = outs["out"]
        self.held: Any = None
        self.lead = True  # no data token seen yet

    def step(self) -> bool:
        inp = self.inp
        if not inp.q or self.out.full():
            return False
        tok = inp.q[0]
        held = self.held
        if tok is DONE:
            if held is not None:
                self.out.push(held)
                self.held = None
                return True
            self.out.push(DONE)
            inp.pop()
            self.finish()
            return True
        inp.pop()
        if type(tok) is Stop:
            if type(held) is Stop:
                self.held = stop(max(held.level, tok.level))
                return True
            if held is not None:
                self.out.push(held)
            self.held = tok
            return True
        if isinstance(tok, Control) and tok is not EMPTY:
            raise self.error(f"unexpected token {tok}")
        if held is not None and not self.lead:
            self.out.push(held)
        self.held = tok
        self.lead = False
        return True



class Source(Primitive):
    """Test harness: pushes a token list, one per cycle when there is room."""

    def __init__(self, name, outs: dict[str, Channel], tokens):
        super().__init__(name, {}, outs)
        self.out = next(iter(outs.values()))
        self.tokens = list(tokens)
        self.pos = 0

    def step(self) -> bool:
        if self.pos >= len(self.tokens) or self.out.isfull:
            return False
        self.out.push(self.tokens[self.pos])
        self.pos += 1
        if self.pos == len(self.tokens):
            self.finish()
        return True



class Sink(Primitive):
    """Test harness: pops one token per cycle and records it; finishes on ``D``."""

    def __init__(self, name, ins: dict[str, Channel]):
        super().__init__(name, ins, {})
        self.inp = next(iter(ins.values()))
        self.tokens: list = []

    def step(self) -> bool:
        if not self.inp.q:
            return False
        tok = self.inp.pop()
        self.tokens.append(tok)
        if tok is DONE:
            self.finish()
        return True


plain("broadcast", Broadcast)
plain("stkn_drop", StknDrop)
