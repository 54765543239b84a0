"""Outer/inner coordinate walkers: dropping empty outer coordinates, holding outer ones."""

from __future__ import annotations

from .base import NoParams, PrimitiveSpec, StreamKind

_OI = {"outer": StreamKind.CRD, "inner": StreamKind.CRD}

DECLARATIONS = (
    PrimitiveSpec("crd_drop", "coord", NoParams, lambda p: dict(_OI), lambda p: dict(_OI),
                  "drops outer coordinates whose inner fiber is empty"),
    PrimitiveSpec("crd_hold", "coord", NoParams, lambda p: dict(_OI), lambda p: dict(_OI),
                  "repeats each outer coordinate once per inner element"),
)
