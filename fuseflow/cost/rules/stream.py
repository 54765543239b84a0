"""Cost rules of the ``stream`` family."""

from __future__ import annotations

from . import rule


@rule("broadcast")
def _broadcast(c, node, ins):
    return {f"out{i}": ins["in"] for i in range(node.all_params()["n"])}


@rule("stkn_drop")
def _stkn_drop(c, node, ins):
    return {"out": ins["in"]}
