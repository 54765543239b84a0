"""One-layer GCN on KarateClub and BigBird attention pieces in RTL: outputs bit-exact with
sw_sim (and numpy), cycle counts identical."""

import numpy as np
import pytest

from fuseflow.models.suite import correlation_suite
from rtl_sim import run_graph_batch
from sw_sim import run_graph

pytestmark = pytest.mark.rtl

PIECES = ["gcn1_karate_partial_0_gcn_layer_karate_g0", "bigbird_sddmm_full_0_bigbird_scores_g0"]


@pytest.mark.parametrize("name", PIECES)
def test_model_piece_rtl_equals_sw_sim(name):
    [entry] = [e for e in correlation_suite() if e.name == name]
    graph, data, expected = entry.make()
    [rtl] = run_graph_batch(graph, [data])
    sw = run_graph(graph, data)
    for t, out in sw.outputs.items():
        assert np.array_equal(rtl.outputs[t].to_dense(), out.to_dense()), t
        assert np.array_equal(rtl.outputs[t].vals, out.vals), t
    assert rtl.cycles == sw.cycles
    [t] = sw.outputs
    assert np.array_equal(sw.outputs[t].to_dense(), expected)
