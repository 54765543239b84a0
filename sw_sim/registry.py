"""The cycle-model registry: exactly one sw_sim model per declared primitive kind.

Each family file of sw_sim (``level.py``, ``join.py``, … — the names of the declaration files in
:mod:`fuseflow.ir.primitives`) registers a builder per kind with :func:`model`.  A builder gets a
:class:`Build` (node name, channels, resolved parameters, numerics) and returns the
:class:`~sw_sim.engine.Primitive` that models the node.  :func:`build` looks models up by kind;
nothing else in sw_sim dispatches on kind names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fuseflow.ir.numerics import Numerics
from fuseflow.ir.primitives import NodeKind
from fuseflow.ir.primitives.registry import ModelRegistry

from .engine import Channel, Primitive

__all__ = ["MODELS", "Build", "build", "model", "models", "plain"]


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
MODELS: ModelRegistry[Builder] = ModelRegistry(__package__, "cycle model")
model = MODELS.register


def plain(kind: str, cls: type[Primitive]) -> None:
    """Register ``cls(name, ins, outs)``, a model that takes no parameters, for ``kind``."""
    def build_plain(b: Build) -> Primitive:
        return cls(b.name, b.ins, b.outs)

    build_plain.__module__ = cls.__module__
    model(kind)(build_plain)


def models() -> dict[NodeKind, Builder]:
    return MODELS.models()


def build(kind: NodeKind, b: Build) -> Primitive:
    return MODELS.lookup(kind)(b)
