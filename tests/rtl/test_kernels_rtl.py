"""The spine kernels in RTL: bit-exact with sw_sim (and numpy) and the same cycle count.
One Verilator build per kernel; all datasets run through it in one simulator process."""

import numpy as np
import pytest
from kernel_cases import CASES, REFERENCE, dataset

from rtl_sim import run_graph_batch
from sw_sim import run_graph

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("kernel", sorted(REFERENCE))
def test_kernel_rtl_equals_sw_sim(kernel):
    n = 64
    sets = [dataset(kernel, n, case, seed=5) for case in CASES]
    g = sets[0][0]
    results = run_graph_batch(g, [d for _, d, _ in sets])
    for case, (_, data, ref), rtl in zip(CASES, sets, results):
        sw = run_graph(g, data)
        [name] = sw.outputs
        for arr in ("vals",):
            assert np.array_equal(rtl.outputs[name].vals, sw.outputs[name].vals), case
        for lvl in range(len(g.tensors[name].shape)):
            if sw.outputs[name].seg[lvl] is not None:
                assert np.array_equal(rtl.outputs[name].seg[lvl], sw.outputs[name].seg[lvl]), case
                assert np.array_equal(rtl.outputs[name].crd[lvl], sw.outputs[name].crd[lvl]), case
        assert np.array_equal(rtl.outputs[name].to_dense(), ref), case
        assert rtl.cycles == sw.cycles, f"{kernel}/{case}: RTL {rtl.cycles} cycles, sw_sim {sw.cycles}"
