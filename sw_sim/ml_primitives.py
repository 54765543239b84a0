"""Cycle models of the ML primitives: unary ALU, value repeat, coordinate mask, stop-token drop.

Each class mirrors the RTL primitive of the same name in ``hw/ml_primitives.py`` decision for
decision.  Common rule (as in :mod:`sw_sim.primitives`): a primitive acts in a cycle only when
every one of its output FIFOs has room.  Value arithmetic comes from :mod:`fuseflow.numerics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuseflow.numerics import INT32, Numerics
from fuseflow.samml import AluOp, MaskPred
from fuseflow.tokens import DONE, EMPTY, Control, Stop, stop

from .engine import Channel, Primitive
from .primitives import Repeat

__all__ = ["UnaryAlu", "val_repeat", "CrdMask", "mask_params", "StknDrop", "mask_keep"]


class UnaryAlu(Primitive):
    """Unary ALU (relu, neg, add/mul by ``scalar``, exp, rsqrt, sigmoid, gelu); latency 0, II 1.

    Fires when the input has a token and the output has room: data ``x`` -> ``f(x)``, ``N`` ->
    ``f(0)``, stops and ``D`` pass (``D`` finishes)."""

    def __init__(self, name, ins, outs, *, op: AluOp, scalar: float = 0.0, numerics: Numerics = INT32):
        super().__init__(name, ins, outs)
        self.inp = ins["a"]
        self.out = outs["val"]
        self.fn = numerics.unop(op, scalar, where=f"node {name!r} ({op.value})")

    def step(self) -> bool:
        inp = self.inp
        if not inp.q or self.out.full():
            return False
        tok = inp.pop()
        if not isinstance(tok, Control):
            self.out.push(self.fn(tok))
        elif tok is EMPTY:
            self.out.push(self.fn(0))
        else:
            self.out.push(tok)
            if tok is DONE:
                self.finish()
        return True


def val_repeat(name: str, ins: dict[str, Channel], outs: dict[str, Channel]) -> Repeat:
    """The repeat primitive on a value stream (``val`` + ``repsig`` -> ``val``): the same model."""
    return Repeat(name, {"ref": ins["val"], "repsig": ins["repsig"]}, {"ref": outs["val"]})


def mask_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Checked coordinate-mask parameters (``pred``, ``before``, ``after``, ``block``, ``pattern``)."""
    pred = params["pred"]
    pred = MaskPred(pred) if isinstance(pred, str) else pred
    where = f"node {name!r} (crd_mask {pred.value})"
    before, after, block = int(params.get("before", 0)), int(params.get("after", 0)), int(params.get("block", 1))
    pattern = tuple(tuple(int(bool(x)) for x in row) for row in params.get("pattern", ()))
    if pred is MaskPred.BAND and (before < 0 or after < 0):
        raise ValueError(f"{where}: before={before} and after={after} must be >= 0")
    if pred is MaskPred.BLOCK:
        if block < 1 or block & (block - 1):
            raise ValueError(f"{where}: block={block} must be a power of two")
        if not pattern or len({len(r) for r in pattern}) != 1 or not pattern[0]:
            raise ValueError(f"{where}: pattern must be a non-empty rectangular 0/1 matrix, got {pattern!r}")
    return {"pred": pred, "before": before, "after": after, "block": block, "pattern": pattern}


def mask_keep(pred: MaskPred, i: int, j: int, *, before: int = 0, after: int = 0, block: int = 1,
              pattern: tuple[tuple[int, ...], ...] = ()) -> bool:
    """Whether the entry (outer ``i``, inner ``j``) survives the mask.  Block coordinates outside
    ``pattern`` are masked."""
    if pred is MaskPred.CAUSAL:
        return j <= i
    if pred is MaskPred.BAND:
        return i - before <= j <= i + after
    bi, bj = i // block, j // block
    return bi < len(pattern) and bj < len(pattern[0]) and pattern[bi][bj] != 0


class CrdMask(Primitive):
    """Coordinate mask: in outer ``crd`` + inner ``crd`` + ``ref`` -> inner ``crd`` + ``ref``.

    ``cur`` holds the outer coordinate whose inner fiber is being read.  Fires when both outputs
    have room and the inner crd and ref heads are present.  Inner data: load ``cur`` from the
    outer input if empty (same cycle); emit crd and ref if :func:`mask_keep` holds; pop both.
    ``S0``: end of ``cur``'s fiber (an outer coordinate with an empty fiber is popped now); emit
    ``S0``.  ``Sk`` (k>=1): if no ``cur`` and the outer head is data, pop it and wait a cycle;
    then the outer head must be ``S(k-1)``: pop the three, emit ``Sk``.  ``D``: all three ``D``.
    A fiber the mask empties keeps its stop (use :class:`StknDrop` / crd_drop to prune it).
    Latency 0, II 1.
    """

    def __init__(self, name, ins, outs, *, pred: MaskPred, before: int = 0, after: int = 0, block: int = 1,
                 pattern: tuple[tuple[int, ...], ...] = ()):
        super().__init__(name, ins, outs)
        self.iouter, self.iinner, self.iref = ins["outer"], ins["inner"], ins["ref"]
        self.ocrd, self.oref = outs["crd"], outs["ref"]
        self.kw = {"before": before, "after": after, "block": block, "pattern": pattern}
        self.pred = pred
        self.cur: int | None = None

    def step(self) -> bool:
        inner, ref, outer = self.iinner, self.iref, self.iouter
        if not inner.q or not ref.q or self.ocrd.full() or self.oref.full():
            return False
        tok, r = inner.q[0], ref.q[0]
        if not isinstance(tok, Control):
            if isinstance(r, Control) and r is not EMPTY:
                raise self.error(f"inner coordinate {tok} but the ref stream is at {r}")
            if self.cur is None:
                if not outer.q:
                    return False
                if isinstance(outer.q[0], Control):
                    raise self.error(f"inner data {tok} but the outer stream is at {outer.q[0]}")
                self.cur = outer.pop()
            if mask_keep(self.pred, self.cur, tok, **self.kw):
                self.ocrd.push(tok)
                self.oref.push(r)
            inner.pop()
            ref.pop()
            return True
        if r is not tok:
            raise self.error(f"inner {tok} but the ref stream is at {r}")
        if not outer.q:
            return False
        oh = outer.q[0]
        if tok is DONE:
            if oh is not DONE:
                raise self.error(f"inner stream ended but the outer stream is at {oh}")
            outer.pop()
            inner.pop()
            ref.pop()
            self.ocrd.push(DONE)
            self.oref.push(DONE)
            self.finish()
            return True
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in the inner stream")
        if tok.level == 0:
            if self.cur is None:
                if isinstance(oh, Control):
                    raise self.error(f"inner S0 but the outer stream is at {oh}")
                outer.pop()
            self.cur = None
        elif self.cur is None and not isinstance(oh, Control):
            outer.pop()
            return True
        elif type(oh) is not Stop or oh.level != tok.level - 1:
            raise self.error(f"inner {tok} needs outer S{tok.level - 1}, but the outer stream is at {oh}")
        else:
            outer.pop()
            self.cur = None
        inner.pop()
        ref.pop()
        self.ocrd.push(tok)
        self.oref.push(tok)
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
