"""The RTL model registry: exactly one Amaranth model per declared primitive kind.

Each family file of hw (``level.py``, ``join.py``, … — the names of the declaration files in
:mod:`fuseflow.ir.primitives`) registers a builder per kind with :func:`rtl`.  A builder gets an
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

from fuseflow.ir.primitives import NodeKind, StreamKind
from fuseflow.ir.primitives.registry import ModelRegistry

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

    def width(self, kind: StreamKind, lanes: int | None = None) -> int:
        """Data width of a stream of ``kind`` with ``lanes`` lanes (default: the node's
        ``lanes`` parameter, 1 if it has none)."""
        return stream_width(kind, self.cfg, self.params.get("lanes", 1) if lanes is None else lanes)

    @property
    def lanes(self) -> int:
        return self.params.get("lanes", 1)


def stream_width(kind: StreamKind, cfg: HwConfig, lanes: int = 1) -> int:
    """Data width of a stream of ``kind``: ``vw`` per lane for values (``lanes * vw``; lane
    ``l`` in bits ``[l*vw, (l+1)*vw)``), ``cw`` for the others."""
    return cfg.vw * lanes if kind is StreamKind.VAL else cfg.cw


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
