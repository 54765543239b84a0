"""Joiners: n-ary coordinate intersection and union."""

from __future__ import annotations

from dataclasses import dataclass

from .base import LANES_DOC, Ports, PrimitiveSpec, StreamKind, doc, lanes_problems


@dataclass(frozen=True)
class JoinParams:
    n: int = doc("number of joined inputs (at least 2)")
    val_refs: tuple[int, ...] = doc("inputs whose ref port carries values (factored iteration: a "
                                    "reducer's values ride along as references)", ())
    lanes: int = doc(LANES_DOC + " (the val_refs ports)", 1)

    def check(self) -> list[str]:
        if self.n < 2:
            return [f"n={self.n} is too small"]
        if any(not 0 <= i < self.n for i in self.val_refs):
            return [f"val_refs {list(self.val_refs)} names inputs outside 0..n-1"]
        bad = lanes_problems(self.lanes)
        if not bad and self.lanes > 1 and not self.val_refs:
            bad.append(f"lanes={self.lanes} needs val_refs (only value streams carry vectors)")
        return bad


@dataclass(frozen=True)
class IntersectParams(JoinParams):
    skip: bool = doc("outputs skip0..skip<n-1> send each lagging input's scanner the coordinate to "
                     "jump to (S0: the rest of its fiber), for scanners with skip=true", False)


def _ref_kind(p, i: int) -> StreamKind:
    return StreamKind.VAL if i in tuple(p.val_refs) else StreamKind.REF


def _inputs(p) -> Ports:
    return {**{f"crd{i}": StreamKind.CRD for i in range(p.n)}, **{f"ref{i}": _ref_kind(p, i) for i in range(p.n)}}


def _outputs(p) -> Ports:
    return {"crd": StreamKind.CRD, **{f"ref{i}": _ref_kind(p, i) for i in range(p.n)}}


def _intersect_outputs(p) -> Ports:
    skips = {f"skip{i}": StreamKind.CRD for i in range(p.n)} if p.skip else {}
    return {**_outputs(p), **skips}


DECLARATIONS = (
    PrimitiveSpec("intersect", "join", IntersectParams, _inputs, _intersect_outputs,
                  "n-ary coordinate intersection (multiplication)"),
    PrimitiveSpec("union", "join", JoinParams, _inputs, _outputs,
                  "n-ary coordinate union (addition); missing refs become N"),
)
