"""One-layer GCN on KarateClub and BigBird attention pieces in RTL: outputs bit-exact with
sw_sim (and numpy), cycle counts identical.  The pieces run under amaranth.sim, the whole
two-layer GCN in Q16.16 on Verilator (the native harness)."""

import numpy as np
import pytest

from fuseflow.ir.check import compare
from fuseflow.compiler import graph_runs
from fuseflow.models.bounds import model_enclosures
from fuseflow.models.frontend import trace
from fuseflow.models.plan import CompilerStep, _input_format, compile_model, quantized_input
from fuseflow.suites.models import correlation_suite
from fuseflow.ir.numerics import Numerics
from hw import HwConfig
from rtl_sim import run_graph_batch
from sw_sim import run_graph

pytestmark = pytest.mark.rtl

PIECES = ["gcn1_karate_partial_0_gcn_layer_karate_g0", "bigbird_sddmm_full_0_bigbird_scores_g0"]


@pytest.mark.parametrize("name", PIECES)
def test_model_piece_rtl_equals_sw_sim(name):
    [entry] = [e for e in correlation_suite() if e.name == name]
    graph, data, expected = entry.make(run_graph)
    [rtl] = run_graph_batch(graph, [data], runner="amaranth")
    sw = run_graph(graph, data)
    for t, out in sw.outputs.items():
        assert np.array_equal(rtl.outputs[t].to_dense(), out.to_dense()), t
        assert np.array_equal(rtl.outputs[t].vals, out.vals), t
    assert rtl.cycles == sw.cycles
    [t] = sw.outputs
    assert np.array_equal(sw.outputs[t].to_dense(), expected)


def test_gcn_two_layers_fixed_point_rtl_equals_sw_sim_and_pytorch():
    """The whole 2-layer GCN (KarateClub, partial fusion: one graph per layer) in RTL with
    Q16.16 values and the model's float weights: every graph's outputs bit-exact with sw_sim in
    Q16.16, equal cycles, and the dequantised result within the fixed-point bound of PyTorch."""
    pytest.importorskip("torch", reason="the model zoo needs PyTorch")
    import warnings

    from fuseflow.models.zoo import make_case

    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    num = Numerics.parse("q16.16")
    case = make_case("gcn", "karate", hidden=8, classes=4)
    ir = trace(case.module, case.inputs, case.formats, name="gcn")
    cm = compile_model(ir, "partial")
    [step] = cm.steps
    assert isinstance(step, CompilerStep) and len(step.graphs) == 2
    data = {n.name: quantized_input(n.name, ir.data[n.name], n.shape, num, _input_format(ir, n))
            for n in ir.nodes if n.name in step.inputs}
    last = None
    for g, inputs, sw in graph_runs(step.compiled, data, numerics=num, simulate=run_graph):
        [rtl] = run_graph_batch(g, [inputs], cfg=HwConfig.for_numerics(num), runner="native")
        for t, out in sw.outputs.items():
            assert np.array_equal(rtl.outputs[t].vals, out.vals), (g.name, t)
            assert np.array_equal(rtl.outputs[t].to_dense(), out.to_dense()), (g.name, t)
        assert rtl.cycles == sw.cycles, g.name
        last = rtl.outputs
    [out] = ir.outputs
    got = np.asarray(num.dequantize(last[out].to_dense()), dtype=np.float64)
    enc, _ = model_enclosures(cm, num)
    check = compare(out, got, case.reference(), enc[out].lo, enc[out].hi, str(num))
    assert check.ok, check.text()
