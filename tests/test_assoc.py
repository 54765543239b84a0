"""``--assoc``: the association order of a model's matrix-product chains.  Every order of a
GCN computes PyTorch's values (sw_sim, float and fixed point, within the check's bound); the
rewrite is the matrix identity (numpy); ``--assoc auto`` picks the order the estimate puts
fastest and sw_sim agrees it is faster; the option is refused where it does nothing."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")

from fuseflow.ir.numerics import Numerics  # noqa: E402
from fuseflow.models.assoc import chain_pairs, reassociate, subsets  # noqa: E402
from fuseflow.models.bounds import check_model  # noqa: E402
from fuseflow.models.datasets import load_dataset  # noqa: E402
from fuseflow.models.frontend import trace  # noqa: E402
from fuseflow.models.ir import MKind  # noqa: E402
from fuseflow.models.plan import compile_model  # noqa: E402
from fuseflow.models.plan import run_model  # noqa: E402
from fuseflow.models.zoo import make_case  # noqa: E402
from fuseflow_cli.cli import main  # noqa: E402
from sw_sim import run_graph  # noqa: E402

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

WIDE = ["--dataset", "powerlaw", "--nodes", "48", "--features", "160", "--feature-density", "0.2"]


def _gcn(features: int = 160):
    ds = load_dataset("powerlaw", nodes=48, features=features, feature_density=0.2)
    case = make_case("gcn", ds)
    return case, trace(case.module, case.inputs, case.formats, name=case.name)


def test_gcn_chains_and_their_rewrite():
    """Both layers' (Â·X)·W chains are found; the rewrite drops Â·X, computes X·W in a
    region of its own and Â·(X·W) in the product's place, with numpy's identity on the data."""
    case, ir = _gcn()
    pairs = chain_pairs(ir)
    assert [(r.inner, r.outer) for r in pairs] == [("t1_matmul", "t2_linear"), ("t5_matmul", "t6_linear")]
    assert pairs[0].rewritten == "adj·(x·layer1_lin_weight)"
    assert pairs[0].written == "(adj·x)·layer1_lin_weight"
    new = reassociate(ir, pairs[:1])
    names = [n.name for n in new.nodes]
    assert "t1_matmul" not in names and names.index("t2_linear_assoc") == names.index("t2_linear") - 1
    v, out = new.node("t2_linear_assoc"), new.node("t2_linear")
    assert v.kind is MKind.EINSUM and v.args == ("x", "layer1_lin_weight") and v.region != out.region
    assert out.args == ("adj", "t2_linear_assoc")
    d = {k: v.toarray() if hasattr(v, "toarray") else np.asarray(v) for k, v in ir.data.items()}
    xw = np.einsum(v.attrs["spec"], d["x"], d["layer1_lin_weight"])
    got = np.einsum(out.attrs["spec"], d["adj"], xw)
    np.testing.assert_allclose(got, (d["adj"] @ d["x"]) @ d["layer1_lin_weight"].T, rtol=1e-12, atol=1e-12)
    assert len(subsets(pairs)) == 4


@pytest.mark.parametrize("numerics", ["float", "q16.16"])
@pytest.mark.parametrize("fusion", ["unfused", "partial"])
def test_every_order_equals_pytorch(numerics, fusion):
    case, ir = _gcn()
    num = Numerics.parse(numerics)
    for subset in subsets(chain_pairs(ir)):
        cm = compile_model(reassociate(ir, list(subset)), fusion)
        res = run_model(cm, numerics=str(num), simulate=run_graph)
        checks = check_model(cm, res, case.reference(), num)
        assert all(c.ok for c in checks), ([r.outer for r in subset], [c.to_json() for c in checks])


def _sim(argv, capsys):
    assert main(["sim", "--model", "gcn", *WIDE, *argv, "--json"]) == 0
    cap = capsys.readouterr()
    return json.loads(cap.out), cap.err


def test_auto_picks_the_cheaper_order_and_sw_sim_agrees(capsys):
    auto, err = _sim(["--assoc", "auto"], capsys)
    written, _ = _sim(["--assoc", "as-written"], capsys)
    choice = auto["assoc_choice"]
    assert choice["mode"] == "auto" and "t2_linear" in choice["chosen"]
    costs = {tuple(o["rewritten"]): o["estimated_cycles"] for o in choice["orders"]}
    assert len(costs) == 4 and costs[tuple(choice["chosen"])] == min(costs.values())
    assert "assoc auto -> t2_linear = adj·(x·layer1_lin_weight)" in err
    assert auto["ok"] and written["ok"] and written["assoc_choice"] is None
    assert auto["cycles"] * 1.5 < written["cycles"], (auto["cycles"], written["cycles"])


def test_explain_lists_every_order(capsys):
    assert main(["estimate", "--model", "gcn", *WIDE, "--assoc", "auto", "--fusion", "partial", "--explain"]) == 0
    err = capsys.readouterr().err
    for order in ("as written", "t2_linear", "t6_linear", "t2_linear, t6_linear"):
        assert f"assoc order [{order}]: " in err


@pytest.mark.parametrize("cmd", ["sim", "estimate", "rtl"])
def test_assoc_refused_where_it_does_nothing(cmd, capsys):
    assert main([cmd, "--kernel", "spmv", "--assoc", "auto"]) == 2
    assert "--assoc" in capsys.readouterr().err


def test_named_chains_are_reassociated_and_unknown_names_refused(capsys):
    """``--assoc PRODUCT``: that chain alone, equal to PyTorch and to the order ``--assoc auto``
    costs for it; a name that is no chain's outer product is refused, naming the chains."""
    named, err = _sim(["--assoc", "t6_linear", "--fusion", "partial"], capsys)
    assert named["ok"] and named["assoc_choice"] == {"mode": "given", "chosen": ["t6_linear"]}
    assert "assoc -> t6_linear = adj·(t4_relu·layer2_lin_weight)" in err
    auto, _ = _sim(["--assoc", "auto", "--fusion", "partial"], capsys)
    [order] = [o for o in auto["assoc_choice"]["orders"] if o["rewritten"] == ["t6_linear"]]
    assert main(["estimate", "--model", "gcn", *WIDE, "--assoc", "t6_linear", "--fusion", "partial", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert round(est["configs"][0]["cycles"]) == order["estimated_cycles"]
    assert main(["sim", "--model", "gcn", *WIDE, "--assoc", "t9_linear"]) == 2
    msg = capsys.readouterr().err
    assert "--assoc t9_linear: t9_linear is not the outer product of a chain of model gcn" in msg and "t2_linear = " in msg
