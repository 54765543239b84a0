"""Cycle models of the level primitives: root, level scanner, level and value writers."""

from __future__ import annotations

from collections import deque

from fuseflow.ir.primitives.level import SKIP_GALLOP_SHIFT, SKIP_LINEAR
from fuseflow.ir.tensor import Format
from fuseflow.ir.tokens import DONE, EMPTY, REPEAT, Control, Stop, stop

from .engine import Primitive
from .registry import Build, model, plain

S0 = stop(0)



_FIBER, _END, _IDLE, _SEARCH = 0, 1, 2, 3



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
    """Level scanner, compressed (``seg``/``crd``; a non-unique level scans the same way, each
    stored position its own coordinate), singleton (``crd`` only) or dense (``dim``); latency 2,
    II 1.

    Front stage: when the pipeline register is free (empty, or emptied by the back stage this
    cycle) and an input token is present, pop it into the register together with its fiber
    bounds (``seg[r], seg[r+1]`` read from memory; singleton ``r, r+1``: the one position of the
    fibre; dense ``r*dim, r*dim+dim``; ``N`` gives an empty fiber).  Back stage (fires when both outputs have room), by mode:
    FIBER: emit ``crd[p]`` (dense: ``p - start``) and ``p``; END after the last one.
    END (fiber finished, stop pending): register ``Sk`` -> emit ``S(k+1)``, consume;
    data/N -> emit ``S0`` and load that fiber; ``D`` -> emit ``S0`` (D stays).
    IDLE: ``Sk`` -> emit ``S(k+1)``; ``D`` -> emit ``D``, finish; data/N -> load (no output).
    """

    def __init__(self, name, ins, outs, *, seg=None, crd=None, dim=None, mem=None, offset: int = 0,
                 stride: int = 1):
        super().__init__(name, ins, outs)
        self.offset, self.stride = offset, stride  # dense: coordinates offset, offset + stride, ...
        mem = mem or {}
        self.mseg, self.mcrd = mem.get("seg"), mem.get("crd")  # off-chip ports (sw_sim.dram)
        self.inp = ins["ref"]
        self.ocrd = outs["crd"]
        self.oref = outs["ref"]
        self.seg = None if seg is None else [int(x) for x in seg]
        self.crd = None if crd is None else [int(x) for x in crd]
        self.dim = dim
        self.seg_reads = self.crd_reads = 0  # words read
        self.pipe = None  # token in the pipeline register
        self.pipe_lo = self.pipe_hi = 0
        self.mode = _IDLE
        self.p = self.hi = self.lo = 0

    def _bounds(self, r):
        if self.seg is not None:
            if not 0 <= r < len(self.seg) - 1:
                raise self.error(f"reference {r} outside seg array of {len(self.seg)} entries")
            return self.seg[r], self.seg[r + 1]
        if self.crd is not None:  # singleton: position r holds the fibre's one coordinate
            if not 0 <= r < len(self.crd):
                raise self.error(f"reference {r} outside the singleton crd array of {len(self.crd)} entries")
            return r, r + 1
        return r * self.dim, r * self.dim + self.dim

    def _load(self):
        self.lo = self.p = self.pipe_lo
        self.hi = self.pipe_hi
        if self.dim is not None and self.lo < self.hi:  # dense: a lane's share starts at its offset
            self.p = self.lo + self.offset
        self.mode = _FIBER if self.p < self.hi else _END

    def step(self) -> bool:
        progressed = False
        if not (self.ocrd.isfull or self.oref.isfull):
            progressed = self._back()
        return self._front() or progressed

    def _back(self) -> bool:
        """The back stage (outputs have room); True if it acted."""
        mode = self.mode
        if mode == _FIBER:
            p = self.p
            if self.mcrd is not None and not self.mcrd.read(self.engine.cycle, p, p):
                return False
            self.ocrd.push(self.crd[p] if self.crd is not None else p - self.lo)
            self.oref.push(p)
            self.crd_reads += 1
            self.p = p = p + self.stride
            if p >= self.hi:
                self.mode = _END
            return True
        pipe = self.pipe
        if pipe is None:
            return False
        consumed = True
        if type(pipe) is Stop:
            s = stop(pipe.level + 1)
            self.ocrd.push(s)
            self.oref.push(s)
            self.mode = _IDLE
        elif pipe is DONE:
            if mode == _END:
                self.ocrd.push(S0)
                self.oref.push(S0)
                self.mode = _IDLE
                consumed = False
            else:
                self.ocrd.push(DONE)
                self.oref.push(DONE)
                self._outputs_done()
        else:  # data or N: start the next fiber
            if mode == _END:
                self.ocrd.push(S0)
                self.oref.push(S0)
            self._load()
        if consumed:
            self.pipe = None
        return True

    def _outputs_done(self) -> None:
        self.finish()

    def _front(self) -> bool:
        """The front stage: fill a free pipeline register; True if it popped."""
        if self.pipe is not None or not self.inp.q:
            return False
        tok = self.inp.q[0]
        if (self.mseg is not None and not isinstance(tok, Control)
                and not self.mseg.read(self.engine.cycle, tok, tok + 1)):
            return False
        self.inp.pop()
        if self.seg is not None and not isinstance(tok, Control):
            self.seg_reads += 2
        if tok is EMPTY:
            self.pipe_lo = self.pipe_hi = 0
        elif not isinstance(tok, Control):
            self.pipe_lo, self.pipe_hi = self._bounds(tok)
        elif tok is REPEAT:
            raise self.error("R token on a ref stream")
        self.pipe = tok
        return True


class SkipScan(Scan):
    """Compressed level scanner with coordinate skipping (``skip=true``): the plain scanner
    (:class:`Scan`) plus input ``skip``, on which an intersect sends skip requests: a target
    coordinate ``t`` (skip the positions of the current fiber whose coordinate is below ``t``),
    ``S0`` (the rest of the current fiber is not needed) and finally ``D``.

    The skip input is popped in every cycle it has a token (so it never fills and never holds
    its producer back).  A request is *fresh* when no stop token is queued in the ``crd``
    output FIFO (start of cycle): the intersect issued it in the previous cycle, while popping
    a data token of this scanner, so with no stop queued the scanner is still in the fiber the
    request was issued for (and if a stop is queued, it has moved on and the request is
    dropped).  A fresh request acts, instead of the back stage, when:

    * ``S0`` in FIBER or SEARCH mode: go to END (the fiber's stop follows as usual);
    * ``t`` in FIBER mode with ``crd[p] < t``: position ``p`` is not emitted, and a search for
      the first position ``q`` of the fiber with ``crd[q] >= t`` starts over ``[p+1, sh]``, with
      ``sh = min(hi, p + t - crd[p])`` (coordinates rise by at least 1 per position; ``q = hi``
      means no such position).

    Any other request is dropped (a target at or below ``crd[p]``, one arriving in END, IDLE or
    SEARCH mode, a stale one).  SEARCH mode (no output room needed): one crd read per cycle, at
    the probe position ``p``; ``v = crd[p]``.  A hit (``v >= t``) sets ``sh = p`` (and holds
    ``v`` as the coordinate at ``sh``) and raises ``sl`` to ``p - (v - t)``; a miss sets
    ``sl = p + 1`` and lowers ``sh`` to ``p + (t - v)`` (the coordinate at the new ``sh`` is
    then unknown).  When ``sl == sh`` the search has found ``q``: ``q == hi`` -> END; the
    coordinate at ``q`` known (this probe hit, or an earlier one at ``q``) and the outputs have
    room -> emit it now, then FIBER at ``q + 1`` (or END); else FIBER at ``q``.  Otherwise the
    next probe is ``min(sl + j, (sl + sh) // 2)``.  ``j`` is 0 for the first ``LINEAR``
    probes (the next positions); after them, if the coordinates seen predict the target at
    least ``LINEAR << GALLOP_SHIFT`` positions on (``t - v >= (v - v0) << GALLOP_SHIFT``,
    ``v0 = crd`` of the skipped position), ``j`` becomes 1, 3, 7, ... (a galloping search that
    turns into a binary search: about ``2 log2(q - p)`` cycles); if not, ``j`` stays 0 and the
    search keeps to the next positions, which costs what streaming there costs.  The scanner
    finishes when it has emitted ``D`` and popped ``D`` from ``skip``.
    """

    LINEAR = SKIP_LINEAR
    GALLOP_SHIFT = SKIP_GALLOP_SHIFT

    def __init__(self, name, ins, outs, *, seg, crd):
        super().__init__(name, ins, outs, seg=seg, crd=crd)
        self.iskip = ins["skip"]
        self.t = self.v0 = self.sl = self.sh = self.j = self.lin = 0
        self.known = False
        self.out_done = self.skip_done = False
        self._queued: deque[bool] = deque()  # stop flags of the tokens in the crd output FIFO
        self._queued_stops = 0

    def step(self) -> bool:
        acted = False
        progressed = False
        stale = self._stops_queued()
        if self.iskip.q:
            acted = self._request(self.iskip.pop(), stale)
            progressed = True
        if not acted:
            if self.mode == _SEARCH:
                self._search()
                progressed = True
            elif not (self.ocrd.isfull or self.oref.isfull):
                progressed = self._back() or progressed
        tok = self.ocrd.inc
        if tok is not None:
            self._queued.append(type(tok) is Stop)
            self._queued_stops += type(tok) is Stop
        return self._front() or progressed

    def _stops_queued(self) -> int:
        """Stop tokens in the crd output FIFO at the start of the cycle (what the FIFO held
        then: its tokens now plus those its consumer popped this cycle)."""
        held = len(self.ocrd.q) + self.ocrd.freed
        q = self._queued
        while len(q) > held:
            self._queued_stops -= q.popleft()
        return self._queued_stops

    def _request(self, tok, stale: int) -> bool:
        """Handle one skip request (``stale``: stops queued at the start of the cycle); True if
        it acted (instead of the back stage)."""
        if tok is DONE:
            self.skip_done = True
            if self.out_done:
                self.finish()
            return False
        if stale:
            return False  # stale: the fiber it was issued for is closed
        mode = self.mode
        if type(tok) is Stop:
            if mode == _FIBER or mode == _SEARCH:
                self.mode = _END
                return True
            return False
        if mode != _FIBER or not isinstance(tok, int) or self.crd[self.p] >= tok:
            return False
        p, v = self.p, self.crd[self.p]
        self.t, self.v0, self.sl, self.sh = tok, v, p + 1, min(self.hi, p + tok - v)
        self.known, self.j, self.lin = False, 0, self.LINEAR
        self._next(False)
        return True

    def _search(self) -> None:
        """One SEARCH cycle: compare the probe ``crd[p]`` with the target and narrow."""
        p, t = self.p, self.t
        v = self.crd[p]
        self.crd_reads += 1
        hit = v >= t
        if hit:
            self.sh, self.known = p, True
            self.sl = max(self.sl, p - (v - t))
        else:
            self.sl = p + 1
            if p + (t - v) < self.sh:
                self.sh, self.known = p + (t - v), False
            if self.lin:
                self.lin -= 1
                if not self.lin and t - v >= (v - self.v0) << self.GALLOP_SHIFT:
                    self.j = 1
            elif self.j:
                self.j = 2 * self.j + 1
        self._next(hit)

    def _next(self, hit: bool) -> None:
        """After narrowing: the next probe, or found: END (no position left), emit the found
        position now (its coordinate is known: this probe, or an earlier hit, and the outputs
        have room), or FIBER at it."""
        sl, sh = self.sl, self.sh
        if sl != sh:
            self.mode = _SEARCH
            self.p = min(sl + self.j, (sl + sh) >> 1)
            return
        self.mode = _FIBER
        self.p = sl
        if sl == self.hi:
            self.mode = _END
        elif (hit or self.known) and not (self.ocrd.isfull or self.oref.isfull):
            self._back()

    def _outputs_done(self) -> None:
        self.out_done = True
        if self.skip_done:
            self.finish()


class _Writer(Primitive):
    """A writer pops one token per cycle from its one input and finishes on ``D``; data goes to
    ``on_data``, other control tokens to ``on_control``; each returns False when an off-chip
    port holds the write back (the token stays).  ``D`` waits until the ports have sent every
    word (``docs/memory.md``)."""

    ARRAYS: tuple[str, ...] = ()

    def __init__(self, name, ins, outs, mem=None):
        super().__init__(name, ins, outs)
        self.inp = next(iter(ins.values()))
        mem = mem or {}
        self.ports = [(mem[a], a) for a in self.ARRAYS if mem.get(a) is not None]

    def step(self) -> bool:
        if not self.inp.q:
            return False
        tok = self.inp.q[0]
        if tok is DONE:
            if self.ports and not self._flushed():
                return False
            self.finish()
        elif isinstance(tok, Control):
            if not self.on_control(tok):
                return False
        elif not self.on_data(tok):
            return False
        self.inp.pop()
        return True

    def _flushed(self) -> bool:
        now = self.engine.cycle
        done = [port.flush(now, len(getattr(self, a)) - 1) for port, a in self.ports]
        return all(done)

    def _written(self, port, word: int) -> bool:
        return port is None or port.write(self.engine.cycle, word)

    def on_data(self, tok) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_control(self, tok) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError


class LevelWrite(_Writer):
    """Level writer: compressed appends ``crd`` and closes one ``seg`` fiber per stop (with
    ``skip_empty``, only per stop that follows a coordinate: under a compressed parent, empty
    fibers were dropped and their stops only close outer levels); dense counts coordinates.
    Pops one token per cycle; finishes on ``D``."""

    ARRAYS = ("seg", "crd")

    def __init__(self, name, ins, outs, *, compressed: bool, skip_empty: bool = False, mem=None):
        super().__init__(name, ins, outs, mem)
        self.mseg, self.mcrd = (mem or {}).get("seg"), (mem or {}).get("crd")
        self.compressed = compressed
        self.skip_empty = skip_empty
        self.seg = [0]
        self.crd: list[int] = []
        self.open = False  # a coordinate arrived since the last stop

    def on_control(self, tok) -> bool:
        if type(tok) is not Stop:
            raise self.error(f"unexpected token {tok} in a crd stream")
        if self.open or not self.skip_empty:
            if not self._written(self.mseg, len(self.seg)):
                return False
            self.seg.append(len(self.crd))
        self.open = False
        return True

    def on_data(self, tok) -> bool:
        if not self._written(self.mcrd, len(self.crd)):
            return False
        self.crd.append(tok)
        self.open = True
        return True


class ValsWrite(_Writer):
    """Values writer: appends each data token to ``vals`` (``N`` as 0); ignores stops; finishes
    on ``D``."""

    ARRAYS = ("vals",)

    def __init__(self, name, ins, outs, *, mem=None):
        super().__init__(name, ins, outs, mem)
        self.mvals = (mem or {}).get("vals")
        self.vals: list = []

    def on_control(self, tok) -> bool:
        if tok is EMPTY:
            if not self._written(self.mvals, len(self.vals)):
                return False
            self.vals.append(0)
        return True

    def on_data(self, tok) -> bool:
        if not self._written(self.mvals, len(self.vals)):
            return False
        self.vals.append(tok)
        return True


@model("scan")
def _scan(b: Build) -> Primitive:
    fmt = Format.parse(b.params.get("format", "compressed"))
    mem = b.params.get("mem")
    if b.params.get("skip"):
        if fmt is not Format.COMPRESSED:
            raise ValueError(f"node {b.name!r} (scan): parameter 'skip' needs a compressed level, not a "
                             f"{fmt.value} one")
        return SkipScan(b.name, b.ins, b.outs, seg=b.params["seg"], crd=b.params["crd"])
    if fmt is Format.DENSE:
        return Scan(b.name, b.ins, b.outs, dim=int(b.params["dim"]), offset=int(b.params.get("offset", 0)),
                    stride=int(b.params.get("stride", 1)))
    if fmt is Format.SINGLETON:
        return Scan(b.name, b.ins, b.outs, crd=b.params["crd"], mem=mem)
    return Scan(b.name, b.ins, b.outs, seg=b.params["seg"], crd=b.params["crd"], mem=mem)


@model("write")
def _write(b: Build) -> Primitive:
    compressed = Format.parse(b.params.get("format", "compressed")) is Format.COMPRESSED
    return LevelWrite(b.name, b.ins, b.outs, compressed=compressed, skip_empty=bool(b.params["skip_empty"]),
                      mem=b.params.get("mem"))


class VecValsWrite(ValsWrite):
    """Values writer of a vector stream (``lanes`` W > 1): appends the W lanes of each vector
    (``N``: W zeros); off chip, the W words are one write (a vector never crosses a line)."""

    def __init__(self, name, ins, outs, *, lanes: int, mem=None):
        super().__init__(name, ins, outs, mem=mem)
        self.lanes = lanes

    def _vector(self, values) -> bool:
        port = self.mvals
        if port is not None and not port.write(self.engine.cycle, len(self.vals), self.lanes):
            return False
        self.vals.extend(values)
        return True

    def on_control(self, tok) -> bool:
        return self._vector([0] * self.lanes) if tok is EMPTY else True

    def on_data(self, tok) -> bool:
        return self._vector(tok)


@model("vals_write")
def _vals_write(b: Build) -> Primitive:
    lanes = b.params.get("lanes", 1)
    if lanes > 1:
        return VecValsWrite(b.name, b.ins, b.outs, lanes=lanes, mem=b.params.get("mem"))
    return ValsWrite(b.name, b.ins, b.outs, mem=b.params.get("mem"))


plain("root", Root)
