"""The ML pieces of the sim-vs-RTL correlation suite run in sw_sim and match numpy exactly."""

from __future__ import annotations

import numpy as np

from fuseflow.suites.models import correlation_suite
from fuseflow.suites import suite
from sw_sim import run_graph


def test_correlation_suite_entries_match_numpy() -> None:
    entries = correlation_suite()
    models = {e.model for e in entries}
    assert models == {"gcn", "graphsage", "gpt3_bigbird"}
    assert len({e.name for e in entries}) == len(entries)
    for e in entries:
        g, data, expected = e.make(run_graph)
        assert expected is not None, e.name
        res = run_graph(g, data)
        [out] = res.outputs.values()
        assert np.array_equal(out.to_dense(), expected), e.name
        assert res.cycles > 0


def test_correlation_suite_is_registered() -> None:
    names = {e.name for e in suite("ml")}
    assert any(n.startswith("gcn1_karate_partial") for n in names)
    assert any(n.startswith("bigbird_sddmm") for n in names)
