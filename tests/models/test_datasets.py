"""Datasets: the real graphs shipped with networkx, the matched synthetic graphs, the generic
generators and the file loaders (Matrix Market, .npz, Planetoid, OGB) — checked against
networkx, scipy and numpy directly (no torch needed)."""

from __future__ import annotations

import gzip
import os
import pickle
import subprocess
import sys
from collections import defaultdict

import networkx as nx
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from fuseflow.models.datasets import (
    DATASETS,
    MATCHED,
    REAL_GRAPHS,
    block_diagonal,
    gcn_normalize,
    karate,
    load_dataset,
    load_graph_file,
    matched_synthetic,
    mean_normalize,
    power_law,
    uniform_random,
)


def _edges(a: sp.sparray) -> set[tuple[int, int]]:
    r, c = sp.triu(a, k=1).nonzero()
    return set(zip(r.tolist(), c.tolist()))


def _check_simple(a) -> None:
    assert sp.issparse(a) and a.format == "csr" and a.has_sorted_indices
    assert (a != a.T).nnz == 0 and not a.diagonal().any() and set(np.unique(a.data)) <= {1.0}


@pytest.mark.parametrize("name", sorted(REAL_GRAPHS))
def test_real_graphs_equal_networkx(name) -> None:
    g = getattr(nx, {"karate": "karate_club_graph"}.get(name, f"{name}_graph"))()
    try:
        nodes = sorted(g.nodes())
    except TypeError:
        nodes = sorted(g.nodes(), key=str)
    index = {v: i for i, v in enumerate(nodes)}
    ref = {tuple(sorted((index[u], index[v]))) for u, v in g.edges() if u != v}
    ds = load_dataset(name)
    _check_simple(ds.adjacency)
    assert ds.num_nodes == g.number_of_nodes() and _edges(ds.adjacency) == ref
    assert not ds.synthetic and np.array_equal(ds.features, np.eye(ds.num_nodes))
    assert load_dataset(name, features=6).features.shape == (ds.num_nodes, 6)


def test_karate_size() -> None:
    ds = karate()
    assert ds.num_nodes == 34 and ds.num_edges == 156  # 78 undirected edges


def test_normalisations_against_dense_formulas() -> None:
    a = karate().adjacency
    dense = a.toarray()
    deg = dense.sum(1) + 1
    ref = (dense + np.eye(34)) / np.sqrt(np.outer(deg, deg))
    g, m = gcn_normalize(a), mean_normalize(a)
    assert sp.issparse(g) and sp.issparse(m)
    assert np.allclose(g.toarray(), ref)
    assert np.allclose(m.toarray(), dense / dense.sum(1, keepdims=True))


@pytest.mark.parametrize("name", sorted(MATCHED))
def test_matched_synthetic_sizes(name) -> None:
    spec = MATCHED[name]
    ds = matched_synthetic(name, features=None if spec.nodes < 50_000 else 4, seed=1)
    a = ds.adjacency
    _check_simple(a)
    deg = ds.degrees()
    assert ds.num_nodes == spec.nodes and ds.num_edges == 2 * spec.edges  # exactly
    assert deg.min() >= 1 and deg.max() > 10 * np.median(deg)  # connected ends, heavy tail
    if spec.max_degree:
        assert deg.max() <= spec.max_degree
    if spec.nodes < 50_000:
        assert ds.num_features == spec.features
        dens = np.count_nonzero(ds.features) / ds.features.size
        assert abs(dens - spec.feature_density) < 0.25 * spec.feature_density
    assert ds.synthetic and "synthetic" in ds.describe() and spec.title in ds.describe()
    again = matched_synthetic(name, features=4, seed=1)
    assert (again.adjacency != a).nnz == 0  # seeded


def test_dataset_names_all_load() -> None:
    for name in DATASETS:
        if name != "ogb_collab":  # its own test above
            assert load_dataset(name).num_edges > 0


@pytest.mark.parametrize("make", [
    lambda: uniform_random(200, 5.0, 8, seed=1),
    lambda: power_law(200, 3, 8, seed=1),
    lambda: block_diagonal(200, 4, 0.2, 8, seed=1),
])
def test_generic_graphs_are_simple_undirected(make) -> None:
    ds = make()
    assert ds.adjacency.shape == (200, 200) and ds.num_edges > 0
    _check_simple(ds.adjacency)


def test_block_diagonal_has_no_cross_block_edges() -> None:
    a = block_diagonal(100, 4, 0.5, 4, seed=0).adjacency
    assert a[:25, 25:].nnz == 0 and a[25:50, 50:].nnz == 0 and a[:25, :25].nnz > 0


def test_matrix_market_files(tmp_path) -> None:
    ref = karate().adjacency
    path = tmp_path / "k.mtx"
    scipy.io.mmwrite(path, sp.coo_array(sp.triu(ref)), symmetry="general")
    ds = load_graph_file(path, features=5)
    assert _edges(ds.adjacency) == _edges(ref) and ds.features.shape == (34, 5)
    r, c = sp.triu(ref).nonzero()  # a hand-written pattern / symmetric file
    lines = ["%%MatrixMarket matrix coordinate pattern symmetric", "% karate", f"34 34 {len(r)}"]
    (tmp_path / "p.mtx").write_text("\n".join(lines + [f"{j + 1} {i + 1}" for i, j in zip(r, c)]) + "\n")
    assert _edges(load_dataset(str(tmp_path / "p.mtx")).adjacency) == _edges(ref)
    truncated = "\n".join(lines + [f"{j + 1} {i + 1}" for i, j in zip(r[:10], c[:10])]) + "\n"
    (tmp_path / "t.mtx").write_text(truncated)
    with pytest.raises(ValueError, match="t.mtx.*not a readable Matrix Market"):
        load_graph_file(tmp_path / "t.mtx")


def test_npz_file(tmp_path) -> None:
    ref = power_law(50, 2, 4, seed=3).adjacency
    sp.save_npz(tmp_path / "g.npz", sp.csr_matrix(sp.triu(ref)))
    assert _edges(load_dataset(str(tmp_path / "g.npz")).adjacency) == _edges(ref)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="bad.npz.*not a readable scipy sparse"):
        load_graph_file(tmp_path / "bad.npz")


def _write_planetoid(d, g: nx.Graph, x: np.ndarray, test: np.ndarray) -> None:
    """The Planetoid layout (ind.<name>.*): pickled adjacency lists, training features for
    the first rows (allx), test features (tx) in the order of test.index."""
    d.mkdir()
    lists = defaultdict(list, {v: sorted(g.neighbors(v)) for v in g.nodes()})
    train = np.setdiff1d(np.arange(len(x)), test)
    assert np.array_equal(train, np.arange(len(train)))  # allx covers the first rows
    order = np.random.default_rng(0).permutation(test)
    blobs = {"graph": lists, "allx": sp.csr_matrix(x[train]), "tx": sp.csr_matrix(x[order])}
    for k, v in blobs.items():
        (d / f"ind.toy.{k}").write_bytes(pickle.dumps(v, protocol=2))
    (d / "ind.toy.test.index").write_text("\n".join(map(str, order)) + "\n")


def test_planetoid_directory(tmp_path) -> None:
    g = nx.les_miserables_graph()
    g = nx.convert_node_labels_to_integers(g, ordering="sorted")
    rng = np.random.default_rng(2)
    x = (rng.random((g.number_of_nodes(), 9)) < 0.3).astype(np.float64)
    _write_planetoid(tmp_path / "planetoid", g, x, np.arange(60, 77))
    ds = load_dataset(str(tmp_path / "planetoid"))
    assert ds.name == "toy" and ds.num_nodes == 77
    assert _edges(ds.adjacency) == {tuple(sorted(e)) for e in g.edges()}
    assert np.array_equal(ds.features, x)


def test_planetoid_refuses_other_pickled_classes(tmp_path) -> None:
    d = tmp_path / "evil"
    d.mkdir()
    (d / "ind.evil.graph").write_bytes(pickle.dumps(os.getcwd, protocol=2))  # a posix function
    with pytest.raises(ValueError, match="refusing to load"):
        load_dataset(str(d))


def test_ogb_directory(tmp_path) -> None:
    raw = tmp_path / "ogbl_toy" / "raw"
    raw.mkdir(parents=True)
    g = nx.florentine_families_graph()
    g = nx.convert_node_labels_to_integers(g, ordering="sorted")
    edges = np.array(sorted(g.edges()))
    feats = np.random.default_rng(1).standard_normal((15, 4)).round(6)
    with gzip.open(raw / "edge.csv.gz", "wt") as fh:
        fh.write("\n".join(f"{u},{v}" for u, v in edges) + "\n")
    with gzip.open(raw / "node-feat.csv.gz", "wt") as fh:
        fh.write("\n".join(",".join(map(str, row)) for row in feats) + "\n")
    with gzip.open(raw / "num-node-list.csv.gz", "wt") as fh:
        fh.write("15\n")
    ds = load_dataset(str(tmp_path / "ogbl_toy"))
    assert ds.num_nodes == 15 and _edges(ds.adjacency) == {tuple(sorted(e)) for e in edges.tolist()}
    assert np.allclose(ds.features, feats)
    with gzip.open(raw / "num-node-list.csv.gz", "wt") as fh:
        fh.write("10\n")
    with pytest.raises(ValueError, match="names node 14, but the graph has 10 nodes"):
        load_dataset(str(tmp_path / "ogbl_toy"))


def test_loader_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load_dataset("nope")
    with pytest.raises(ValueError, match="does not exist"):
        load_graph_file(tmp_path / "missing.mtx")
    bad = tmp_path / "bad.mtx"
    bad.write_text("hello\n")
    with pytest.raises(ValueError, match="bad.mtx"):
        load_graph_file(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="neither a Planetoid directory"):
        load_dataset(str(tmp_path / "empty"))


def test_front_end_imports_without_torch() -> None:
    """datasets / plan / suite / the CLI hooks must not import torch (it is an optional extra)."""
    code = ("import sys, fuseflow_cli.cli, fuseflow.models, fuseflow.models.plan, fuseflow.suites.models, "
            "fuseflow_cli.models; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
