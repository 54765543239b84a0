"""RTL joiners: n-ary intersection and union."""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Signal

from fuseflow.ir.samml import StreamKind
from fuseflow.ir.tokens import CRD_WIDTH, VAL_WIDTH

from .base import StreamPrimitive
from .registry import HwBuild, rtl
from .word import (
    data_word,
    done_word,
    empty_word,
    is_ctl,
    is_done,
    recast,
    stop_word,
)


class _Joiner(StreamPrimitive):
    """n-ary joiner; the ``ref<i>`` streams listed in ``val_refs`` carry values (``vw`` wide)."""

    def __init__(self, *, n: int, cw: int = CRD_WIDTH, vw: int = VAL_WIDTH, val_refs=(), depths=None):
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            raise ValueError(f"{type(self).__name__}: n = {n!r}: joins at least 2 inputs")
        self.n, self.cw = n, cw  # vw: the width of a value ref (lanes * value width for vectors)
        self.rw = [vw if i in tuple(val_refs) else cw for i in range(n)]
        ins = {**{f"crd{i}": cw for i in range(n)}, **{f"ref{i}": self.rw[i] for i in range(n)}}
        outs = {"crd": cw, **{f"ref{i}": self.rw[i] for i in range(n)}}
        super().__init__(ins, self._outs(outs), depths)

    def _outs(self, outs: dict[str, int]) -> dict[str, int]:
        return outs

    def _common(self, m):
        w, n = self.cw, self.n
        crds = [self.inp(f"crd{i}").payload for i in range(n)]
        refs = [self.inp(f"ref{i}").payload for i in range(n)]
        ctl = [is_ctl(c, w) for c in crds]
        ready = self.room()
        for i in range(n):
            ready = ready & self.inp(f"crd{i}").valid & self.inp(f"ref{i}").valid
        fire = Signal()
        all_ctl = Signal()
        any_ctl = Signal()
        m.d.comb += [fire.eq(ready), all_ctl.eq(Cat(*ctl).all()), any_ctl.eq(Cat(*ctl).any())]
        return crds, refs, ctl, fire, all_ctl, any_ctl

    def _pop(self, m, i):
        self.pop(m, f"crd{i}")
        self.pop(m, f"ref{i}")

    def _pass_control(self, m, crds):
        for i in range(self.n):
            self._pop(m, i)
            self.push(m, f"ref{i}", recast(crds[0], self.cw, self.rw[i]))
        self.push(m, "crd", crds[0])



class Intersect(_Joiner):
    """n-ary intersection (see sw_sim.join.Intersect); ``skip``: also outputs ``skip<i>``
    (see sw_sim.join.SkipIntersect)."""

    def __init__(self, *, skip: bool = False, **kw):
        self.skip = skip
        super().__init__(**kw)

    def _outs(self, outs):
        return {**outs, **{f"skip{i}": self.cw for i in range(self.n)}} if self.skip else outs

    def logic(self, m):
        w, n = self.cw, self.n
        crds, refs, ctl, fire, all_ctl, any_ctl = self._common(m)
        vals = [c[:w] for c in crds]
        # Input i is behind when some other head is larger: pairwise compares in parallel, so a
        # pop decision is one compare deep (not a max tree followed by a compare).
        behind = [Cat(*[vals[i] < vals[j] for j in range(n) if j != i]).any() for i in range(n)]
        all_eq = Cat(*[v == vals[0] for v in vals[1:]]).all()
        top = vals[0]  # the largest head: the skip target of the inputs behind
        for v in vals[1:] if self.skip else ():
            top = Mux(v > top, v, top)
        with m.If(fire):
            with m.If(~any_ctl):
                with m.If(all_eq):
                    self.push(m, "crd", data_word(vals[0], w))
                    for i in range(n):
                        self._pop(m, i)
                        self.push(m, f"ref{i}", refs[i])
                with m.Else():
                    for i in range(n):
                        with m.If(behind[i]):
                            self._pop(m, i)
                            self._skip(m, i, data_word(top, w))
            with m.Elif(all_ctl):
                self._pass_control(m, crds)
                with m.If(is_done(crds[0], w)):
                    for i in range(n):
                        self._skip(m, i, done_word(w))
            with m.Else():
                for i in range(n):
                    with m.If(~ctl[i]):
                        self._pop(m, i)
                        self._skip(m, i, stop_word(0, w))

    def _skip(self, m, i, word):
        if self.skip:
            self.push(m, f"skip{i}", word)



class Union(_Joiner):
    """n-ary union (see sw_sim.join.Union)."""

    def logic(self, m):
        w, n = self.cw, self.n
        crds, refs, ctl, fire, all_ctl, _ = self._common(m)
        # minimum over data heads (control heads count as +infinity)
        keyed = [Cat(c[:w], c[w]) for c in crds]  # flag as MSB: control sorts last
        # Input i holds the minimum when no other head is smaller: pairwise compares in
        # parallel, so a pop decision is one compare deep; the minimum itself only feeds data.
        least = [Cat(*[keyed[i] <= keyed[j] for j in range(n) if j != i]).all() for i in range(n)]
        mn = keyed[0]
        for k in keyed[1:]:
            mn = Mux(k < mn, k, mn)
        mns = Signal(w + 1)
        m.d.comb += mns.eq(mn)
        with m.If(fire):
            with m.If(all_ctl):
                self._pass_control(m, crds)
            with m.Else():
                self.push(m, "crd", data_word(mns[:w], w))
                for i in range(n):
                    with m.If(~ctl[i] & least[i]):
                        self._pop(m, i)
                        self.push(m, f"ref{i}", refs[i])
                    with m.Else():
                        self.push(m, f"ref{i}", empty_word(self.rw[i]))



@rtl("intersect")
def _intersect(b: HwBuild):
    p = b.params
    return Intersect(n=p["n"], cw=b.cfg.cw, vw=b.width(StreamKind.VAL), val_refs=p.get("val_refs", ()), depths=b.depths,
                     skip=bool(p.get("skip", False))), {}


@rtl("union")
def _union(b: HwBuild):
    p = b.params
    return Union(n=p["n"], cw=b.cfg.cw, vw=b.width(StreamKind.VAL), val_refs=p.get("val_refs", ()),
                 depths=b.depths), {}
