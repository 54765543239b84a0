"""Coordinate skipping in RTL against sw_sim: the skipping scanner cycle-exact (tokens and
cycles) without back-pressure, and still within the skipping rules under random valid gaps and
ready back-pressure; inner-product SpMSpM (and element-wise multiplication) with and without
skipping: values equal to numpy, RTL cycles equal to sw_sim cycles.  (The skipping intersect's
vectors are in the shared corpus, run by test_primitives_rtl.)"""

import numpy as np
import pytest
from skip_cases import (
    SCAN_EXAMPLES,
    check_skip_scan,
    data,
    inner_product,
    power_law,
    random_scan_skip_vectors,
    uniform,
)

from fuseflow.kernels import example
from fuseflow.compiler.passes.skip import enable_skipping
from fuseflow.ir.tokens import parse_stream
from hw import build_graph
from rtl_sim import run_graph_batch, run_primitive_batch
from rtl_sim.toolchain import lint
from sw_sim import run_graph, simulate_primitive

pytestmark = pytest.mark.rtl

SCAN_VECTORS = [(ref, skip, seg, crd) for _, ref, skip, seg, crd, *_ in SCAN_EXAMPLES] + random_scan_skip_vectors()


def _strip(d):
    return {k: list(v) for k, v in d.items() if k != "cycles"}


def test_skip_scan_rtl_matches_sw_sim():
    runs = [{"inputs": {"ref": ref, "skip": skip}, "seg": seg, "crd": crd} for ref, skip, seg, crd in SCAN_VECTORS]
    plain = run_primitive_batch("scan", runs, format="compressed", skip=True)
    stressed = run_primitive_batch("scan", runs, gap=0.3, stall=0.3, seed=5, format="compressed", skip=True)
    for (ref, skip, seg, crd), r, s in zip(SCAN_VECTORS, plain, stressed):
        sw = simulate_primitive("scan", {"ref": ref, "skip": skip}, format="compressed", skip=True, seg=seg, crd=crd)
        assert _strip(r) == _strip(sw), (ref, skip)
        assert r["cycles"] == sw.cycles, (ref, skip)
        # under gaps and back-pressure other requests are fresh: other tokens, the same rules
        full = simulate_primitive("scan", {"ref": ref}, format="compressed", seg=seg, crd=crd)
        check_skip_scan(s, full, parse_stream(skip), crd)


def _check_graph(g, sets):
    results = run_graph_batch(g, [d for d, _ in sets], runner="amaranth")
    cycles = []
    for (d, ref), rtl in zip(sets, results):
        sw = run_graph(g, d)
        assert np.array_equal(rtl.outputs["C"].to_dense(), ref)
        assert np.array_equal(sw.outputs["C"].to_dense(), ref)
        assert rtl.cycles == sw.cycles, f"{g.name}: RTL {rtl.cycles} cycles, sw_sim {sw.cycles}"
        cycles.append(rtl.cycles)
    return cycles


def _inner_sets(g, n, m, k):
    sets = []
    for seed, kind in enumerate(("uniform", "power_a", "power_b", "empty_rows")):
        rng = np.random.default_rng(seed)
        a, b = uniform(rng, n, k, 0.2), uniform(rng, m, k, 0.15)
        if kind == "power_a":
            a = power_law(rng, n, k, 1.5, 3)
        elif kind == "power_b":
            b = power_law(rng, m, k, 1.5, 3)
        else:
            a[::2] = 0
            b[1::2] = 0
        sets.append((data(g, a, b), a @ b.T))
    return sets


def test_inner_product_rtl_equals_sw_sim_with_and_without_skipping():
    n, m, k = 6, 5, 64
    plain = inner_product(n, m, k)
    sets = _inner_sets(plain, n, m, k)
    without = _check_graph(plain, sets)
    with_skips = _check_graph(enable_skipping(plain), sets)
    assert all(s <= w for s, w in zip(with_skips, without))
    assert with_skips[1] < without[1] and with_skips[2] < without[2]


def test_elementwise_mul_rtl_equals_sw_sim_with_skipping():
    """Skipping at level 1, under an intersect of level 0 (the scanners' refs come from it)."""
    g = enable_skipping(example("mul", 16)[0])
    sets = []
    for seed, density in enumerate((0.1, 0.5)):
        _, d, _, ref = example("mul", 16, seed=seed, density=density)
        sets.append((d, ref))
    _check_graph(g, sets)


def test_skipping_verilog_is_lint_clean(tmp_path):
    s = build_graph(enable_skipping(inner_product(8, 8, 64)), tmp_path)
    res = lint(tmp_path / s["verilog"], s["top"])
    assert res.returncode == 0, res.stderr[-3000:]
