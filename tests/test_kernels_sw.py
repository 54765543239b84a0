import numpy as np
import pytest
from kernel_cases import CASES, REFERENCE, dataset

from fuseflow.ir.samml import Edge
from sw_sim import DeadlockError, run_graph


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kernel", sorted(REFERENCE))
def test_kernel_matches_numpy(kernel, case):
    g, data, ref = dataset(kernel, 64, case, seed=7)
    res = run_graph(g, data)
    [out] = res.outputs.values()
    assert np.array_equal(out.to_dense(), ref)
    assert res.cycles > 0


@pytest.mark.parametrize("seed", range(3))
def test_spmm_formats_agree_on_the_same_product(seed):
    g1, d1, ref = dataset("spmm_csr", 32, "random", seed)
    res = run_graph(g1, d1)
    assert np.array_equal(res.outputs["C"].to_dense(), ref)


def test_fifo_depth_changes_cycles_not_values():
    g, data, ref = dataset("spmm_csr", 32, "random", 3)
    g.edges = [Edge(e.src, e.dst) for e in g.edges]  # default depths everywhere
    shallow = run_graph(g, data, fifo_depth=2)
    deep = run_graph(g, data, fifo_depth=8)
    assert np.array_equal(shallow.outputs["C"].to_dense(), ref)
    assert np.array_equal(deep.outputs["C"].to_dense(), ref)
    assert deep.cycles <= shallow.cycles


def test_stats_count_tokens():
    g, data, _ = dataset("spmv", 16, "random", 1)
    res = run_graph(g, data)
    st = res.stats["write_y_vals"]
    assert st.tokens_in == 16 + 2  # 16 values, the S0 closing the vector, D
    assert res.stats["root_B"].tokens_out == 2


def test_depth_one_fifos_deadlock_spmm_and_say_where():
    # The scanner closes a fiber only after seeing the next reference, while the accumulator
    # holds the current outer coordinate until that stop: one-entry FIFOs cannot hold both.
    g, data, _ = dataset("spmm_csr", 32, "random", 3)
    g.edges = [Edge(e.src, e.dst) for e in g.edges]  # undo size_fifos: every FIFO one entry
    with pytest.raises(DeadlockError, match=r"bc_scan_A1_crd: output out0 full \(bc_scan_A1_crd.out0 -> spacc.outer\)"):
        run_graph(g, data, fifo_depth=1)
