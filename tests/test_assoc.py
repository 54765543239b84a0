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
    _every_order_equals(ir, case.reference(), numerics, fusion)


def _every_order_equals(ir, reference, numerics: str, fusion: str) -> None:
    """Every association order of ``ir``'s chains, compiled at ``fusion`` and run in sw_sim,
    within the check's bound of PyTorch's ``reference``."""
    num = Numerics.parse(numerics)
    for subset in subsets(chain_pairs(ir)):
        cm = compile_model(reassociate(ir, list(subset)), fusion)
        res = run_model(cm, numerics=str(num), simulate=run_graph)
        checks = check_model(cm, res, reference, num)
        assert all(c.ok for c in checks), ([r.outer for r in subset], [c.to_json() for c in checks if not c.ok])


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


class _Split(torch.nn.Module):
    """Chains split by element-wise ops: a scale between two products, a bias between two linear
    layers, a residual added between two products, and a ReLU (which does not commute)."""

    def __init__(self, f: int = 32, h: int = 8):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.w1 = torch.nn.Parameter(torch.randn(f, h, generator=g, dtype=torch.float64))
        self.w2 = torch.nn.Parameter(torch.randn(f, h, generator=g, dtype=torch.float64))
        self.lin1 = torch.nn.Linear(h, 24, dtype=torch.float64)
        self.lin2 = torch.nn.Linear(24, 4, dtype=torch.float64)

    def forward(self, adj, x, r):
        y = (adj @ x) * 0.5 @ self.w1  # scale
        z = (adj @ x + r) @ self.w2  # a residual term
        u = self.lin2(self.lin1(y + z))  # a bias between two linear layers
        v = torch.relu(adj @ x) @ self.w1  # no: relu does not commute with the product
        return u, v


def _split_ir():
    g = torch.Generator().manual_seed(6)
    adj = (torch.rand(16, 16, generator=g) < 0.2).double()
    inputs = {"adj": adj.to_sparse_csr(), "x": torch.randn(16, 32, generator=g, dtype=torch.float64),
              "r": torch.randn(16, 32, generator=g, dtype=torch.float64)}
    m = _Split()
    with torch.no_grad():
        ref = [t.numpy() for t in m(**inputs)]
    ir = trace(m, inputs, {"adj": "csr"}, name="split")
    return ir, dict(zip(ir.outputs, ref, strict=True))


def test_chains_split_by_commuting_ops():
    """A scale and an added term (a bias vector, a residual matrix) between two products are
    chains: the op moves after the outer product (the term as its product with the outer
    operand); a ReLU between them is not a chain."""
    ir, _ = _split_ir()
    pairs = {r.outer: r for r in chain_pairs(ir)}
    texts = sorted(r.text() for r in pairs.values())
    assert len(pairs) == 3, texts
    scale = next(r for r in pairs.values() if r.scale is not None)
    assert scale.scale == 0.5 and scale.rewritten == "0.5·adj·(x·w1)" and scale.written == "(0.5·(adj·x))·w1"
    resid = next(r for r in pairs.values() if r.term == "r")
    assert resid.rewritten == "adj·(x·w2) + r·w2" and resid.term_shape == (16, 8)
    bias = next(r for r in pairs.values() if r.term.endswith("bias"))
    assert bias.term_shape == (4,) and bias.rewritten.endswith(f" + {bias.term}·lin2_weight")
    relu_user = next(n for n in ir.nodes if n.kind is MKind.EINSUM and any(
        ir.node(a).kind is MKind.UNARY for a in n.args if a in {m.name for m in ir.nodes}))
    assert relu_user.name not in pairs
    new = reassociate(ir, [resid])  # the rewritten graph, on the data with numpy
    d = {k: v.toarray() if hasattr(v, "toarray") else np.asarray(v) for k, v in ir.data.items()}
    vals = dict(d)
    for n in new.nodes:
        if n.kind is MKind.EINSUM and n.name in (resid.new, resid.chain, resid.term_new):
            vals[n.name] = np.einsum(n.attrs["spec"], *(vals[a] for a in n.args))
    got = vals[resid.chain] + vals[resid.term_new]
    np.testing.assert_allclose(got, (d["adj"] @ d["x"] + d["r"]) @ d["w2"], rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("numerics", ["float", "q16.16"])
@pytest.mark.parametrize("fusion", ["unfused", "partial"])
def test_split_chain_orders_equal_pytorch(numerics, fusion):
    ir, ref = _split_ir()
    _every_order_equals(ir, ref, numerics, fusion)


def test_split_chain_example_picks_the_moved_bias(capsys):
    """``examples/split_chain.py:bottleneck``: ``--assoc auto`` multiplies the two weights first
    and moves the bias between them after the product; sw_sim agrees that order is faster and
    both equal PyTorch."""
    model = ["--model", "examples/split_chain.py:bottleneck", "--fusion", "partial"]
    assert main(["sim", *model, "--assoc", "auto", "--json"]) == 0
    cap = capsys.readouterr()
    auto = json.loads(cap.out)
    assert "x·(down_weight·out_weight) + down_bias·out_weight" in cap.err
    assert main(["sim", *model, "--assoc", "as-written", "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert auto["ok"] and written["ok"] and auto["cycles"] * 2 < written["cycles"], (auto["cycles"], written["cycles"])
