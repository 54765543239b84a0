"""User modules in RTL (amaranth.sim: the generated RTL, nothing to build): every graph of the
compiled model runs in RTL with Q16.16 values next to sw_sim (same inputs, host steps between
graphs on the host), values and cycles identical, and the dequantised result within the
fixed-point bound of PyTorch.  Six modules, about 30 s in all."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")

sys.path.insert(0, str(Path(__file__).parent))
from model_checks import assert_model_matches
from suite import CASES, reference

from fuseflow.models.frontend import trace
from fuseflow.models.plan import compile_model, run_model
from fuseflow.ir.numerics import Numerics
from hw import HwConfig
from rtl_sim import run_graph_batch
from sw_sim import run_graph

pytestmark = pytest.mark.rtl
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

MORE = ["gcn2_sparse_mm_csr", "gin", "sage_concat", "mttkrp_coo", "data_dependent_branch"]


def _rtl_equals_sw_sim(name: str) -> None:
    m, ins, fmts = CASES[name].make()
    ir = trace(m, ins, fmts, name=name)
    cm = compile_model(ir, "full")
    num = Numerics.parse("q16.16")
    cfg = HwConfig.for_numerics(num)
    runs = []

    def both(graph, data, **kw):
        sw = run_graph(graph, data, **kw)
        [rtl] = run_graph_batch(graph, [data], cfg=cfg, runner="amaranth")
        for t, out in sw.outputs.items():
            assert np.array_equal(rtl.outputs[t].vals, out.vals), (graph.name, t)
            assert np.array_equal(rtl.outputs[t].to_dense(), out.to_dense()), (graph.name, t)
        assert rtl.cycles == sw.cycles, graph.name
        runs.append(graph.name)
        return sw

    res = run_model(cm, numerics=str(num), simulate=both)
    assert runs == [g.name for g in cm.graphs]
    assert_model_matches(cm, res, reference(m, ins), str(num))


def test_mlp_in_rtl() -> None:
    _rtl_equals_sw_sim("mlp")


@pytest.mark.parametrize("name", MORE)
def test_user_module_in_rtl(name: str) -> None:
    _rtl_equals_sw_sim(name)
