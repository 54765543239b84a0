"""Datasets: KarateClub, synthetic graphs and file loaders (no torch needed)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from fuseflow.models.datasets import (
    block_diagonal,
    cora_like,
    gcn_normalize,
    karate,
    load_dataset,
    load_graph_file,
    mean_normalize,
    power_law,
    uniform_random,
)


def test_karate_matches_networkx() -> None:
    ds = karate()
    g = nx.karate_club_graph()
    assert ds.num_nodes == 34 and ds.num_edges == 2 * g.number_of_edges() == 156
    for u, v in g.edges():
        assert ds.adjacency[u, v] == ds.adjacency[v, u] == 1.0
    assert np.array_equal(ds.features, np.eye(34))


def test_normalisations_against_formulas() -> None:
    a = karate().adjacency
    deg = a.sum(1) + 1
    ref = (a + np.eye(34)) / np.sqrt(np.outer(deg, deg))
    assert np.allclose(gcn_normalize(a), ref)
    assert np.allclose(mean_normalize(a).sum(1), 1.0)


def test_cora_shape_and_sparsity() -> None:
    ds = cora_like()
    assert (ds.num_nodes, ds.num_features) == (2708, 1433)
    assert np.array_equal(ds.adjacency, ds.adjacency.T) and not np.diag(ds.adjacency).any()
    assert 4500 < ds.num_edges / 2 < 6000  # Cora: 5278 undirected edges
    assert 0.005 < np.count_nonzero(ds.features) / ds.features.size < 0.02


@pytest.mark.parametrize("make", [
    lambda: uniform_random(200, 5.0, 8, seed=1),
    lambda: power_law(200, 3, 8, seed=1),
    lambda: block_diagonal(200, 4, 0.2, 8, seed=1),
])
def test_synthetic_graphs_are_simple_undirected(make) -> None:
    ds = make()
    a = ds.adjacency
    assert a.shape == (200, 200) and np.array_equal(a, a.T) and not np.diag(a).any()
    assert set(np.unique(a)) <= {0.0, 1.0} and ds.num_edges > 0


def test_block_diagonal_has_no_cross_block_edges() -> None:
    a = block_diagonal(100, 4, 0.5, 4, seed=0).adjacency
    assert not a[:25, 25:].any() and not a[25:50, 50:].any()


def test_power_law_degree_tail() -> None:
    deg = power_law(2000, 2, 4, seed=0).adjacency.sum(1)
    assert deg.max() > 10 * np.median(deg)


def test_matrix_market_loader(tmp_path) -> None:
    ref = karate().adjacency
    r, c = np.nonzero(np.triu(ref))
    lines = ["%%MatrixMarket matrix coordinate pattern symmetric", "% karate", f"34 34 {len(r)}"]
    lines += [f"{i + 1} {j + 1}" for i, j in zip(r, c)]
    path = tmp_path / "karate.mtx"
    path.write_text("\n".join(lines) + "\n")
    ds = load_graph_file(path, features=5)
    assert np.array_equal(ds.adjacency, ref) and ds.features.shape == (34, 5)


def test_npz_loader(tmp_path) -> None:
    sp = pytest.importorskip("scipy.sparse", reason="scipy reads .npz graphs")
    ref = power_law(50, 2, 4, seed=3).adjacency
    sp.save_npz(tmp_path / "g.npz", sp.csr_matrix(np.triu(ref)))
    assert np.array_equal(load_dataset(str(tmp_path / "g.npz")).adjacency, ref)


def test_loader_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load_dataset("nope")
    with pytest.raises(ValueError, match="does not exist"):
        load_graph_file(tmp_path / "missing.mtx")
    bad = tmp_path / "bad.mtx"
    bad.write_text("hello\n")
    with pytest.raises(ValueError, match="not a Matrix Market"):
        load_graph_file(bad)


def test_front_end_imports_without_torch() -> None:
    """datasets / plan / suite / the CLI hooks must not import torch (it is an optional extra)."""
    import subprocess
    import sys

    code = ("import sys, fuseflow_cli.cli, fuseflow.models, fuseflow.models.plan, fuseflow.models.suite, "
            "fuseflow_cli.models; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
