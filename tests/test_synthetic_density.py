"""Synthetic graphs honour the adjacency density (fuseflow.models.datasets.synthetic_graph and
``--density`` / ``--feature-density`` of the model commands)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.models.datasets import (
    SYNTHETIC,
    block_diagonal,
    load_dataset,
    power_law,
    synthetic_graph,
    uniform_random,
)
from fuseflow_cli.cli import main


@pytest.mark.parametrize("pattern", SYNTHETIC)
@pytest.mark.parametrize("density", [0.5, 0.25, 0.1, 0.05])
def test_adjacency_density_is_the_requested_one(pattern, density) -> None:
    n = 200
    ds = synthetic_graph(pattern, n, density, features=8, seed=3)
    a = sp.csr_array(ds.adjacency)
    dense = a.toarray()
    assert np.array_equal(dense, dense.T) and not np.diag(dense).any()  # undirected, no self loops
    assert set(np.unique(a.data)) == {1.0}
    achieved = np.count_nonzero(dense) / n**2
    assert abs(achieved - density) <= 2 / n**2, (pattern, density, achieved)
    assert ds.synthetic and f"{achieved:.4g}" in ds.describe()


def test_patterns_differ_in_structure() -> None:
    n, d = 256, 0.05
    deg = {p: synthetic_graph(p, n, d, seed=1).degrees() for p in SYNTHETIC}
    assert deg["powerlaw"].max() > 3 * np.median(deg["powerlaw"])  # a heavy tail
    assert deg["uniform"].max() < 2 * np.median(deg["uniform"])
    a = synthetic_graph("blockdiag", n, d, seed=1).adjacency.tocoo()
    bounds = np.linspace(0, n, n // 32 + 1).astype(int)  # 8 blocks hold 5 % of 256 x 256
    block = np.searchsorted(bounds, np.arange(n), side="right") - 1
    assert np.array_equal(block[a.row], block[a.col])  # no edge between blocks


def test_feature_density_and_seed() -> None:
    ds = load_dataset("uniform", nodes=200, features=100, density=0.1, feature_density=0.3)
    assert abs(np.count_nonzero(ds.features) / ds.features.size - 0.3) < 0.02
    again = load_dataset("uniform", nodes=200, features=100, density=0.1, feature_density=0.3)
    assert (again.adjacency != ds.adjacency).nnz == 0


def test_impossible_densities_are_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        synthetic_graph("uniform", 10, 0.95)
    with pytest.raises(ValueError, match="less than one edge"):
        synthetic_graph("powerlaw", 10, 0.001)
    with pytest.raises(ValueError, match="synthetic graphs"):
        load_dataset("karate", density=0.1)


def test_default_graphs_unchanged() -> None:
    """Without a density the generic graphs are the older generators' (tests and results use them)."""
    for name, ref in (("uniform", uniform_random(256, 0.02 * 255, 16)),
                      ("powerlaw", power_law(256, 3, 16)),
                      ("blockdiag", block_diagonal(256, 8, 0.16, 16))):
        ds = load_dataset(name)
        assert (ds.adjacency != ref.adjacency).nnz == 0 and np.array_equal(ds.features, ref.features)


def _sim(capsys, *extra: str) -> dict:
    rc = main(["sim", "--model", "gcn", "--nodes", "40", "--features", "8", "--hidden", "4", "--json", *extra])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


@pytest.mark.parametrize("pattern", SYNTHETIC)
def test_sim_cycles_follow_the_density(capsys, pattern) -> None:
    pytest.importorskip("torch")
    sparse = _sim(capsys, "--dataset", pattern, "--density", "0.05")
    denser = _sim(capsys, "--dataset", pattern, "--density", "0.4")
    assert sparse["cycles"] < denser["cycles"]
    assert "adjacency 95.000% sparse" in sparse["source"] and "adjacency 60.000% sparse" in denser["source"]


def test_density_refused_where_it_does_nothing(capsys) -> None:
    pytest.importorskip("torch")
    assert main(["sim", "--model", "gcn", "--dataset", "karate", "--density", "0.3"]) == 2
    assert "--density" in capsys.readouterr().err
    assert main(["sim", "--kernel", "spmv", "--size", "8", "--feature-density", "0.3"]) == 2
    assert "--feature-density" in capsys.readouterr().err


def test_sweep_axes_reach_the_synthetic_graphs(tmp_path) -> None:
    from fuseflow_cli.sweep import load_sweep

    f = tmp_path / "s.toml"
    f.write_text('[[grid]]\nmodel = "gcn"\ndataset = "powerlaw"\nnodes = 40\n'
                 'density = [0.05, 0.4]\nfeature_density = 0.2\n')
    argvs = [c.argv for c in load_sweep(f).configs]
    assert len(argvs) == 2
    for argv, d in zip(argvs, ("0.05", "0.4")):
        assert argv[argv.index("--density") + 1] == d and argv[argv.index("--feature-density") + 1] == "0.2"
