"""Model data stays sparse from loading to the level arrays: a GCN on the Cora-sized synthetic
graph is traced, compiled and simulated without any N x N dense array (checked by wrapping
every densifying call), and equals PyTorch; the SAE on scikit-learn's digits; the CLI's
dataset options."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the model zoo needs PyTorch (pip install -e '.[torch]')")
import scipy.sparse as sp

from fuseflow.models.datasets import digits, load_dataset
from fuseflow.models.frontend import trace
from fuseflow.models.plan import compile_model, run_model
from fuseflow.models.zoo import make_case
from fuseflow.ir.tensor import TensorData
from fuseflow_cli.cli import main
from sw_sim import run_graph

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


def _guard(monkeypatch, limit: int) -> list[int]:
    """Fail on any array of ``limit`` or more elements made by a densifying call."""
    seen: list[int] = []

    def check(n: int, what: str) -> None:
        seen.append(n)
        if n >= limit:
            pytest.fail(f"{what} made a dense array of {n} elements")

    from_dense, to_dense = TensorData.from_dense.__func__, TensorData.to_dense
    toarray, t_dense = sp.csr_array.toarray, torch.Tensor.to_dense

    def _from_dense(cls, array, fmt):
        check(np.asarray(array).size, "TensorData.from_dense")
        return from_dense(cls, array, fmt)

    def _to_dense(self, dtype=None):
        check(int(np.prod(self.shape)), "TensorData.to_dense")
        return to_dense(self, dtype)

    def _toarray(self, *a, **k):
        check(int(np.prod(self.shape)), "scipy toarray")
        return toarray(self, *a, **k)

    def _t_dense(self, *a, **k):
        check(self.numel(), "torch to_dense")
        return t_dense(self, *a, **k)

    monkeypatch.setattr(TensorData, "from_dense", classmethod(_from_dense))
    monkeypatch.setattr(TensorData, "to_dense", _to_dense)
    monkeypatch.setattr(sp.csr_array, "toarray", _toarray)
    monkeypatch.setattr(torch.Tensor, "to_dense", _t_dense)
    return seen


@pytest.mark.parametrize("fusion", ["unfused", "partial", "full"])
def test_gcn_on_cora_sized_graph_stays_sparse(monkeypatch, fusion) -> None:
    ds = load_dataset("cora", features=12, seed=2)
    n = ds.num_nodes
    case = make_case("gcn", ds, hidden=4, classes=3, seed=2)
    ref = case.reference()
    seen = _guard(monkeypatch, n * n)
    ir = trace(case.module, case.inputs, case.formats, name="gcn")
    assert sp.issparse(ir.data["adj"]) and ir.data["adj"].nnz == ds.num_edges + n  # Â = D(A+I)D
    res = run_model(compile_model(ir, fusion), simulate=run_graph, max_cycles=10**9)
    monkeypatch.undo()
    out = res.outputs[ir.outputs[0]]
    assert np.max(np.abs(out - ref)) <= 1e-9 * np.max(np.abs(ref))
    assert seen and max(seen) < n * n


def test_sae_on_digits_matches_pytorch() -> None:
    from sklearn.datasets import load_digits

    x = digits(4, offset=10)
    assert np.array_equal(x, load_digits().data[10:14] / 16.0)
    case = make_case("sae", "digits", batch=4, seed=1)
    assert np.array_equal(case.inputs["x"].numpy(), digits(4))
    ir = trace(case.module, case.inputs, case.formats, name="sae")
    res = run_model(compile_model(ir, "full"), simulate=run_graph)
    ref = case.reference()
    assert np.max(np.abs(res.outputs[ir.outputs[0]] - ref)) <= 1e-9 * np.max(np.abs(ref))
    with pytest.raises(ValueError, match="64 pixels, not 32"):
        make_case("sae", "digits", sae_in=32)
    with pytest.raises(ValueError, match="sae dataset 'karate'"):
        make_case("sae", "karate")


def test_cli_dataset_options(capsys) -> None:
    assert main(["sim", "--model", "gcn", "--dataset", "les_miserables", "--hidden", "4", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["ok"] and "les_miserables" in rec["source"] and "77 nodes" in rec["source"]
    assert main(["sim", "--model", "sae", "--dataset", "digits", "--fusion", "full", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["ok"] and "handwritten digits" in rec["source"]
    assert main(["sim", "--model", "gpt", "--dataset", "karate"]) != 0
    assert "gpt runs on a seeded random sequence" in capsys.readouterr().err
    assert main(["sim", "--model", "gcn", "--dataset", "nope"]) != 0
    assert "unknown dataset 'nope'" in capsys.readouterr().err
