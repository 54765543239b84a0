"""Common PyTorch idioms users write (issue 35), each traced through the normal frontend,
compiled, run in sw_sim on small sizes and compared with what PyTorch computes on the dense
values (float64): attention with boolean / float / causal masks through
``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention``, the ``torch.sparse`` API and
sparse accessors, masks, activations and normalisations around sparse products.  Each case
also says which ops may run as (announced) host steps; anything else on the host fails it."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")

import torch.nn.functional as F
from torch import nn

from fuseflow.models.frontend import FrontendError, MKind, trace
from fuseflow.models.plan import compile_model, run_model
from fuseflow_cli.cli import main
from sw_sim import run_graph

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta state.*")

N, D = 6, 4


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _adj(seed=1, p=0.4):
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(N, N, generator=g) < p).double() * (torch.rand(N, N, generator=g) + 0.5)
    return a + torch.eye(N, dtype=torch.float64)  # every row has an entry


def _keep(seed=2, p=0.5):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(N, N, generator=g) < p) | torch.eye(N, dtype=torch.bool)


def _dense(t):
    return t.to_dense() if t.layout != torch.strided else t


def compiled_output(m, inputs, formats=None, fusion="partial"):
    """Trace, compile, run in sw_sim: (the output, the IR, the host ops' names)."""
    ir = trace(m, inputs, formats=formats)
    cm = compile_model(ir, fusion)
    res = run_model(cm, simulate=run_graph)
    hosts = {n.attrs.get("op") for n in ir.nodes if n.kind is MKind.HOST}
    return res.outputs[ir.outputs[0]], ir, hosts


def check(m, inputs, formats=None, host_ops=(), fusion="partial"):
    """The compiled model's output equals PyTorch's; only ``host_ops`` run on the host."""
    m = m.eval()
    with torch.no_grad():
        ref = _dense(m(**inputs)).double().numpy()
    out, ir, hosts = compiled_output(m, inputs, formats, fusion)
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)
    assert hosts <= set(host_ops), (hosts, ir.text())
    return ir


# ----------------------------------------------------------------------------- attention
class SDPA(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class SDPANoMask(nn.Module):
    def __init__(self, causal: bool = False) -> None:
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


class MHA(nn.Module):
    def __init__(self, need_weights: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.att = nn.MultiheadAttention(D, 2, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x, mask):
        return self.att(x, x, x, attn_mask=mask, need_weights=self.need_weights)[0]


class MHAPadding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.att = nn.MultiheadAttention(D, 2, batch_first=True)

    def forward(self, x, pad):
        return self.att(x, x, x, key_padding_mask=pad, need_weights=False)[0]


class MHABoth(MHAPadding):
    def forward(self, x, mask, pad):
        return self.att(x, x, x, attn_mask=mask, key_padding_mask=pad)[0]


class Encoder(nn.Module):
    """nn.TransformerEncoderLayer with a padding mask, or causal with its float -inf mask."""

    def __init__(self, causal: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.TransformerEncoderLayer(D, 2, dim_feedforward=8, batch_first=True)
        self.causal = causal

    def forward(self, x, pad):
        if self.causal:
            mask = nn.Transformer.generate_square_subsequent_mask(N, dtype=torch.float64)
            return self.layer(x, src_mask=mask, is_causal=True, src_key_padding_mask=pad)
        return self.layer(x, src_key_padding_mask=pad)


def _qkv(batch=()):
    return {n: _rand(*batch, N, D, seed=s) for s, n in enumerate("qkv")}


def _float_mask(neg_inf_row: bool = False):
    m = _rand(N, N, seed=7)
    if neg_inf_row:
        m[2] = float("-inf")  # a row that masks every key: 0 after PyTorch's safe softmax
        m[4, :3] = float("-inf")
    return m


def _padding(batch=1):
    pad = torch.zeros(batch, N, dtype=torch.bool)
    pad[:, -2:] = True
    pad[-1, 0] = True
    return pad


ATTENTION = {
    "sdpa_bool_mask": (SDPA, lambda: {**_qkv(), "mask": _keep()}, None, ()),
    "sdpa_bool_mask_csr_input": (SDPA, lambda: {**_qkv(), "mask": _keep()}, {"mask": "csr"}, ()),
    "sdpa_bool_mask_batched": (SDPA, lambda: {**_qkv((2, 2)), "mask": _keep()}, None, ()),
    "sdpa_bool_mask_empty_row": (SDPA, lambda: {**_qkv(), "mask": _keep().index_fill(0, torch.tensor([3]), False)},
                                 None, ()),
    "sdpa_float_mask": (SDPA, lambda: {**_qkv(), "mask": _float_mask()}, None, ()),
    "sdpa_float_mask_neg_inf_rows": (SDPA, lambda: {**_qkv(), "mask": _float_mask(True)}, None, ()),
    "sdpa_causal": (lambda: SDPANoMask(True), _qkv, None, ()),
    "sdpa_no_mask_batched": (SDPANoMask, lambda: _qkv((3,)), None, ()),
    "mha_bool_attn_mask": (MHA, lambda: {"x": _rand(1, N, D), "mask": ~_keep()}, None, ()),
    "mha_float_attn_mask": (MHA, lambda: {"x": _rand(1, N, D), "mask": _float_mask()}, None, ()),
    "mha_float_attn_mask_neg_inf": (MHA, lambda: {"x": _rand(1, N, D), "mask": _float_mask(True)}, None, ()),
    "mha_bool_attn_mask_need_weights": (lambda: MHA(True), lambda: {"x": _rand(1, N, D), "mask": ~_keep()}, None, ()),
    "mha_key_padding_mask": (MHAPadding, lambda: {"x": _rand(1, N, D), "pad": _padding()}, None, ()),
    "mha_key_padding_mask_batch2": (MHAPadding, lambda: {"x": _rand(2, N, D), "pad": _padding(2)}, None, ()),
    "transformer_encoder_padding": (Encoder, lambda: {"x": _rand(1, N, D), "pad": _padding()}, None, ()),
    # (no row fully masked: PyTorch's fused fast path of the layer in eval gives NaN there, SDPA 0)
    "transformer_encoder_causal": (lambda: Encoder(True), lambda: {"x": _rand(2, N, D), "pad": _padding(2)[:, [1, 0, 2, 3, 4, 5]]},
                                   None, ()),
    "mha_attn_and_padding_masks": (MHABoth, lambda: {"x": _rand(1, N, D), "mask": ~_keep(), "pad": _padding()},
                                   None, ()),
}


# the MultiheadAttention / TransformerEncoderLayer variants take 2-4 s each (capture of the whole
# module, 10+ graphs): a few by default, the rest with -m slow
SLOW_ATTENTION = ("mha_float_attn_mask_neg_inf", "mha_key_padding_mask_batch2", "mha_attn_and_padding_masks",
                  "transformer_encoder_padding", "transformer_encoder_causal")


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_ATTENTION else c
                                  for c in ATTENTION])
def test_attention_idioms_match_pytorch(case) -> None:
    make, inputs, formats, host_ops = ATTENTION[case]
    ir = check(make().double(), inputs(), formats, host_ops)
    if "bool" in case or "causal" in case or "padding" in case or "neg_inf" in case:
        assert any(n.kind is MKind.MASK for n in ir.nodes), ir.text()  # only the kept scores


@pytest.mark.parametrize("fusion", ["unfused", pytest.param("full", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", ["sdpa_bool_mask", "sdpa_causal"])
def test_masked_attention_at_other_fusions(case, fusion) -> None:
    make, inputs, formats, host_ops = ATTENTION[case]
    check(make().double(), inputs(), formats, host_ops, fusion=fusion)


@pytest.mark.parametrize("fusion", ["unfused", pytest.param("full", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", ["gcn_normalisation", "sparse_softmax"])
def test_sparse_api_at_other_fusions(case, fusion) -> None:
    make, adj, host_ops = SPARSE_API[case]
    check(make().double(), {"adj": adj(), "x": _rand(N, D)}, host_ops=host_ops, fusion=fusion)


def test_boolean_mask_is_fixed_at_trace_time() -> None:
    """A boolean mask compiled in as a constant says so, and the run refuses other values."""
    m = SDPA().double()
    inputs = {**_qkv(), "mask": _keep()}
    ir = trace(m, inputs)
    assert any(n.startswith("mask: a boolean mask") for n in ir.notes)
    cm = compile_model(ir, "partial")
    with pytest.raises(ValueError, match="was fixed when the model was traced"):
        run_model(cm, {"mask": ~_keep()}, simulate=run_graph)


def test_additive_mask_hiding_a_whole_row_without_safe_softmax_is_refused() -> None:
    """MultiheadAttention with need_weights=True uses a plain softmax: PyTorch gives NaN for a
    row that masks every key, so the frontend refuses it in one line."""
    mask = ~_keep()
    mask[1] = True
    with pytest.raises(FrontendError) as exc:
        trace(MHA(True).double().eval(), {"x": _rand(1, N, D), "mask": mask})
    assert "masks every entry of a row" in str(exc.value) and "\n" not in str(exc.value)


def test_attention_dropout_runs_on_the_host() -> None:
    class Dropped(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)

    ir = trace(Dropped(), _qkv())
    [host] = [n for n in ir.nodes if n.kind is MKind.HOST]
    assert "scaled_dot_product_attention" in host.attrs["op"] and "dropout" in host.attrs["reason"]


# ----------------------------------------------------------------------------- torch.sparse
class SparseSum(nn.Module):
    def forward(self, adj, x):
        return torch.sparse.sum(adj, dim=1).to_dense().unsqueeze(-1) * x


class SparseSumAll(nn.Module):
    def forward(self, adj, x):
        return torch.sparse.sum(adj) * x


class SparseSoftmax(nn.Module):
    def forward(self, adj, x):
        return torch.sparse.softmax(adj, dim=1).to_dense() @ x


class SparseSoftmaxDim0(nn.Module):
    def forward(self, adj, x):
        return torch.sparse.softmax(adj, dim=0).to_dense() @ x


class SparseMM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(D, 3)

    def forward(self, adj, x):
        return self.lin(torch.sparse.mm(adj, x))


class ValuesSum(nn.Module):
    def forward(self, adj, x):
        return x * adj.values().sum()


class ValuesScaled(nn.Module):
    def forward(self, adj, x):
        return x * adj.coalesce().values().max()


class CrowDegree(nn.Module):
    def forward(self, adj, x):
        crow = adj.crow_indices()
        return (crow[1:] - crow[:-1]).double().unsqueeze(-1) * x


class ColGather(nn.Module):
    def forward(self, adj, x):
        return x[adj.col_indices()].sum(0)


class IndicesMessagePassing(nn.Module):
    def forward(self, adj, x):
        row, col = adj.coalesce().indices()
        return torch.zeros_like(x).index_add_(0, row, x[col])


class Lambda(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, adj, x):
        return self.fn(adj, x)


def _gcn_norm(adj, x):
    """D^-1/2 A D^-1/2 x with the degrees from torch.sparse.sum."""
    d = torch.sparse.sum(adj, dim=1).to_dense().pow(-0.5).unsqueeze(-1)
    return d * torch.sparse.mm(adj, d * x)


def _rebuilt(adj, x):
    """A new sparse matrix on the input's pattern with transformed values (edge weights)."""
    a = adj.coalesce()
    return torch.sparse.mm(torch.sparse_coo_tensor(a.indices(), a.values() * 2 + 1, a.shape), x)


def _unweighted(adj, x):
    a = adj.coalesce()
    ones = torch.ones(a._nnz(), dtype=torch.float64)
    return torch.sparse_coo_tensor(a.indices(), ones, a.shape) @ x


def _coo():
    return _adj().to_sparse_coo()


def _csr():
    return _adj().to_sparse_csr()


SPARSE_API = {
    "sparse_sum_dim": (SparseSum, _coo, ()),
    "sparse_sum_all": (SparseSumAll, _coo, ()),
    "sparse_softmax": (SparseSoftmax, _coo, ()),
    "sparse_softmax_dim0": (SparseSoftmaxDim0, _coo, ()),
    "sparse_mm_csr": (SparseMM, _csr, ()),
    "sparse_mm_coo": (SparseMM, _coo, ()),
    "values_csr": (ValuesSum, _csr, ()),
    "values_coo": (ValuesScaled, _coo, ()),
    "crow_indices": (CrowDegree, _csr, ()),
    "col_indices": (ColGather, _csr, ()),
    "indices_message_passing": (IndicesMessagePassing, _coo, ()),
    "sparse_addmm": (lambda: Lambda(lambda a, x: torch.sparse.addmm(x, a, x, beta=0.5)), _coo, ()),
    "spmm": (lambda: Lambda(lambda a, x: torch.spmm(a, x)), _csr, ()),
    "nnz": (lambda: Lambda(lambda a, x: x / a._nnz()), _csr, ()),
    "sparse_log_softmax": (lambda: Lambda(lambda a, x: torch.sparse.log_softmax(a, 1).to_dense() @ x), _coo,
                           ("fuseflow.sparse_log_softmax.default",)),
    "sparse_softmax_kept_sparse": (lambda: Lambda(lambda a, x: torch.sparse.softmax(a, 1) @ x), _coo, ()),
    "gcn_normalisation": (lambda: Lambda(_gcn_norm), _coo, ()),
    "mean_by_sparse_sum": (lambda: Lambda(lambda a, x: (a @ x) / torch.sparse.sum(a, 1).to_dense().unsqueeze(-1)),
                           _coo, ()),
    "rebuilt_values": (lambda: Lambda(_rebuilt), _coo, ()),
    "rebuilt_unweighted": (lambda: Lambda(_unweighted), _coo, ()),
    "to_dense_then_matmul": (lambda: Lambda(lambda a, x: a.to_dense() @ x), _csr, ()),
    "transposed_coo": (lambda: Lambda(lambda a, x: a.t() @ x), _coo, ()),
}


@pytest.mark.parametrize("case", list(SPARSE_API))
def test_torch_sparse_api_matches_pytorch(case) -> None:
    make, adj, host_ops = SPARSE_API[case]
    ir = check(make().double(), {"adj": adj(), "x": _rand(N, D)}, host_ops=host_ops)
    assert "adj" in ir.formats  # the sparse input stays sparse


def test_sparse_pattern_is_fixed_at_trace_time() -> None:
    """adj.indices() compiles in adj's pattern: new values on it run, another pattern is refused."""
    adj = _coo()
    ir = trace(IndicesMessagePassing(), {"adj": adj, "x": _rand(N, D)})
    assert any("sparsity pattern (.indices())" in n for n in ir.notes)
    cm = compile_model(ir, "partial")
    dense = adj.to_dense().numpy()
    x2 = _rand(N, D, seed=5)
    out = run_model(cm, {"adj": dense * 3.0, "x": x2.numpy()}, simulate=run_graph).outputs[ir.outputs[0]]
    with torch.no_grad():
        ref = IndicesMessagePassing()(torch.from_numpy(dense * 3.0).to_sparse_coo(), x2).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)
    other = dense.copy()
    other[0, 5] = other[5, 0] = 0.0 if other[0, 5] else 1.0
    with pytest.raises(ValueError, match="its sparsity pattern was fixed when the model was traced"):
        run_model(cm, {"adj": other}, simulate=run_graph)


class Branching(nn.Module):
    """The sparse API before data-dependent control flow (captured with graph breaks)."""

    def forward(self, adj, x):
        h = adj.values().sum() * x + torch.sparse.softmax(adj, 1).to_dense() @ x
        if h.sum() > 0:
            return torch.sparse.mm(adj, h) + x[adj.indices()[0]][: x.shape[0]]
        return h


def test_torch_sparse_api_with_graph_breaks_matches_pytorch() -> None:
    ir = check(Branching(), {"adj": _coo(), "x": _rand(N, D).abs()}, host_ops=("aten.gt.Scalar",
                                                                             "branch on a tensor's value"))
    assert ir.capture.startswith("torch.compile graph breaks")


def test_sparse_accessor_of_a_dense_input_is_refused_in_one_line() -> None:
    with pytest.raises(FrontendError) as exc:
        trace(ValuesSum(), {"adj": _adj(), "x": _rand(N, D)})
    msg = str(exc.value)
    assert "values" in msg and "\n" not in msg


# ----------------------------------------------------------------------------- around sparse products
class Activation(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(D, D)
        self.fn = fn

    def forward(self, adj, x):
        return self.fn(self.lin(adj @ x))


class MaskedScores(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, s, mask):
        if self.how == "masked_fill":
            s = s.masked_fill(~mask, float("-inf"))
        else:
            s = torch.where(mask, s, float("-inf"))
        return torch.softmax(s, dim=-1)


class WhereZero(nn.Module):
    def forward(self, x, mask):
        return torch.where(mask, x, torch.zeros_like(x)) + 1.0


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(D, D)
        self.norm = nn.LayerNorm(D)
        self.drop = nn.Dropout(0.3)

    def forward(self, adj, x):
        return self.norm(x + self.drop(torch.relu(self.lin(adj @ x))))


class MeanAggregation(nn.Module):
    def forward(self, adj, x):
        deg = adj.sum(dim=1, keepdim=True)
        return (adj @ x) / deg


class Transposed(nn.Module):
    def forward(self, adj, x):
        return (adj.t() @ x).transpose(0, 1) @ x


class RowMean(nn.Module):
    def forward(self, adj, x):
        return torch.softmax(adj @ x, dim=-1).mean(dim=0)


AROUND = {
    "relu": (lambda: Activation(F.relu), "adj", ()),
    "gelu": (lambda: Activation(F.gelu), "adj", ()),
    "softmax": (lambda: Activation(lambda h: F.softmax(h, dim=-1)), "adj", ()),
    "sigmoid": (lambda: Activation(torch.sigmoid), "adj", ()),
    "residual_layernorm_dropout": (Residual, "adj", ()),
    "mean_aggregation": (MeanAggregation, "adj", ()),
    "transposes": (Transposed, "adj", ()),
    "softmax_then_mean": (RowMean, "adj", ()),
}


@pytest.mark.parametrize("case", list(AROUND))
def test_ops_around_sparse_products_match_pytorch(case) -> None:
    make, fmt_name, host_ops = AROUND[case]
    check(make().double(), {"adj": _adj(), "x": _rand(N, D)}, {fmt_name: "csr"}, host_ops)


@pytest.mark.parametrize("how", ["masked_fill", "where"])
def test_masked_softmax_matches_pytorch(how) -> None:
    ir = check(MaskedScores(how), {"s": _rand(N, N), "mask": _keep()}, {"mask": "csr"})
    assert any(n.kind is MKind.MASK for n in ir.nodes)


def test_where_with_a_zero_branch_matches_pytorch() -> None:
    check(WhereZero(), {"x": _rand(N, N), "mask": _keep()})


class Fill(nn.Module):
    """The ways attention code fills masked scores before a softmax."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, s, mask):
        if self.how == "true_is_masked":  # nn.MultiheadAttention's convention
            s = s.masked_fill(mask, float("-inf"))
        elif self.how == "eq_zero":  # the Annotated Transformer's mask == 0 on an integer mask
            s = s.masked_fill(mask == 0, float("-inf"))
        elif self.how == "large_negative":
            s = s.masked_fill(~mask, -1e9)
        else:  # where(mask > 0, s, 0) on an integer mask
            return torch.where(mask > 0, s, 0.0).relu()
        return torch.softmax(s, dim=-1)


FILLS = {
    "true_is_masked": lambda: ~_keep(),
    "eq_zero": lambda: _keep().long(),
    "large_negative": _keep,
    "where_int_condition": lambda: _keep().long(),
}


@pytest.mark.parametrize("how", list(FILLS))
def test_mask_fill_idioms_match_pytorch(how) -> None:
    ir = check(Fill(how), {"s": _rand(N, N), "mask": FILLS[how]()})
    assert any(n.kind is MKind.MASK for n in ir.nodes) == (how in ("true_is_masked", "eq_zero"))


def test_neg_inf_fill_with_a_computed_condition_is_refused_in_one_line() -> None:
    with pytest.raises(FrontendError) as exc:
        trace(Fill("eq_zero"), {"s": _rand(N, N), "mask": _keep().double()})
    msg = str(exc.value)
    assert "masked_fill with a -inf fill and a condition computed by the model" in msg and "\n" not in msg


# ----------------------------------------------------------------------------- sparse weight hint
class Pruned(nn.Module):
    def __init__(self, density: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(8, 8)
        with torch.no_grad():
            keep = torch.rand(8, 8, generator=torch.Generator().manual_seed(3)) < density
            self.fc.weight.mul_(keep)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_sparse_dense_weight_gets_a_formats_hint() -> None:
    m = Pruned(0.3).double()
    x = _rand(4, 8)
    ir = check(m, {"x": x})
    nnz = int((m.fc.weight != 0).sum())
    [hint] = [n for n in ir.notes if n.startswith("hint:")]
    assert "--formats fc.weight=csr" in hint and f"{nnz / 64:.0%} nonzeros" in hint and "\n" not in hint
    assert not [n for n in trace(Pruned(1.0).double(), {"x": x}).notes if n.startswith("hint:")]
    # following the hint: the weight stored sparse, same values
    ir = check(m, {"x": x}, {"fc.weight": "csr"})
    assert ir.formats["fc_weight"] == "csr" and not [n for n in ir.notes if n.startswith("hint:")]


USER_MODELS = Path(__file__).parent / "user_models" / "idioms.py"


def test_compile_command_prints_the_formats_hint(capsys) -> None:
    assert main(["compile", "--model", f"{USER_MODELS}:pruned", "--fusion", "partial"]) == 0
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "hint:" in ln]
    assert "fc.weight is a dense weight with" in line and line.endswith("--formats fc.weight=csr")


@pytest.mark.slow
def test_sim_command_runs_masked_attention_on_dataflow(capsys) -> None:
    assert main(["sim", "--model", f"{USER_MODELS}:masked_attention", "--fusion", "partial"]) == 0
    out = capsys.readouterr().out
    assert "host steps: none (fully on dataflow)" in out and "PASS" in out
