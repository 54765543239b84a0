"""Coordinate skipping: a graph rewrite that lets intersections of compressed fibers skip.

An ``intersect`` pops its lagging inputs one token per cycle, so intersecting a short fiber
with a long one costs the length of the long one.  With skipping the intersect sends each
lagging input's scanner the coordinate to jump to, and the compressed-level scanner gets there by a galloping / binary search in its ``crd`` array
(one memory read per cycle), or drops the rest of its fiber when another input has finished
its own.  Values and stop-token structure are those of the graph without skipping; only the
number of tokens the scanners emit, and so the cycles, change.

Protocol (the per-cycle rules are in :class:`sw_sim.level.SkipScan` and
:class:`sw_sim.join.SkipIntersect`, mirrored by :mod:`hw.level` and :mod:`hw.join`):

* ``intersect`` with ``skip=true`` has outputs ``skip0..skip<n-1>``.  Whenever it pops input
  ``i`` as lagging it pushes on ``skip<i>`` the largest head ``m`` (everything of input ``i``
  below ``m`` is not in the intersection), or ``S0`` when the other inputs are at a stop (the
  rest of input ``i``'s fiber is not needed); ``D`` at the end.
* ``scan`` with ``skip=true`` (compressed levels only) has input ``skip``, fed back from the
  intersect (a feedback edge: it closes a loop, which the verifier, the topological order and
  FIFO sizing allow for).  It pops the skip input in every cycle it has a token, so requests
  never hold the intersect back, and no request is ever needed for progress: without any the
  scanner streams exactly as the plain scanner.
* Freshness (the rule that keeps a request to the fiber it was issued for): a request is
  honoured only in the cycle it arrives, and only when no stop token is queued in the
  scanner's ``crd`` output FIFO.  The intersect issued it in the cycle before, while popping a
  data token of this scanner, so "no stop queued" means the scanner has not closed that fiber
  yet; a request that finds a stop queued (its fiber is finished) or a target at or below the
  scanner's next coordinate is dropped.
* Cost (one ``crd`` read per cycle): the search first probes the next ``SKIP_LINEAR``
  positions (:mod:`fuseflow.ir.primitives.level`), which costs what streaming there costs; then,
  if the coordinates seen predict the target at least ``SKIP_LINEAR << SKIP_GALLOP_SHIFT``
  positions on, it gallops (1, 3, 7, ... positions ahead, then a binary search: about
  ``2 log2(distance)`` cycles), and otherwise it keeps probing position by position.  ``S0``
  ends the fiber at once.  A request never delays the intersect (its skip FIFOs never fill);
  only a gallop that overshoots can cost a cycle or two more than streaming on that skip,
  which the prediction keeps rare: on uniform random data no graph took more cycles than
  without skipping (tests/test_skipping.py).
* Wiring: a skipping scanner's requests must come from the intersect that pops its own crd
  and ref streams (the verifier checks it), and coordinates rise within a fiber (as in every
  compressed level).

Use::

    g = enable_skipping(graph)            # a rewritten copy (in_place=True: rewrite graph)
    for line in explain_skipping(g):      # which intersects skip, and why the others do not
        print(line)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from ...ir.samml import Graph, Node, NodeKind
from ...ir.tensor import Format
from ...options import Kind, Option, Source
from ..program import Rejected
from .base import GroupIR, Pass, ProgramIR, graph_pass_text

__all__ = ["PASS", "SKIP", "SKIP_FIFO_DEPTH", "SkipSite", "enable_skipping", "explain_skipping", "skip_sites"]

# The FIFO of a skip edge: with two slots the intersect can send a request every cycle (the
# scanner pops each one the cycle after it is pushed); with one, every other cycle.
SKIP_FIFO_DEPTH = 2


@dataclass(frozen=True)
class SkipSite:
    """One intersect and whether it can skip: ``scanners`` names the compressed-level scanner
    of each input (in input order) when every input comes straight from one; ``reason`` says
    why not otherwise.  ``enabled``: the intersect already has ``skip=true``."""

    intersect: str
    scanners: tuple[str, ...]
    reason: str = ""
    enabled: bool = False

    @property
    def convertible(self) -> bool:
        return not self.reason


def _scanner_of(g: Graph, node: Node, i: int, drivers) -> tuple[str | None, str]:
    """The compressed-level scanner driving input ``i`` of intersect ``node`` (crd and ref
    both straight from it), or ``None`` and the reason."""
    crd, ref = drivers.get(node[f"crd{i}"]), drivers.get(node[f"ref{i}"])
    if crd is None or ref is None:
        return None, f"input {i} is not connected"
    src = g.nodes[crd.src.node]
    if src.kind is not NodeKind.SCAN or crd.src.port != "crd":
        return None, f"input {i} comes from {src.name!r} ({src.kind.value}), not a level scanner"
    if ref.src != src["ref"]:
        return None, f"input {i}: its crd comes from scanner {src.name!r} but its ref does not"
    t = g.tensors.get(src.params.get("tensor"))
    if t is None or not 0 <= src.params.get("level", -1) < t.fmt.order:
        return None, f"input {i}: scanner {src.name!r} names no level of a declared tensor"
    fmt = t.fmt.levels[src.params["level"]]
    if fmt is not Format.COMPRESSED:
        return None, f"input {i} comes from scanner {src.name!r} of a {fmt.value} level"
    return src.name, ""


def skip_sites(graph: Graph) -> list[SkipSite]:
    """Every intersect of ``graph`` (in node order) and whether skipping applies to it."""
    drivers = graph.driver()
    out = []
    for node in graph.nodes.values():
        if node.kind is not NodeKind.INTERSECT:
            continue
        scanners: list[str] = []
        reason = ""
        for i in range(node.param("n")):
            name, why = _scanner_of(graph, node, i, drivers)
            if name is None:
                reason = why
                break
            scanners.append(name)
        out.append(SkipSite(node.name, tuple(scanners) if not reason else (), reason,
                            bool(node.param("skip"))))
    return out


def enable_skipping(graph: Graph, *, in_place: bool = False) -> Graph:
    """``graph`` with every intersect whose inputs all come straight from compressed-level
    scanners turned into its skipping form: ``skip=true`` on the intersect and on those
    scanners, and an edge ``intersect.skip<i> -> scanner.skip`` per input (FIFO depth
    :data:`SKIP_FIFO_DEPTH`).

    Returns a rewritten copy (the same graph, rewritten, with ``in_place=True``).  Intersects
    that already skip, and any other node, are left as they are, so applying it twice changes
    nothing; a graph without such an intersect comes back unchanged (its JSON is the same).
    Which intersects skip: :func:`skip_sites` / :func:`explain_skipping` on the result.  FIFO
    sizing ignores the new edges, so this may run before or after it.
    """
    g = graph if in_place else copy.deepcopy(graph)
    for site in skip_sites(g):
        if site.enabled or not site.convertible:
            continue
        g.nodes[site.intersect].params["skip"] = True
        for i, scan in enumerate(site.scanners):
            g.nodes[scan].params["skip"] = True
            g.connect(g.nodes[site.intersect][f"skip{i}"], g.nodes[scan]["skip"], SKIP_FIFO_DEPTH)
    return g


def explain_skipping(graph: Graph) -> list[str]:
    """One line per intersect of ``graph``: skipping (and through which scanners), or why it
    does not (for ``--explain``)."""
    lines = []
    for s in skip_sites(graph):
        if s.enabled:
            via = f" (scanners {', '.join(s.scanners)})" if s.scanners else ""
            lines.append(f"intersect {s.intersect!r}: skips{via}")
        elif s.convertible:
            lines.append(f"intersect {s.intersect!r}: can skip (scanners {', '.join(s.scanners)}); "
                         "enable_skipping converts it")
        else:
            lines.append(f"intersect {s.intersect!r}: no skipping: {s.reason}")
    return lines


# ----------------------------------------------------------------------------- the pass
SKIP = Option("skip", Kind.FLAG, False,
              "coordinate skipping: intersections of compressed fibres skip ahead by search (the "
              "skip pass; --explain says which intersects skip)", sources=Source.ALL)


def _run(state: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.graph is not None
    if state.options.skip:
        enable_skipping(g.graph, in_place=True)
    return None


PASS = Pass("skip", "let intersections of compressed fibres skip ahead by search (opt-in: "
            "skip=True / --skip)", "samml.Graph", "samml.Graph", _run, graph_pass_text,
            options=(SKIP,), needs=("lower",))
