"""Users' own PyTorch modules, written the way people write them (not the zoo): MLPs with pruned
weights, GCN / GIN / GraphSAGE variants, masked and multi-head attention, layernorm and
residuals, MTTKRP, batched SpMM, and every construct issue 19 names (sigmoid, silu, dropout in
eval, gelu-tanh, cat, amax, mean / var, ``1 - x``, full reductions, shape arithmetic, in-place
``relu_``, ``x.shape[0]``, ``torch.max(x, -1)[0]``, ``x.sum()``, data-dependent control flow,
ops without a dataflow form, torch sparse COO / CSR / CSC / BSR inputs and parameters).

``CASES`` maps a name to a :class:`Case`: ``make()`` returns ``(module, inputs, formats)``;
``breaks`` is how many graph breaks (host steps for ops without a dataflow form) the case is
written to have: 0 means fully on dataflow.  ``test_user_suite.py`` checks every case against
PyTorch in sw_sim; the CLI test loads modules from this file with ``--model suite.py:NAME``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fuseflow.models.user import reference_float64

N, FIN, HID, OUT = 12, 6, 8, 4  # graph nodes, features, hidden, classes


@dataclass
class Case:
    make: Callable[[], tuple[nn.Module, dict, dict]]
    breaks: int = 0  # graph breaks the module is written to have
    dtype: torch.dtype = torch.float64
    note: str = ""


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def adjacency(seed: int = 0, n: int = N, density: float = 0.3) -> torch.Tensor:
    """A weighted, non-symmetric dense adjacency with self loops (row-normalised)."""
    g = _gen(seed)
    a = (torch.rand(n, n, generator=g) < density).double() * torch.rand(n, n, generator=g, dtype=torch.float64)
    a = a + torch.eye(n, dtype=torch.float64)
    return a / a.sum(-1, keepdim=True)


def feats(seed: int = 1, *shape: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*(shape or (N, FIN)), generator=_gen(seed), dtype=torch.float64).to(dtype)


def prune_(lin: nn.Linear, fraction: float = 0.6) -> nn.Linear:
    with torch.no_grad():
        w = lin.weight
        thresh = w.abs().flatten().kthvalue(max(1, int(fraction * w.numel()))).values
        w[w.abs() <= thresh] = 0.0
    return lin


def _init(seed: int) -> None:
    torch.manual_seed(seed)


# ----------------------------------------------------------------------------- MLPs
class MLP(nn.Module):
    def __init__(self, fin: int = FIN, hid: int = HID, out: int = OUT) -> None:
        super().__init__()
        self.fc1 = nn.Linear(fin, hid)
        self.fc2 = nn.Linear(hid, out)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class PrunedMLP(nn.Module):
    """Magnitude-pruned weights, annotated as compressed (CSC of W = CSR of Wᵀ)."""

    sparse_formats: ClassVar[dict[str, str]] = {"fc1.weight": "csc", "fc2.weight": "csc"}

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = prune_(nn.Linear(FIN, HID))
        self.fc2 = prune_(nn.Linear(HID, OUT))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class SparseWeightMLP(nn.Module):
    """A weight that is a torch sparse CSR parameter (a pruned layer stored sparse)."""

    def __init__(self) -> None:
        super().__init__()
        dense = prune_(nn.Linear(FIN, HID)).weight.detach().double()
        self.w = nn.Parameter(dense.to_sparse_csr(), requires_grad=False)
        self.b = nn.Parameter(torch.randn(HID, dtype=torch.float64))
        self.out = nn.Linear(HID, OUT)

    def forward(self, x):
        return self.out(torch.relu(x @ self.w.t() + self.b))


class BSRWeightMLP(nn.Module):
    """A block-sparse (BSR, 2x2 blocks) weight buffer."""

    def __init__(self) -> None:
        super().__init__()
        w = torch.randn(HID, FIN, dtype=torch.float64)
        w[:4, :2] = 0
        w[4:, 4:] = 0
        self.register_buffer("w", w.to_sparse_bsr((2, 2)))

    def forward(self, x):
        return torch.relu(torch.matmul(x, self.w.t()))


class SigmoidMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FIN, HID), nn.Sigmoid(), nn.Linear(HID, OUT))

    def forward(self, x):
        return torch.sigmoid(self.net(x))


class SiLUMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(FIN, HID)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(HID, OUT)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class GeluTanhMLP(MLP):
    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class DropoutMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(FIN, HID)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(HID, OUT)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


class InplaceReLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(FIN, HID)
        self.act = nn.ReLU(inplace=True)
        self.fc2 = nn.Linear(HID, OUT)

    def forward(self, x):
        h = self.fc1(x)
        h.relu_()
        return self.act(self.fc2(h))


class LeakyTanh(MLP):
    def forward(self, x):
        return torch.tanh(self.fc2(F.leaky_relu(self.fc1(x), 0.1)))


class ClampActs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FIN, HID)

    def forward(self, x):
        h = self.fc(x)
        return F.relu6(h * 4) + F.hardtanh(h) + h.clamp(min=-0.5) + torch.clamp(h, max=0.25) + h.abs()


class ThreeDLinear(nn.Module):
    """A linear layer over a batch of sequences (b, s, d)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FIN, HID)

    def forward(self, x):
        return F.gelu(self.fc(x))


class AddmmBias(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(FIN, HID, dtype=torch.float64))
        self.b = nn.Parameter(torch.randn(HID, dtype=torch.float64))

    def forward(self, x):
        return torch.addmm(self.b, x, self.w)


# ----------------------------------------------------------------------------- graph networks
class GCNLayer(nn.Module):
    def __init__(self, fin: int, fout: int) -> None:
        super().__init__()
        self.lin = nn.Linear(fin, fout, bias=False)
        self.bias = nn.Parameter(torch.zeros(fout))

    def forward(self, adj, x):
        return torch.sparse.mm(adj, self.lin(x)) + self.bias


class GCN2(nn.Module):
    """Two GCN layers: ``Â (X W)`` (the product order PyG uses), ReLU and dropout between."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = GCNLayer(FIN, HID)
        self.conv2 = GCNLayer(HID, OUT)
        self.dropout = nn.Dropout(0.5)

    def forward(self, adj, x):
        h = self.dropout(F.relu(self.conv1(adj, x)))
        return self.conv2(adj, h)


class GCNMatmul(nn.Module):
    """``adj @ x`` with the @ operator (adj a torch sparse tensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin1 = nn.Linear(FIN, HID)
        self.lin2 = nn.Linear(HID, OUT)

    def forward(self, adj, x):
        h = F.relu(self.lin1(adj @ x))
        return self.lin2(adj @ h)


class GCNResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(FIN, FIN)

    def forward(self, adj, x):
        return F.relu(self.lin(adj @ x)) + x


class GIN(nn.Module):
    def __init__(self, eps: float = 0.1) -> None:
        super().__init__()
        self.eps = eps
        self.mlp = nn.Sequential(nn.Linear(FIN, HID), nn.ReLU(), nn.Linear(HID, OUT))

    def forward(self, adj, x):
        return self.mlp((1 + self.eps) * x + adj @ x)


class SAGEMean(nn.Module):
    """GraphSAGE-mean written as two Linears in the root ``forward``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin_l = nn.Linear(FIN, HID)
        self.lin_r = nn.Linear(FIN, HID, bias=False)

    def forward(self, adj, x):
        return F.relu(self.lin_l(adj @ x) + self.lin_r(x))


class SAGEConcat(nn.Module):
    """GraphSAGE with concatenation: ``W [x ‖ Ā x]``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2 * FIN, HID)

    def forward(self, adj, x):
        h = torch.cat([x, torch.sparse.mm(adj, x)], dim=-1)
        return F.relu(self.lin(h))


class TransposedAdj(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(FIN, HID)

    def forward(self, adj, x):
        return self.lin(adj.t() @ x)


class DegreeNorm(nn.Module):
    """Mean aggregation by hand: ``(A x) / deg`` with ``deg = A.sum(-1, keepdim=True)``."""

    def forward(self, adj, x):
        deg = adj.sum(dim=-1, keepdim=True)
        return (adj @ x) / deg


class GATLite(nn.Module):
    """Single-head graph attention: scores on the edges only (the adjacency keep-mask), masked
    softmax, aggregation."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Linear(FIN, HID, bias=False)

    def forward(self, x, edges):
        h = self.w(x)
        e = (h @ h.t()) / math.sqrt(HID)
        e = e.masked_fill(~edges, float("-inf"))
        return torch.softmax(e, dim=-1) @ h


class BatchedSpMM(nn.Module):
    def forward(self, a, x):
        return torch.bmm(a, x)


class MTTKRP(nn.Module):
    """``M[i, r] = Σ_jk T[i, j, k] B[j, r] C[k, r]`` with a sparse COO tensor ``T``."""

    def __init__(self) -> None:
        super().__init__()
        self.b = nn.Parameter(torch.randn(5, 3, dtype=torch.float64))
        self.c = nn.Parameter(torch.randn(4, 3, dtype=torch.float64))

    def forward(self, t):
        return torch.einsum("ijk,jr,kr->ir", t, self.b, self.c)


# ----------------------------------------------------------------------------- attention
class SingleHeadAttention(nn.Module):
    def __init__(self, d: int = HID) -> None:
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return att @ v


class MaskedAttention(nn.Module):
    def __init__(self, d: int = HID) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.d = d

    def forward(self, x, mask):
        q, k, v = self.qkv(x).split(self.d, dim=-1)
        s = torch.matmul(q, k.t()) * (1.0 / math.sqrt(self.d))
        s = torch.where(mask, s, float("-inf"))
        return self.proj(F.softmax(s, dim=-1) @ v)


class MultiHeadAttention(nn.Module):
    """Heads split with view / transpose; qkv from one Linear with ``chunk``."""

    def __init__(self, d: int = HID, heads: int = 2) -> None:
        super().__init__()
        self.h = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, mask):
        s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(s, self.h, d // self.h).transpose(0, 1)
        k = k.view(s, self.h, d // self.h).transpose(0, 1)
        v = v.view(s, self.h, d // self.h).transpose(0, 1)
        scores = q @ k.transpose(1, 2) / math.sqrt(d // self.h)
        scores = scores.masked_fill(~mask, float("-inf"))
        ctx = scores.softmax(dim=-1) @ v
        return self.out(ctx.transpose(0, 1).reshape(s, d))


class EinsumHeads(nn.Module):
    def forward(self, q, k):
        return torch.einsum("hqd,hkd->hqk", q, k).softmax(-1)


class PreLNBlock(nn.Module):
    """LayerNorm + residual + FFN."""

    def __init__(self, d: int = HID) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        return x + self.ff(self.ln(x))


class ManualLayerNorm(nn.Module):
    def __init__(self, d: int = HID, eps: float = 1e-5) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.rand(d) + 0.5)
        self.b = nn.Parameter(torch.randn(d))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        return self.g * (x - mu) * torch.rsqrt(var + self.eps) + self.b


class SqrtLayerNorm(nn.Module):
    def forward(self, x):
        mu = x.mean(dim=-1, keepdim=True)
        xc = x - mu
        return xc / torch.sqrt((xc * xc).mean(dim=-1, keepdim=True) + 1e-6)


class RMSNorm(nn.Module):
    def __init__(self, d: int = HID) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


# ----------------------------------------------------------------------------- reductions, shapes
class SoftmaxDim0(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=0)


class AmaxPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FIN, HID)

    def forward(self, x):
        h = self.fc(x)
        return h.amax(dim=-1) + torch.max(h, -1)[0] + h.max(dim=-1).values - h.amin(-1)


class MeanVar(nn.Module):
    def forward(self, x):
        return x.mean(0) + x.var(0) + x.std(dim=0, keepdim=True).squeeze(0)


class GatedUpdate(nn.Module):
    """GRU-style gate: ``z * h + (1 - z) * x``."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(FIN, FIN)
        self.cand = nn.Linear(FIN, FIN)

    def forward(self, x):
        z = torch.sigmoid(self.gate(x))
        h = torch.tanh(self.cand(x))
        return z * h + (1 - z) * x


class FullSum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FIN, HID)

    def forward(self, x):
        return torch.relu(self.fc(x)).sum()


class ShapeArithmetic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FIN * 2, HID)

    def forward(self, x):
        b = x.shape[0]
        flat = x.reshape(b // 2, -1)  # pairs of rows side by side
        return self.fc(flat).view(b // 2, HID // 2, 2).sum(-1)


class Slicing(nn.Module):
    def forward(self, x):
        return x[:, :4] * 2 + x[:, 1:5] - x[:, 2].unsqueeze(-1)


class BroadcastOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.rand(FIN) + 0.5)

    def forward(self, x, y):
        m = torch.maximum(x, y) - torch.minimum(x, y)
        return m * self.scale.unsqueeze(0) + x.mean(0, keepdim=True) - x / (y.abs() + 1.0)


class Stacked(nn.Module):
    def forward(self, x, y):
        return torch.stack([x, y], dim=0).sum(0) + torch.cat([x, y], dim=0)[:N]


# ----------------------------------------------------------------------------- graph breaks
class DataDependentBranch(MLP):
    """Python control flow on a tensor's value: the branch is taken on the host."""

    def forward(self, x):
        h = self.fc1(x)
        if h.sum() > 0:
            h = torch.relu(h)
        else:
            h = -h
        return self.fc2(h)


class LogSoftmaxHead(nn.Module):
    """``log_softmax`` has no dataflow form (no log unit): a host step."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FIN, OUT)

    def forward(self, x):
        return F.log_softmax(self.fc(x), dim=-1) * 2.0


class CumsumBreak(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(FIN, HID)
        self.fc2 = nn.Linear(HID, OUT)

    def forward(self, x):
        return self.fc2(torch.cumsum(torch.relu(self.fc1(x)), dim=0))


class ComputedMaskFill(nn.Module):
    """A fill with a condition computed by the model (``x > 0``): comparison and fill on the host."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(FIN, HID)

    def forward(self, x):
        h = self.fc(x)
        return h.masked_fill(h > 0.5, 0.5) * 3


def _mask(seed: int, n: int = N) -> torch.Tensor:
    g = _gen(seed)
    m = torch.rand(n, n, generator=g) < 0.35
    return m | torch.eye(n, dtype=torch.bool)  # every row keeps one entry


def _csr(a: torch.Tensor) -> torch.Tensor:
    return a.to_sparse_csr()


def _case(cls, *inputs_fns, formats=None, seed: int = 0, dtype=torch.float64, names=("x",)):
    def make():
        _init(seed)
        m = cls().to(dtype).eval()
        ins = {k: f() for k, f in zip(names, inputs_fns)}
        ins = {k: (v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() and v.layout == torch.strided else v)
               for k, v in ins.items()}
        return m, ins, dict(formats or {})
    return make


GRAPH = ("adj", "x")
CASES: dict[str, Case] = {
    "mlp": Case(_case(MLP, feats, dtype=torch.float32), dtype=torch.float32),
    "pruned_mlp_csc": Case(_case(PrunedMLP, feats)),
    "sparse_csr_weight": Case(_case(SparseWeightMLP, feats)),
    "bsr_weight_buffer": Case(_case(BSRWeightMLP, feats)),
    "sigmoid_mlp": Case(_case(SigmoidMLP, feats, dtype=torch.float32), dtype=torch.float32),
    "silu_mlp": Case(_case(SiLUMLP, feats)),
    "gelu_tanh_mlp": Case(_case(GeluTanhMLP, feats)),
    "dropout_eval": Case(_case(DropoutMLP, feats)),
    "inplace_relu": Case(_case(InplaceReLU, feats)),
    "leaky_tanh": Case(_case(LeakyTanh, feats)),
    "clamp_acts": Case(_case(ClampActs, feats)),
    "linear_3d": Case(_case(ThreeDLinear, lambda: feats(2, 3, 5, FIN))),
    "addmm_bias": Case(_case(AddmmBias, feats)),
    "gcn2_sparse_mm_csr": Case(_case(GCN2, lambda: _csr(adjacency()), feats, names=GRAPH)),
    "gcn_matmul_coo": Case(_case(GCNMatmul, lambda: adjacency(1).to_sparse_coo(), feats, names=GRAPH)),
    "gcn_matmul_csc": Case(_case(GCNMatmul, lambda: adjacency(2).to_sparse_csc(), feats, names=GRAPH)),
    "gcn_dense_annotated": Case(_case(GCNMatmul, lambda: adjacency(3), feats, names=GRAPH,
                                      formats={"adj": "csr"})),
    "gcn_dcsr_annotated": Case(_case(GCNMatmul, lambda: adjacency(4), feats, names=GRAPH,
                                     formats={"adj": "dcsr"})),
    "gcn_residual": Case(_case(GCNResidual, lambda: _csr(adjacency(5)), feats, names=GRAPH)),
    "gin": Case(_case(GIN, lambda: _csr(adjacency(6)), feats, names=GRAPH)),
    "sage_mean_root_sum": Case(_case(SAGEMean, lambda: _csr(adjacency(7)), feats, names=GRAPH)),
    "sage_concat": Case(_case(SAGEConcat, lambda: _csr(adjacency(8)), feats, names=GRAPH)),
    "transposed_adj": Case(_case(TransposedAdj, lambda: _csr(adjacency(9)), feats, names=GRAPH)),
    "degree_norm": Case(_case(DegreeNorm, lambda: _csr(adjacency(10) * 3), feats, names=GRAPH)),
    "degree_norm_csc": Case(_case(DegreeNorm, lambda: adjacency(30) * 3, feats, names=GRAPH,
                                  formats={"adj": "csc"})),  # converted to CSR on the host
    "gat_lite": Case(_case(GATLite, feats, lambda: _mask(11), names=("x", "edges"),
                           formats={"edges": "csr"})),
    "batched_spmm": Case(_case(BatchedSpMM, lambda: feats(12, 3, N, N) * (feats(13, 3, N, N) > 0.8),
                               lambda: feats(14, 3, N, FIN), names=("a", "x"), formats={"a": "dcc"})),
    "mttkrp_coo": Case(_case(MTTKRP, lambda: (feats(15, 6, 5, 4) * (feats(16, 6, 5, 4) > 0.7)).to_sparse_coo(),
                             names=("t",))),
    "single_head_attention": Case(_case(SingleHeadAttention, lambda: feats(17, N, HID))),
    "masked_attention_where": Case(_case(MaskedAttention, lambda: feats(18, N, HID), lambda: _mask(19),
                                         names=("x", "mask"), formats={"mask": "csr"})),
    "multi_head_attention": Case(_case(MultiHeadAttention, lambda: feats(20, N, HID), lambda: _mask(21),
                                       names=("x", "mask"), formats={"mask": "csr"})),
    "einsum_heads": Case(_case(EinsumHeads, lambda: feats(22, 2, N, 4), lambda: feats(23, 2, N, 4),
                               names=("q", "k"))),
    "preln_block": Case(_case(PreLNBlock, lambda: feats(24, N, HID))),
    "manual_layernorm": Case(_case(ManualLayerNorm, lambda: feats(25, N, HID))),
    "sqrt_layernorm": Case(_case(SqrtLayerNorm, lambda: feats(26, N, HID))),
    "rmsnorm": Case(_case(RMSNorm, lambda: feats(27, N, HID))),
    "softmax_dim0": Case(_case(SoftmaxDim0, feats)),
    "amax_pool": Case(_case(AmaxPool, feats)),
    "mean_var": Case(_case(MeanVar, feats), breaks=1),  # std: sqrt not as a divisor
    "gated_one_minus": Case(_case(GatedUpdate, feats, dtype=torch.float32), dtype=torch.float32),
    "full_sum": Case(_case(FullSum, feats)),
    "shape_arithmetic": Case(_case(ShapeArithmetic, feats)),
    "slicing": Case(_case(Slicing, feats)),
    "broadcast_ops": Case(_case(BroadcastOps, feats, lambda: feats(28), names=("x", "y"))),
    "stack_cat": Case(_case(Stacked, feats, lambda: feats(29), names=("x", "y"))),
    "data_dependent_branch": Case(_case(DataDependentBranch, feats), breaks=2),  # the comparison + the guard
    "log_softmax_head": Case(_case(LogSoftmaxHead, feats), breaks=1),
    "cumsum_break": Case(_case(CumsumBreak, feats), breaks=1),
    "computed_mask_fill": Case(_case(ComputedMaskFill, feats), breaks=2),  # x > 0.5, masked_fill
}


def reference(module: nn.Module, inputs: dict) -> np.ndarray:
    """PyTorch's result in float64 with every sparse input made dense (torch has no sparse
    kernels for several of these ops; the model's meaning does not depend on the layout)."""
    return reference_float64(module, inputs)

INPUT_MAKERS = {"adjacency": adjacency, "feats": feats, "mask": _mask}
__all__ = ["CASES", "Case", "np"]


def gcn_factory():
    """A factory for ``--model suite.py:gcn_factory``: (module, inputs, formats), the adjacency
    a torch sparse CSR tensor."""
    return CASES["gcn2_sparse_mm_csr"].make()
