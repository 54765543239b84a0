"""The cycle-model registry: exactly one sw_sim model per declared primitive kind.

Each family file of sw_sim (``level.py``, ``join.py``, … — the names of the declaration files in
:mod:`fuseflow.primitives`) registers a builder per kind with :func:`model`.  A builder gets a
:class:`Build` (node name, channels, resolved parameters, numerics) and returns the
:class:`~sw_sim.engine.Primitive` that models the node.  :func:`build` looks models up by kind;
nothing else in sw_sim dispatches on kind names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fuseflow.numerics import Numerics
from fuseflow.primitives import FAMILIES, PRIMITIVES, NodeKind

from .engine import Channel, Primitive

__all__ = ["Build", "build", "model", "models"]


@dataclass(frozen=True)
class Build:
    """What a model builder gets: ``params`` are the node's parameters with defaults filled in,
    plus what the tensor data binds (``format``, ``dim``, ``seg``, ``crd``, ``vals``)."""

    name: str
    ins: dict[str, Channel]
    outs: dict[str, Channel]
    params: Mapping[str, Any]
    numerics: Numerics


Builder = Callable[[Build], Primitive]
_MODELS: dict[NodeKind, Builder] = {}


def model(kind: str) -> Callable[[Builder], Builder]:
    """Register the decorated builder as the cycle model of primitive ``kind``."""
    k = NodeKind(kind)

    def register(fn: Builder) -> Builder:
        if k in _MODELS:
            raise RuntimeError(f"sw_sim: two cycle models for {kind!r}")
        _MODELS[k] = fn
        return fn

    return register


def models() -> dict[NodeKind, Builder]:
    """Every registered model (importing each family file once)."""
    if len(_MODELS) < len(PRIMITIVES):
        for family in FAMILIES:
            importlib.import_module(f"{__package__}.{family}")
    return dict(_MODELS)


def build(kind: NodeKind, b: Build) -> Primitive:
    fn = models().get(kind)
    if fn is None:
        raise ValueError(f"no cycle model for node kind {kind.value}")
    return fn(b)
