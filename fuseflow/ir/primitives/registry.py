"""A registry of one model per declared primitive kind, for a simulator package.

sw_sim and hw each keep one (:data:`sw_sim.registry.MODELS`, :data:`hw.registry.MODELS`): their
family files register a builder per kind with the ``register`` decorator, and the package looks
builders up by kind.  The first lookup imports the package's family files (named after the
declaration families), so a new kind needs no list to be edited.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from . import FAMILIES, PRIMITIVES, NodeKind

__all__ = ["ModelRegistry"]

B = TypeVar("B", bound=Callable)


class ModelRegistry(Generic[B]):
    """Kind -> builder for the simulator package ``package`` (``what`` names its models in
    messages, e.g. "cycle model")."""

    def __init__(self, package: str, what: str) -> None:
        self.package, self.what = package, what
        self._models: dict[NodeKind, B] = {}

    def register(self, kind: str) -> Callable[[B], B]:
        """Decorator: the builder of primitive ``kind`` (a declared kind name)."""
        k = NodeKind(kind)

        def add(fn: B) -> B:
            if k in self._models:
                raise RuntimeError(f"{self.package}: two {self.what}s for {kind!r}")
            self._models[k] = fn
            return fn

        return add

    def models(self) -> dict[NodeKind, B]:
        """Every registered builder (importing each family file once)."""
        if len(self._models) < len(PRIMITIVES):
            for family in FAMILIES:
                importlib.import_module(f"{self.package}.{family}")
        return dict(self._models)

    def lookup(self, kind: NodeKind) -> B:
        fn = self.models().get(kind)
        if fn is None:
            raise ValueError(f"no {self.what} for node kind {kind.value}")
        return fn
