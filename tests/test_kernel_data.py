"""``--data X.mtx``: a user's matrix for the built-in kernels and graph files, checked against
scipy computed here, and the errors for files that do not fit."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from fuseflow.kernels import KERNELS, example_from_matrix
from fuseflow_cli.cli import main
from sw_sim import run_graph


@pytest.fixture(scope="module")
def lesmis(tmp_path_factory):
    """Les Misérables co-appearance weights (integers) as a Matrix Market file."""
    g = nx.convert_node_labels_to_integers(nx.les_miserables_graph(), ordering="sorted")
    m = sp.csr_array(nx.to_scipy_sparse_array(g, weight="weight", format="csr").astype(np.int64))
    path = tmp_path_factory.mktemp("mtx") / "lesmis.mtx"
    scipy.io.mmwrite(path, sp.coo_array(m), field="integer")
    return path, m


REF = {"spmv": lambda m, o: m @ o["c"], "spmm_dense": lambda m, o: (m @ o["B"]),
       "spmm_csr": lambda m, o: (m @ m).toarray(), "add": lambda m, o: (m + m).toarray(),
       "mul": lambda m, o: (m * m).toarray(), "spmspm_inner": lambda m, o: (m @ m.T).toarray(),
       "bspmm": lambda m, o: m @ o["X"]}


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kernels_on_a_matrix_equal_scipy(lesmis, kernel) -> None:
    _, m = lesmis
    g, data, ops, _ = example_from_matrix(kernel, m, seed=4)
    res = run_graph(g, data)
    out = next(iter(res.outputs.values())).to_dense()
    assert np.array_equal(out, REF[kernel](m, ops))


def test_cli_kernel_and_graph_with_mtx(lesmis, tmp_path, capsys) -> None:
    path, _ = lesmis
    assert main(["sim", "--kernel", "spmm_csr", "--data", str(path), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["ok"] is True and "lesmis.mtx (77x77)" in rec["source"]
    gpath = tmp_path / "spmv.json"
    KERNELS["spmv"](77).save(gpath)
    assert main(["sim", str(gpath), "--data", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cycles"] > 0
    KERNELS["spmv"](64).save(gpath)
    assert main(["sim", str(gpath), "--data", str(path)]) == 2
    assert "the matrix is 77x77, but the graph's sparse input 'B' is 64x64" in capsys.readouterr().err


def test_bad_matrix_files(tmp_path, capsys) -> None:
    scipy.io.mmwrite(tmp_path / "real.mtx", sp.coo_array(([0.5, 2.0], ([0, 1], [1, 0])), shape=(2, 2)))
    scipy.io.mmwrite(tmp_path / "rect.mtx", sp.coo_array(([1, 2], ([0, 1], [1, 0])), shape=(2, 3)))
    (tmp_path / "cut.mtx").write_text("%%MatrixMarket matrix coordinate integer general\n3 3 4\n1 1 2\n")
    (tmp_path / "x.txt").write_text("1 2\n")
    cases = [("real.mtx", "entry (0, 1) is 0.5; give --numerics q16.16"),
             ("cut.mtx", "not a readable Matrix Market matrix"),
             ("missing.mtx", "no such file"),
             ("x.txt", "a kernel takes one matrix")]
    for name, says in cases:
        assert main(["sim", "--kernel", "spmv", "--data", str(tmp_path / name)]) == 2, name
        assert says in capsys.readouterr().err, name
    # a rectangular matrix is an operand like any other now (y = M·c, c as long as M is wide)
    assert main(["sim", "--kernel", "spmv", "--data", str(tmp_path / "rect.mtx")]) == 0
    assert "(2x3) computing y = M·c" in capsys.readouterr().out
