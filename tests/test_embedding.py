"""docs/embedding.md: the example design that embeds an Intersect (examples/embed_intersect.py),
simulated with amaranth.sim, against numpy's intersection of the two coordinate lists."""

from __future__ import annotations

import gc
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from fuseflow.ir.tokens import DONE, stop

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "embed_intersect.py"


def _example():
    spec = importlib.util.spec_from_file_location("embed_intersect", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _coords(rng: np.random.Generator, n: int, dim: int) -> list[int]:
    return sorted(int(x) for x in rng.choice(dim, size=n, replace=False))


CASES = [([0, 2, 5, 7, 9], [2, 3, 5, 9, 11]), ([], [1, 2]), ([4], [4]), ([1, 3, 5], [0, 2, 4, 6])]
RNG = np.random.default_rng(20)
CASES += [(_coords(RNG, int(RNG.integers(0, 40)), 200), _coords(RNG, int(RNG.integers(0, 40)), 200))
          for _ in range(4)]


@pytest.mark.parametrize("a, b", CASES)
def test_intersect_matches_numpy(a, b):
    streams, cycles = _example().simulate(a, b)
    common, ia, ib = np.intersect1d(np.array(a, dtype=int), np.array(b, dtype=int), return_indices=True)
    tail = [stop(0), DONE]
    assert streams["crd"] == [int(x) for x in common] + tail
    assert streams["a_pos"] == [int(x) for x in ia] + tail
    assert streams["b_pos"] == [int(x) for x in ib] + tail
    # the joiner takes one head pair a cycle: at most one cycle per coordinate, plus the pipeline
    assert 0 < cycles <= len(a) + len(b) + 10


# on a timeout the stream testbenches are left waiting; Python warns when it collects them
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_wider_coordinates_and_timeout():
    mod = _example()
    streams, _ = mod.simulate([1000, 40000], [40000, 50000], cw=17)
    assert streams["crd"] == [40000, stop(0), DONE]
    with pytest.raises(TimeoutError, match="no done word"):
        mod.simulate(list(range(30)), list(range(30)), max_cycles=5)
    gc.collect()  # here, under the filter above


def test_embedded_graph_top_matches_numpy_and_sw_sim():
    """examples/embed_graph.py: the SpMV graph top inside a user component, driven through the
    host port under amaranth.sim: numpy's product, sw_sim's cycle count."""
    from fuseflow.kernels import KERNELS
    from fuseflow.ir.tensor import TensorData
    from sw_sim import run_graph

    spec = importlib.util.spec_from_file_location("embed_graph", EXAMPLE.parent / "embed_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(7)
    b = rng.integers(-9, 10, (12, 12)) * (rng.random((12, 12)) < 0.25)
    b[3] = 0  # an empty row
    c = rng.integers(-9, 10, 12)
    y, cycles = mod.simulate(b, c)
    assert np.array_equal(y, b @ c)
    g = KERNELS["spmv"](12)
    data = {"B": TensorData.from_dense(b, g.tensors["B"].fmt), "c": TensorData.from_dense(c, g.tensors["c"].fmt)}
    assert cycles == run_graph(g, data).cycles
