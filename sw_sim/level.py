"""Cycle models of the level primitives: root, level scanner, level and value writers."""

from __future__ import annotations

from fuseflow.tensor import Format
from fuseflow.tokens import DONE, EMPTY, REPEAT, Control, Stop, stop

from .engine import Primitive
from .registry import Build, model, plain

S0 = stop(0)



_FIBER, _END, _IDLE = 0, 1, 2



class Root(Primitive):
    """Emits ``0`` then ``D`` (one per cycle, when its output has room)."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.out = outs["ref"]
        self.sent = 0

    def step(self) -> bool:
        if self.out.isfull:
            return False
        if self.sent == 0:
            self.out.push(0)
            self.sent = 1
        else:
            self.out.push(DONE)
            self.finish()
        return True



class Scan(Primitive):
    """Level scanner, compressed (``seg``/``crd``) or dense (``dim``); latency 2, II 1.

    Front stage: when the pipeline register is free (empty, or emptied by the back stage this
    cycle) and an input token is present, pop it into the register together with its fiber
    bounds (``seg[r], seg[r+1]`` read from memory, or ``r*dim, r*dim+dim``; ``N`` gives an empty
    fiber).  Back stage (fires when both outputs have room), by mode:
    FIBER: emit ``crd[p]`` (dense: ``p - start``) and ``p``; END after the last one.
    END (fiber finished, stop pending): register ``Sk`` -> emit ``S(k+1)``, consume;
    data/N -> emit ``S0`` and load that fiber; ``D`` -> emit ``S0`` (D stays).
    IDLE: ``Sk`` -> emit ``S(k+1)``; ``D`` -> emit ``D``, finish; data/N -> load (no output).
    """

    def __init__(self, name, ins, outs, *, seg=None, crd=None, dim=None):
        super().__init__(name, ins, outs)
        self.inp = ins["ref"]
        self.ocrd = outs["crd"]
        self.oref = outs["ref"]
        self.seg = None if seg is None else [int(x) for x in seg]
        self.crd = None if crd is None else [int(x) for x in crd]
        self.dim = dim
        self.pipe = None  # token in the pipeline register
        self.pipe_lo = self.pipe_hi = 0
        self.mode = _IDLE
        self.p = self.hi = self.lo = 0

    def _bounds(self, r):
        if self.seg is not None:
            if not 0 <= r < len(self.seg) - 1:
                raise self.error(f"reference {r} outside seg array of {len(self.seg)} entries")
            return self.seg[r], self.seg[r + 1]
        return r * self.dim, r * self.dim + self.dim

    def _load(self):
        self.lo = self.p = self.pipe_lo
        self.hi = self.pipe_hi
        self.mode = _FIBER if self.p < self.hi else _END

    def step(self) -> bool:
        progressed = False
        consumed = False
        pipe = self.pipe
        if not (self.ocrd.isfull or self.oref.isfull):
            mode = self.mode
            if mode == _FIBER:
                p = self.p
                self.ocrd.push(self.crd[p] if self.crd is not None else p - self.lo)
                self.oref.push(p)
                self.p = p = p + 1
                if p == self.hi:
                    self.mode = _END
                progressed = True
            elif pipe is not None:
                if type(pipe) is Stop:
                    s = stop(pipe.level + 1)
                    self.ocrd.push(s)
                    self.oref.push(s)
                    consumed = True
                    self.mode = _IDLE
                elif pipe is DONE:
                    if mode == _END:
                        self.ocrd.push(S0)
                        self.oref.push(S0)
                        self.mode = _IDLE
                    else:
                        self.ocrd.push(DONE)
                        self.oref.push(DONE)
                        consumed = True
                        self.finish()
                else:  # data or N: start the next fiber
                    if mode == _END:
                        self.ocrd.push(S0)
                        self.oref.push(S0)
                    self._load()
                    consumed = True
                progressed = True
        if consumed:
            self.pipe = None
        if self.pipe is None and self.inp.q:
            tok = self.inp.pop()
            if tok is EMPTY:
                self.pipe_lo = self.pipe_hi = 0
            elif not isinstance(tok, Control):
                self.pipe_lo, self.pipe_hi = self._bounds(tok)
            elif tok is REPEAT:
                raise self.error("R token on a ref stream")
            self.pipe = tok
            progressed = True
        return progressed



class _Writer(Primitive):
    """A writer pops one token per cycle from its one input and finishes on ``D``; data goes to
    ``on_data``, other control tokens to ``on_control``."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.inp = next(iter(ins.values()))

    def step(self) -> bool:
        if not self.inp.q:
            return False
        tok = self.inp.pop()
        if tok is DONE:
            self.finish()
        elif isinstance(tok, Control):
            self.on_control(tok)
        else:
            self.on_data(tok)
        return True

    def on_data(self, tok) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_control(self, tok) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class LevelWrite(_Writer):
    """Level writer: compressed appends ``crd`` and closes one ``seg`` fiber per stop (with
    ``skip_empty``, only per stop that follows a coordinate: under a compressed parent, empty
    fibers were dropped and their stops only close outer levels); dense counts coordinates.
    Pops one token per cycle; finishes on ``D``."""

    def __init__(self, name, ins, outs, *, compressed: bool, skip_empty: bool = False):
        super().__init__(name, ins, outs)
        self.compressed = compressed
        self.skip_empty = skip_empty
        self.seg = [0]
        self.crd: list[int] = []
        self.open = False  # a coordinate arrived since the last stop

    def on_control(self, tok) -> None:
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in a crd stream")
        if self.open or not self.skip_empty:
            self.seg.append(len(self.crd))
        self.open = False

    def on_data(self, tok) -> None:
        self.crd.append(tok)
        self.open = True


class ValsWrite(_Writer):
    """Values writer: appends each data token to ``vals`` (``N`` as 0); ignores stops; finishes
    on ``D``."""

    def __init__(self, name, ins, outs):
        super().__init__(name, ins, outs)
        self.vals: list = []

    def on_control(self, tok) -> None:
        if tok is EMPTY:
            self.vals.append(0)

    def on_data(self, tok) -> None:
        self.vals.append(tok)


@model("scan")
def _scan(b: Build) -> Primitive:
    if Format.parse(b.params.get("format", "compressed")) is Format.DENSE:
        return Scan(b.name, b.ins, b.outs, dim=int(b.params["dim"]))
    return Scan(b.name, b.ins, b.outs, seg=b.params["seg"], crd=b.params["crd"])


@model("write")
def _write(b: Build) -> Primitive:
    compressed = Format.parse(b.params.get("format", "compressed")) is Format.COMPRESSED
    return LevelWrite(b.name, b.ins, b.outs, compressed=compressed, skip_empty=bool(b.params["skip_empty"]))


plain("root", Root)
plain("vals_write", ValsWrite)
