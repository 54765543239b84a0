"""Cost rules of the ``memory`` family."""

from __future__ import annotations

from ..dram import passes_of, runs_of
from ..stats import Stat
from . import lanes, rule


@rule("array_load")
def _array_load(c, node, ins):
    ref = ins["ref"]
    c.words(node.params["tensor"], "vals", None, (ref.data - ref.nn) * lanes(node), False)
    live = ref.data - ref.nn
    c.read_port(node.params["tensor"], "vals", None, live * lanes(node), runs_of(c, ref, live, c.vw), ref, passes_of(ref),
                ref.run * lanes(node))
    return {"val": Stat(ref.n, None, None, 0.0)}
