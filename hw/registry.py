"""The RTL model registry: exactly one Amaranth model per declared primitive kind.

Each family file of hw (``level.py``, ``join.py``, … — the names of the declaration files in
:mod:`fuseflow.primitives`) registers a builder per kind with :func:`rtl`.  A builder gets an
:class:`HwBuild` (resolved parameters, hardware config, output FIFO depths) and returns the
component plus its host-visible memories: array name (``seg``, ``crd``, ``vals``) ->
``(port attribute, depth, width, access, length attribute)``, access ``"w"`` for arrays the
host writes and ``"r"`` for arrays it reads back.  :func:`build` looks models up by kind;
nothing else in hw dispatches on kind names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from amaranth.lib import wiring

from fuseflow.primitives import FAMILIES, PRIMITIVES, NodeKind, StreamKind

from .config import HwConfig

__all__ = ["HwBuild", "Memories", "build", "models", "rtl", "stream_width"]

Memories = dict[str, tuple[str, int, int, str, str | None]]


@dataclass(frozen=True)
class HwBuild:
    """What an RTL builder gets: ``params`` are the node's parameters with defaults filled in,
    plus what the tensor binds (``format``, ``dim``, capacities ``seg_depth``, ``crd_depth``,
    ``vals_depth``); ``depths`` are the output FIFO depths by port."""

    params: Mapping[str, Any]
    cfg: HwConfig
    depths: dict[str, int] | None

    def width(self, kind: StreamKind) -> int:
        return stream_width(kind, self.cfg)


def stream_width(kind: StreamKind, cfg: HwConfig) -> int:
    """Data width of a stream of ``kind``: ``vw`` for values, ``cw`` for the others."""
    return cfg.vw if kind is StreamKind.VAL else cfg.cw


Builder = Callable[[HwBuild], tuple[wiring.Component, Memories]]
_MODELS: dict[NodeKind, Builder] = {}


def rtl(kind: str) -> Callable[[Builder], Builder]:
    """Register the decorated builder as the RTL model of primitive ``kind``."""
    k = NodeKind(kind)

    def register(fn: Builder) -> Builder:
        if k in _MODELS:
            raise RuntimeError(f"hw: two RTL models for {kind!r}")
        _MODELS[k] = fn
        return fn

    return register


def models() -> dict[NodeKind, Builder]:
    """Every registered model (importing each family file once)."""
    if len(_MODELS) < len(PRIMITIVES):
        for family in FAMILIES:
            importlib.import_module(f"{__package__}.{family}")
    return dict(_MODELS)


def build(kind: NodeKind, b: HwBuild) -> tuple[wiring.Component, Memories]:
    fn = models().get(kind)
    if fn is None:
        raise ValueError(f"no RTL primitive for node kind {kind.value}")
    return fn(b)
