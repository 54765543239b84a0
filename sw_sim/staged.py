"""Cycle model of a pipelined primitive: a chain of stage registers in front of one output
(the ALUs, the lane reduction, the value load)."""

from __future__ import annotations

from fuseflow.ir.tokens import DONE

from .engine import Channel, Primitive


class Staged(Primitive):
    """A chain of pipeline registers ``stages`` (front first) in front of output ``out``; each
    stage advances when the next one is free or is being emptied this cycle (the RTL's stage
    chain, ``hw.alu.stage_chain``).  A subclass fills the front stage (:meth:`fill`) and may
    transform a token as it leaves the front stage (:meth:`leave_front`)."""

    stages: list
    out: Channel

    def leave_front(self, v):
        """What the front stage's token becomes when it moves up (default: itself)."""
        return v

    def step(self) -> bool:
        """The stages advance (:meth:`advance`), then an empty front stage is filled
        (:meth:`fill`)."""
        progressed = self.advance()
        if progressed is None:
            return True
        if self.stages[0] is None and self.fill():
            progressed = True
        return progressed

    def fill(self) -> bool:
        """Front: load the (empty) front stage from the inputs if they allow; returns whether
        it did."""
        raise NotImplementedError

    def advance(self) -> bool | None:
        """Back: a full last stage whose output has room emits.  Middle: stages move up, back
        to front, into free (or just emptied) stages.  Returns whether anything moved, or
        ``None`` once ``D`` has left (the primitive is finished)."""
        progressed = False
        st = self.stages
        last = st[-1]
        if last is not None and not self.out.isfull:
            self.out.push(last)
            st[-1] = None
            if last is DONE:
                self.finish()
                return None
            progressed = True
        for k in range(len(st) - 2, -1, -1):
            if st[k] is not None and st[k + 1] is None:
                st[k + 1], st[k] = (self.leave_front(st[k]) if k == 0 else st[k]), None
                progressed = True
        return progressed
