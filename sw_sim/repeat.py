"""Cycle models of the repeat primitives: repeat-signal generator and repeater."""

from __future__ import annotations

from fuseflow.ir.tokens import DONE, EMPTY, REPEAT, Control, Stop, stop

from .engine import Primitive
from .registry import plain

S0 = stop(0)


class RepSig(Primitive):
    """Repeat-signal generator: data -> ``R``, any stop -> ``S0``, ``D`` -> ``D``."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.inp = ins["in"]
        self.out = outs["repsig"]

    def step(self) -> bool:
        if not self.inp.q or self.out.isfull:
            return False
        tok = self.inp.pop()
        if not isinstance(tok, Control) or tok is EMPTY:
            self.out.push(REPEAT)
        elif tok is DONE:
            self.out.push(DONE)
            self.finish()
        else:
            self.out.push(S0)
        return True



class Repeat(Primitive):
    """Repeat: holds the current reference in a register.

    Fires when the output has room and a repeat signal is present.
    ``R``: emit the held ref (loading it from the ref input first, same cycle, if none is held).
    ``S`` with a held ref: look at the next ref: ``Sk`` -> pop it, emit ``S(k+1)``; other token
    -> emit ``S0``; nothing yet -> wait.  ``S`` with none held: a ref ``Sk`` at the head (an
    empty fiber of refs) -> pop it, emit ``S(k+1)``; a data ref (zero repeats) -> pop it into the
    register this cycle and handle the ``S`` next cycle.  ``D``: needs ref ``D``; emit ``D``.
    """

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.ref = ins["ref"]
        self.rs = ins["repsig"]
        self.out = outs["ref"]
        self.cur = None

    def step(self) -> bool:
        if not self.rs.q or self.out.isfull:
            return False
        sig = self.rs.q[0]
        ref = self.ref
        if sig is REPEAT:
            if self.cur is None:
                if not ref.q:
                    return False
                tok = ref.q[0]
                if type(tok) is Stop or tok is DONE:
                    raise self.error(f"repeat signal R but the ref stream is at {tok}")
                self.cur = ref.pop()
            self.out.push(self.cur)
            self.rs.pop()
            return True
        if sig is DONE:
            if not ref.q:
                return False
            if ref.q[0] is not DONE or self.cur is not None:
                raise self.error(f"repeat signal D but the ref stream is at {ref.q[0]}")
            ref.pop()
            self.rs.pop()
            self.out.push(DONE)
            self.finish()
            return True
        # S
        if self.cur is None:
            if not ref.q:
                return False
            tok = ref.pop() if ref.q[0] is not DONE else DONE
            if tok is DONE:
                raise self.error("repeat signal S but the ref stream is at D")
            if type(tok) is Stop:  # bare stop: an empty fiber of refs
                self.out.push(stop(tok.level + 1))
                self.rs.pop()
            else:
                self.cur = tok
            return True
        if not ref.q:
            return False
        nxt = ref.q[0]
        if type(nxt) is Stop:
            ref.pop()
            self.out.push(stop(nxt.level + 1))
        else:
            self.out.push(S0)
        self.cur = None
        self.rs.pop()
        return True


plain("repsig", RepSig)
plain("repeat", Repeat)
