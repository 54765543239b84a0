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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from amaranth.lib import wiring

from fuseflow.primitives import NodeKind, StreamKind
from fuseflow.primitives.registry import ModelRegistry

from .config import HwConfig

__all__ = ["MODELS", "HwBuild", "Memories", "build", "models", "plain", "rtl", "stream_width"]

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
MODELS: ModelRegistry[Builder] = ModelRegistry(__package__, "RTL model")
rtl = MODELS.register


def plain(kind: str, cls: type[wiring.Component]) -> None:
    """Register ``cls(cw=, depths=)``, a model with no parameters and no memories, for ``kind``."""
    def build_plain(b: HwBuild) -> tuple[wiring.Component, Memories]:
        return cls(cw=b.cfg.cw, depths=b.depths), {}

    build_plain.__module__ = cls.__module__
    rtl(kind)(build_plain)


def models() -> dict[NodeKind, Builder]:
    return MODELS.models()


def build(kind: NodeKind, b: HwBuild) -> tuple[wiring.Component, Memories]:
    return MODELS.lookup(kind)(b)
