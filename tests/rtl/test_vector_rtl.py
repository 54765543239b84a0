"""Vector value streams in RTL against sw_sim beyond the integer corpus of tests/vectors.py
(which test_primitives_rtl.py runs for every vector configuration): fixed-point arithmetic lane
by lane (rounding and saturation per lane), the accumulator's sums in block RAM, a graph whose
values writer stores vectors (the host reads a W-lane memory back one value per address), and
vectors behind an off-chip memory."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from test_ml_primitives_rtl import CFG, Q, _check, _same_tokens_under_stalls
from vectors import fiber_stream, relu_blocks_graph

from fuseflow.ir.tokens import EMPTY, Vec
from rtl_sim import run_graph_batch
from sw_sim import run_graph

pytestmark = pytest.mark.rtl


def _fixed_vectors(rng: random.Random, lanes: int, rows: int = 5) -> list:
    """Two-level streams of Q16.16 vectors with extremes (so that lanes saturate) and N."""
    def vec():
        pick = rng.random()
        if pick < 0.15:
            return Vec([rng.choice([Q.lo, Q.hi, Q.to_raw(30000.0)]) for _ in range(lanes)])
        return Vec([Q.to_raw(rng.uniform(-300.0, 300.0)) for _ in range(lanes)])

    toks = fiber_stream([[vec() for _ in range(rng.randint(0, 5))] for _ in range(rng.randint(1, rows))], 2)
    toks.insert(rng.randrange(len(toks) - 1), EMPTY)
    return toks


def test_vector_alu_and_lane_reduce_fixed_point():
    """Q16.16: a lanewise multiply with a scalar operand (rounded, saturated per lane), a
    lanewise add, and an 8-lane tree whose partial sums saturate."""
    rng = random.Random(5)
    runs = []
    for _ in range(6):
        a = _fixed_vectors(rng, 4)
        scalar = [t if not isinstance(t, Vec) else rng.choice([Q.to_raw(rng.uniform(-200.0, 200.0)), Q.hi]) for t in a]
        runs.append({"a": a, "b": scalar})
    _check("alu", {"op": "mul", "lanes": 4, "scalar_port": "b"}, runs)
    adds = [{"a": r["a"], "b": [t if not isinstance(t, Vec) else Vec(reversed(t)) for t in r["a"]]} for r in runs]
    _check("alu", {"op": "add", "lanes": 4}, adds)
    _check("lane_reduce", {"op": "add", "lanes": 8}, [{"val": _fixed_vectors(rng, 8)} for _ in range(6)])


def test_vector_unary_fixed_point():
    """A function with tables (exp), one datapath per lane."""
    rng = random.Random(6)
    _check("alu", {"op": "exp", "lanes": 2}, [{"a": _fixed_vectors(rng, 2)} for _ in range(5)])


@pytest.mark.parametrize("block_ram, buffers", [(False, 1), (True, 2)], ids=["lutram-1", "block_ram-2"])
def test_vector_spacc1_fixed_point(block_ram, buffers):
    rng = random.Random(7)
    runs = []
    for _ in range(6):
        outer = [sorted(rng.sample(range(6), rng.randint(0, 3))) for _ in range(rng.randint(1, 3))]
        inner = [[sorted(rng.sample(range(8), rng.randint(0, 5))) for _ in ks] for ks in outer]
        vals = [[[Vec([rng.choice([Q.to_raw(rng.uniform(-20000, 20000)), Q.hi]) for _ in range(4)]) for _ in f]
                 for f in row] for row in inner]
        runs.append({"outer": fiber_stream(outer, 2), "inner": fiber_stream(inner, 3), "val": fiber_stream(vals, 3)})
    cfg = replace(CFG, spacc_block_ram=block_ram)
    _check("spacc1", {"dim": 8, "lanes": 4, "buffers": buffers}, runs, cfg)
    _same_tokens_under_stalls("spacc1", {"dim": 8, "lanes": 4, "buffers": buffers}, runs, cfg)


def test_vector_values_writer_in_a_graph():
    n, k, lanes = 8, 32, 4
    g = relu_blocks_graph(n, k, lanes)
    rng = np.random.default_rng(4)
    sets = []
    for density in (0.0, 0.3, 0.8):
        a = rng.integers(-9, 10, size=(n, k)) * np.repeat(rng.random((n, k // lanes)) < density, lanes, axis=1)
        sets.append((a, {"A": g.tensors["A"].data(a)}))
    results = run_graph_batch(g, [d for _, d in sets], runner="amaranth")
    for (a, data), rtl in zip(sets, results):
        sw = run_graph(g, data)
        assert np.array_equal(sw.outputs["Z"].to_dense(), np.maximum(a, 0))
        assert np.array_equal(rtl.outputs["Z"].to_dense(), np.maximum(a, 0))
        assert list(rtl.outputs["Z"].vals) == list(sw.outputs["Z"].vals)
        assert list(rtl.outputs["Z"].crd[1]) == list(data["A"].crd[1])
        assert rtl.cycles == sw.cycles


@pytest.mark.parametrize("memory", ["hbm2", "sdram"])
def test_offchip_vectors_rtl_equals_sw_sim(memory):
    """Vector loads and a vector values writer behind an off-chip memory (one line request per
    vector, a vector written as one word group): the RTL's memory gates wait exactly as
    sw_sim's ports (bspmm reads A and X off chip; the row-blocked relu writes Z off chip)."""
    from fuseflow.kernels import example

    block, lanes = (4, 4) if memory == "hbm2" else (8, 2)
    sets = [example("bspmm", 16, seed=s, density=d, block=block, lanes=lanes) for s, d in ((3, 0.4), (4, 0.8))]
    g = relu_blocks_graph(8, 32, 4)
    rng = np.random.default_rng(1)
    relu = [{"A": g.tensors["A"].data(rng.integers(-9, 10, (8, 32)) * np.repeat(rng.random((8, 8)) < d, 4, axis=1))}
            for d in (0.3, 0.9)]
    for graph, datasets in ((sets[0][0], [x[1] for x in sets]), (g, relu)):
        for data, rtl in zip(datasets, run_graph_batch(graph, datasets, memory=memory, runner="native")):
            sw = run_graph(graph, data, memory=memory)
            [out] = sw.outputs
            assert np.array_equal(rtl.outputs[out].to_dense(), sw.outputs[out].to_dense())
            assert rtl.cycles == sw.cycles > run_graph(graph, data).cycles
