"""Which vector each primitive configuration plays in its protocol proof (tests/rtl/test_formal.py,
tools/formal_report.py): per build key of the primitive tests' vectors, the one whose longest
stream is closest to ``LONGEST`` tokens (long enough to exercise stops at every level, short
enough for the solver), and the proof depth: the memory preload, that stream, and slack for
the latency of the primitive and its output FIFOs (at least the cycles the vector takes)."""

from __future__ import annotations

from vectors import Vector, all_vectors, random_vectors

from fuseflow.ir.samml import PRIMITIVES, NodeKind
from sw_sim import simulate_primitive

LONGEST = 7
SLACK = 6


def _longest(v: Vector, ref=None) -> int:
    """The longest stream of the vector, inputs or sw_sim's outputs (``ref``, if already run)."""
    ref = ref if ref is not None else simulate_primitive(v.kind, v.inputs, **v.params, **v.memory)
    outs = [len(x) for k, x in ref.items() if k not in ("seg", "crd", "vals")]
    return max([*map(len, v.inputs.values()), *outs, 0])


def depth_of(v: Vector) -> int:
    """The memory preload, the longest stream and the slack, and at least the preload plus the
    cycles sw_sim (cycle-exact with the RTL) takes to play the vector unobstructed, and one: a
    primitive whose latency exceeds the slack (a vector accumulator's flush) still completes."""
    preload = max([len(x) for x in v.memory.values()] + [0])
    ref = simulate_primitive(v.kind, v.inputs, **v.params, **v.memory)
    return max(preload + _longest(v, ref) + SLACK, preload + ref.cycles + 1)


def formal_vectors() -> list[Vector]:
    best: dict[str, tuple[int, Vector]] = {}
    for v in [*all_vectors(), *random_vectors(seed=5, per_kind=6)]:
        score = abs(_longest(v) - LONGEST)
        full = PRIMITIVES[NodeKind(v.kind)].view(v.params)  # defaults filled: one key per hardware
        key = str((v.kind, sorted((k, str(x)) for k, x in full.items())))
        if key not in best or score < best[key][0]:
            best[key] = (score, v)
    return [v for _, (_, v) in sorted(best.items())]
