"""Inner-product SpMSpM graphs and operands for the coordinate-skipping tests.

``C[i,j] = sum_k A[i,k] * B[j,k]`` with A and B both CSR (rows i of A and rows j of B are the
compressed k fibers) and C dense, in loop order i -> j -> k: the k fibers of row i of A and
row j of B meet in one intersect, whose inputs come straight from two compressed-level
scanners (what :func:`fuseflow.compiler.passes.skip.enable_skipping` converts): the built-in kernel
:func:`fuseflow.kernels.inner_product` (``--kernel spmspm_inner``).

Also the stream-level material shared by the sw_sim and RTL skipping tests: worked examples
and random vectors of the skipping scanner, the properties its output must have, and the skip
streams an intersect must send.
"""

from __future__ import annotations

import random

import numpy as np
from streamref import fibers
from vectors import fiber_stream

from fuseflow.kernels import inner_product  # noqa: F401  (the tests import it from here)
from fuseflow.ir.samml import Graph
from fuseflow.ir.tensor import TensorData
from fuseflow.ir.tokens import DONE, EMPTY, Control, Stop, stop

S0 = stop(0)


def _rows(rng: np.random.Generator, lengths, k: int) -> np.ndarray:
    a = np.zeros((len(lengths), k), dtype=np.int64)
    for r, nnz in enumerate(lengths):
        cols = rng.choice(k, size=int(min(nnz, k)), replace=False)
        a[r, cols] = rng.integers(1, 9, size=len(cols)) * rng.choice([-1, 1], size=len(cols))
    return a


def power_law(rng: np.random.Generator, rows: int, k: int, alpha: float = 1.5, scale: int = 2) -> np.ndarray:
    """Rows whose lengths are ``scale`` times Zipf(``alpha``) draws (capped at ``k``): most
    rows short, a few very long ones."""
    return _rows(rng, scale * rng.zipf(alpha, size=rows), k)


def uniform(rng: np.random.Generator, rows: int, k: int, density: float) -> np.ndarray:
    """Every entry nonzero with probability ``density``."""
    a = rng.integers(1, 9, size=(rows, k)) * rng.choice([-1, 1], size=(rows, k))
    a[rng.random((rows, k)) >= density] = 0
    return a


def data(g: Graph, a: np.ndarray, b: np.ndarray) -> dict[str, TensorData]:
    return {"A": TensorData.from_dense(a, g.tensors["A"].fmt), "B": TensorData.from_dense(b, g.tensors["B"].fmt)}


# ----------------------------------------------------------------------------- stream level
# Worked examples, written from the rules of sw_sim.level.SkipScan.  The harness offers request
# k of the skip stream in cycle k + 1; the scanner loads its first fiber in cycle 2 and emits
# from cycle 3 on, so requests 0 and 1 find it idle (dropped).
SCAN_EXAMPLES = [
    # 13 in cycle 3 at crd[0] = 0: the search keeps to the next positions (the coordinates seen,
    # 3 per position, put 13 two positions on), crd 3, 6, 9, 12 are passed by, 15 comes when
    # streaming would have brought it: the same cycles as the plain scanner
    ("linear", "0,S0,D", "0,0,13,D", [0, 10], list(range(0, 30, 3)), "15,18,21,24,27,S1,D", 0),
    # 90 in a fiber 0..99: after two positions the target is predicted 88 positions on, so the
    # search gallops (probes 4, 8, 16, 32, then a binary search) and crd 90 comes in cycle 15
    # instead of 93
    ("gallop", "0,S0,D", "0,0,90,D", [0, 100], list(range(100)), "90,91,92,93,94,95,96,97,98,99,S1,D", -78),
    # S0 in cycle 3: the rest of the first fiber is not needed, its stop comes in cycle 4
    # instead of after 10 coordinates; the second fiber is whole
    ("end", "0,1,S0,D", "0,0,S0,D", [0, 10, 15], [*range(10), *range(5)], "S0,0,1,2,3,4,S1,D", -9),
    # fresh or stale: the first fiber's S0 is pushed in cycle 5 and popped by the sink in
    # cycle 6, so target 9 in cycle 6 (request 5) finds a stop queued and is dropped: it may
    # have been issued for the fiber that stop closed
    ("stale", "0,1,S0,D", "0,0,0,0,0,9,D", [0, 2, 12], [5, 6, *range(10)],
     "5,6,S0,0,1,2,3,4,5,6,7,8,9,S1,D", 0),
    # ... and in cycle 7 (request 6) it is fresh: crd[3] = 1 is skipped, the search walks to 9
    ("fresh", "0,1,S0,D", "0,0,0,0,0,0,9,D", [0, 2, 12], [5, 6, *range(10)], "5,6,S0,0,9,S1,D", 0),
    # targets 1, 2, 3 at or below the next coordinate are dropped (cycles 4-6); 20 in cycle 7
    # (at crd[4] = 4) starts a search that gallops from cycle 9 and finds 20 in cycle 14; 40
    # in cycle 8 comes in mid-search and is dropped
    ("low", "0,S0,D", "0,0,0,1,2,3,20,40,D", [0, 30], list(range(30)),
     "0,1,2,3," + ",".join(map(str, range(20, 30))) + ",S1,D", -8),
    # a target beyond the fiber's last coordinate: the search (9 probes) ends the fiber
    ("beyond", "0,S0,D", "0,0,0,1,2,3,30,D", [0, 30], list(range(30)), "0,1,2,3,S1,D", -17),
]




def _positions(crd_stream, ref_stream, crd):
    """Each emitted data token's ref is its position and its crd the array entry there."""
    for c, r in zip(crd_stream, ref_stream):
        if isinstance(c, Control):
            assert c is r
        else:
            assert crd[r] == c


def check_skip_scan(out, plain, skip_tokens, crd):
    """``out`` (a skipping scanner's streams) against ``plain`` (the same scanner without
    skipping): the same stop structure, per fiber a subsequence of the plain fiber, each
    omitted element below some request's target (or ended by ``S0``), refs the positions."""
    _positions(out["crd"], out["ref"], crd)
    got, full = fibers(out["crd"]), fibers(plain["crd"])
    assert [s for _, s in got] == [s for _, s in full]
    targets = [t for t in skip_tokens if not isinstance(t, Control)]
    ends = any(type(t) is Stop for t in skip_tokens)
    for (g, _), (f, _) in zip(got, full):
        it = iter(f)
        assert all(x in it for x in g), (g, f)  # subsequence
        dropped = [x for x in f if x not in g]
        assert all(ends or any(x < t for t in targets) for x in dropped), (dropped, targets)


def random_level(rng: random.Random, nfib: int, dim: int):
    seg, crd = [0], []
    for _ in range(nfib):
        f = sorted(rng.sample(range(dim), rng.randint(0, dim)))
        crd += f
        seg.append(len(crd))
    return seg, crd


def random_scan_skip_vectors(seed: int = 3, count: int = 24):
    """Random compressed levels, ref streams (some N, nested) and skip-request streams."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        nfib = rng.randint(1, 5)
        seg, crd = random_level(rng, nfib, rng.choice((8, 40, 200)))
        depth = 1 + i % 2
        tree = [[rng.randrange(nfib) if rng.random() > 0.1 else EMPTY for _ in range(rng.randint(0, 4))]
                for _ in range(rng.randint(1, 3))]
        ref = fiber_stream(tree if depth == 2 else tree[0], depth)
        skips = []
        for _ in range(rng.randint(0, 40)):
            r = rng.random()
            skips.append(S0 if r < 0.05 else 0 if r < 0.4 else rng.randrange(max(crd, default=1) + 2))
        out.append((ref, [*skips, DONE], seg, crd))
    return out




def skip_reference(crds: list) -> list[list]:
    """The skip streams of an n-ary intersect, from the merge: each input popped as lagging
    gets the largest head; when some inputs are at their stop, each data head of the others
    gets S0; D at the end."""
    fs = [fibers(c) for c in crds]
    n = len(crds)
    out: list[list] = [[] for _ in range(n)]
    for parts in zip(*fs):
        elems = [list(e) for e, _ in parts]
        pos = [0] * n
        while True:
            heads = [e[p] if p < len(e) else None for e, p in zip(elems, pos)]
            if all(h is None for h in heads):
                break
            if any(h is None for h in heads):
                for i, h in enumerate(heads):
                    if h is not None:
                        out[i].append(S0)
                        pos[i] += 1
                continue
            m = max(heads)
            for i, h in enumerate(heads):
                if h < m:
                    out[i].append(m)
                    pos[i] += 1
            if all(h == m for h in heads):
                pos = [p + 1 for p in pos]
    return [o + [DONE] for o in out]
