"""Fuzzing the RTL against sw_sim.

* Graphs: random sparse integer matrices (random density, empty rows and columns, wide values)
  through the built-in kernels at a fixed size (one Verilator build per kernel, many datasets
  per run of the native harness): outputs and cycle counts equal to sw_sim's, values equal to
  numpy's.  Hypothesis draws a batch of matrices per example and shrinks a failing batch.
* Primitives under random back-pressure: protocol-valid random streams for every primitive
  kind, with random input gaps and output stalls in the cocotb testbench: tokens equal to
  sw_sim's.
Reduced in the suite; ``FUSEFLOW_FUZZ=full`` runs over 1 000 graph datasets and 600 streams."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import scipy.sparse as sp
from fuzz_settings import FULL, examples, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from vectors import random_vectors

from fuseflow.kernels import example_from_matrix
from rtl_sim import run_graph_batch, run_primitive_batch
from sw_sim import run_graph, simulate_primitive

pytestmark = pytest.mark.rtl

N = 12  # every dataset of a kernel has this size: one build serves them all
KERNELS = ("spmv", "spmm_csr", "add", "spmspm_inner")


@st.composite
def matrix(draw) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.1, 0.3, 0.6, 1.0]))
    hi = draw(st.sampled_from([3, 2**12]))
    a = rng.integers(-hi, hi + 1, (N, N)) * (rng.random((N, N)) < density)
    a[rng.random(N) < 0.25, :] = 0
    a[:, rng.random(N) < 0.25] = 0
    return a.astype(np.int64)


@pytest.mark.parametrize("kernel", KERNELS)
@fuzz_settings(reduced=1, full=10)
@given(batch=st.lists(matrix(), min_size=examples(8, 25), max_size=examples(8, 25)), seed=st.integers(0, 99))
def test_fuzz_graphs_rtl_equals_sw_sim(kernel, batch, seed) -> None:
    cases = [example_from_matrix(kernel, sp.csr_array(a), seed, "fuzz") for a in batch]
    g = cases[0][0]
    rtl = run_graph_batch(g, [c[1] for c in cases], runner="native")
    for (gi, data, _, expected), r in zip(cases, rtl):
        sw = run_graph(gi, data)
        [name] = sw.outputs
        assert r.cycles == sw.cycles
        np.testing.assert_array_equal(r.outputs[name].to_dense(), sw.outputs[name].to_dense())
        np.testing.assert_array_equal(r.outputs[name].to_dense(), expected)


def _groups(seed: int, per_kind: int, kinds: int | None) -> list[list]:
    vecs = random_vectors(seed=seed, per_kind=per_kind)
    groups = [list(g) for _, g in itertools.groupby(sorted(vecs, key=lambda v: str(v.key())),
                                                     key=lambda v: str(v.key()))]
    if kinds is not None:  # the reduced form: a fixed sample of build keys
        groups = random.Random(seed).sample(groups, kinds)
    return groups


SEED = random.SystemRandom().randrange(10**6) if FULL else 2026
GROUPS = _groups(SEED, per_kind=12 if FULL else 3, kinds=None if FULL else 6)


@pytest.mark.parametrize("group", GROUPS, ids=[f"{g[0].kind}-{i}" for i, g in enumerate(GROUPS)])
def test_fuzz_primitives_under_random_back_pressure(group) -> None:
    kind, params = group[0].kind, group[0].params
    rng = random.Random(SEED + len(group))
    gap, stall = rng.uniform(0.1, 0.7), rng.uniform(0.1, 0.7)
    runs = [{"inputs": v.inputs, **v.memory} for v in group]
    got = run_primitive_batch(kind, runs, gap=gap, stall=stall, seed=rng.randrange(10**6), **params)
    for v, r in zip(group, got):
        ref = simulate_primitive(v.kind, v.inputs, **v.params, **v.memory)
        want = {k: list(x) for k, x in ref.items()}
        assert r.get("overflow", False) == (ref.overflows > 0), f"{kind} {v.params} overflow flag: {v.inputs}"
        assert {k: list(x) for k, x in r.items() if k not in ("cycles", "overflow")} == want, (
            f"{kind} {v.params} seed {SEED} gap {gap:.2f} stall {stall:.2f}: {v.inputs}")
