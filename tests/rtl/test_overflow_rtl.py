"""A writer whose output does not fit its memory is an error in every RTL runner (its length
register counts past the region depth while the address wraps), never a wrong tensor."""

from __future__ import annotations

import numpy as np
import pytest

from fuseflow.kernels import example
from hw.elaborate import HwConfig
from rtl_sim import ToolchainError
from rtl_sim import run_graph as rtl_run
from sw_sim import run_graph

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize("runner", ["native", "cocotb"])
def test_output_larger_than_its_memory_is_an_error(runner) -> None:
    g, data, ops, _ = example("add", 8, seed=3, density=0.5)
    [out] = [t for t, s in g.tensors.items() if s.role.value == "output"]
    nnz = len(run_graph(g, data).outputs[out].vals)
    union = np.logical_or.reduce([v != 0 for v in ops.values()])
    assert nnz == int(union.sum()) > 4  # sw_sim writes every position either operand stores
    cfg = HwConfig(max_nnz=((out, 4),))
    with pytest.raises(ToolchainError, match=rf"output array '{out}\.[0-9a-z.]+' reports \d+ entries but its "
                                             r"memory holds 4: its writer overflowed"):
        rtl_run(g, data, cfg=cfg, runner=runner)
