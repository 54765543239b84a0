"""Outer/inner coordinate walkers: dropping empty outer coordinates, holding outer ones, and
locating into a dense level (parent reference x dim + coordinate)."""

from __future__ import annotations

from dataclasses import dataclass

from .base import NoParams, PrimitiveSpec, StreamKind, doc

_OI = {"outer": StreamKind.CRD, "inner": StreamKind.CRD}


@dataclass(frozen=True)
class LocateParams:
    dim: int = doc("size of the located dense level (coordinates 0 .. dim-1)")

    def check(self) -> list[str]:
        return [] if self.dim >= 1 else [f"dim={self.dim} must be at least 1"]


DECLARATIONS = (
    PrimitiveSpec("crd_drop", "coord", NoParams, lambda p: dict(_OI), lambda p: dict(_OI),
                  "drops outer coordinates whose inner fiber is empty",
                  nesting=lambda p, lv: {"outer": lv["outer"], "inner": lv["inner"]}),
    PrimitiveSpec("crd_hold", "coord", NoParams, lambda p: dict(_OI), lambda p: dict(_OI),
                  "repeats each outer coordinate once per inner element",
                  nesting=lambda p, lv: {"outer": lv["inner"], "inner": lv["inner"]}),
    PrimitiveSpec("locate", "coord", LocateParams,
                  lambda p: {"outer": StreamKind.REF, "inner": StreamKind.CRD}, lambda p: {"ref": StreamKind.REF},
                  "random access into a dense level: ref = outer * dim + inner crd (N in -> N)",
                  nesting=lambda p, lv: {"ref": lv["inner"]}),
)
