"""The cost rules: one per primitive kind, each in the file of its declaration's family
(``level.py``, ``join.py``, ...), mapping a node's input stream statistics to its output
statistics and counting its operations and memory words.  :data:`RULES` finds a kind's rule
(importing the family files on first use), like the cycle models' and RTL models' registries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir.primitives.registry import ModelRegistry
from ..context import Ctx
from ..stats import Stat

__all__ = ["RULES", "Rule", "fibres", "lanes", "rule"]

Rule = Callable[[Ctx, Any, dict[str, Stat]], dict[str, Stat]]
RULES: ModelRegistry[Rule] = ModelRegistry(__name__, "cost rule")
rule = RULES.register


def fibres(s: Stat) -> float:
    return s.n[-2] if len(s.n) > 1 else 1.0


def lanes(node) -> int:
    """Values per token of the node's value streams (vectors: W; each counts W FLOPs / words)."""
    return int(node.all_params().get("lanes", 1))
