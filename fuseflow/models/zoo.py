"""The model zoo: the four model classes of the FuseFlow evaluation as PyTorch modules.

* :class:`GCN` — 2 layers, ``relu(Â·X·W1 + b1)`` then ``Â·H·W2 + b2`` (Kipf & Welling; the
  paper's Adj → Lin mm → Lin bias → ReLU order).
* :class:`GraphSAGE` — 2 layers, mean aggregation: ``relu(lin_nbr(Ā·X) + lin_self(X))``.
* :class:`SparseAutoencoder` — 3 linear layers (encoder, bottleneck, decoder) whose weights are
  50 % magnitude-pruned; the pruned weights are annotated ``csc`` (compressed ``Wᵀ`` rows).
* :class:`GPTBigBird` — GPT-3-style pre-LN decoder blocks whose attention is BigBird
  block-sparse (random + window + global blocks), given as a keep-mask input annotated ``csr``.

Every module runs in plain PyTorch (``model(**inputs)``) and is traced by
:func:`fuseflow.models.frontend.trace`.  :func:`make_case` builds a model with seeded weights
and its inputs for a dataset.  This module imports torch; the rest of the toolkit does not.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from .datasets import (
    GraphDataset,
    bigbird_mask,
    digits,
    gcn_normalize,
    load_dataset,
    mean_normalize,
)

__all__ = [
    "GCN",
    "MODELS",
    "SAE_DATASETS",
    "GPTBigBird",
    "GraphSAGE",
    "ModelCase",
    "SparseAutoencoder",
    "bigbird_mask",
    "make_case",
    "prune_magnitude",
    "to_torch_csr",
]

MODELS = ("gcn", "graphsage", "sae", "gpt")


def to_torch_csr(a) -> torch.Tensor:
    """A ``scipy.sparse`` (or dense numpy) matrix as a float64 torch sparse CSR tensor, without
    a dense copy of a sparse one (the frontend reads its layout as the ``csr`` annotation)."""
    with warnings.catch_warnings():  # torch's notice that its CSR support is in beta, on every call
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        if not sp.issparse(a):
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to_sparse_csr()
        m = sp.csr_array(a, dtype=np.float64)
        m.sort_indices()
        # built from a canonical scipy CSR (sorted, in range): nothing for torch to check
        return torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int64)),
                                       torch.from_numpy(m.indices.astype(np.int64)),
                                       torch.from_numpy(m.data.copy()), size=m.shape, dtype=torch.float64,
                                       check_invariants=False)


class GCNLayer(nn.Module):
    def __init__(self, fin: int, fout: int, relu: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(fin, fout)
        self.relu = relu

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(torch.sparse.mm(adj, x))
        return torch.relu(h) if self.relu else h


class SAGELayer(nn.Module):
    def __init__(self, fin: int, fout: int, relu: bool) -> None:
        super().__init__()
        self.lin_nbr = nn.Linear(fin, fout)
        self.lin_self = nn.Linear(fin, fout)
        self.relu = relu

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        h = self.lin_nbr(torch.sparse.mm(adj, x)) + self.lin_self(x)
        return torch.relu(h) if self.relu else h


class _TwoGraphLayers(nn.Module):
    """``layer2(adj, layer1(adj, x))``: ``layer1`` ``fin → hidden`` with ReLU, ``layer2``
    ``hidden → fout`` without, both of the subclass's ``layer`` type."""

    layer: ClassVar[type[nn.Module]]

    def __init__(self, fin: int, hidden: int, fout: int) -> None:
        super().__init__()
        self.layer1 = self.layer(fin, hidden, relu=True)
        self.layer2 = self.layer(hidden, fout, relu=False)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.layer2(adj, self.layer1(adj, x))


class GCN(_TwoGraphLayers):
    """Two graph-convolution layers; ``adj`` is the normalised adjacency (sparse CSR)."""

    layer = GCNLayer


class GraphSAGE(_TwoGraphLayers):
    """Two GraphSAGE layers with mean aggregation; ``adj`` is ``D^-1 A`` (sparse CSR)."""

    layer = SAGELayer


def prune_magnitude(lin: nn.Linear, fraction: float) -> None:
    """Zero the ``fraction`` smallest-magnitude weights of ``lin`` (in place)."""
    with torch.no_grad():
        w = lin.weight
        k = round(fraction * w.numel())
        if k:
            thresh = w.abs().flatten().kthvalue(k).values
            w[w.abs() <= thresh] = 0.0


class SparseAutoencoder(nn.Module):
    """3 layers ``fin → hidden → code → fin`` with ReLU between, 50 % magnitude-pruned weights."""

    def __init__(self, fin: int, hidden: int, code: int, sparsity: float = 0.5) -> None:
        super().__init__()
        self.layer1 = nn.Linear(fin, hidden)
        self.layer2 = nn.Linear(hidden, code)
        self.layer3 = nn.Linear(code, fin)
        for lin in (self.layer1, self.layer2, self.layer3):
            prune_magnitude(lin, sparsity)

    # compressed, stored transposed (CSC of W = CSR of Wᵀ): the order x·Wᵀ reads the weight
    sparse_formats: ClassVar[dict[str, str]] = {"layer1.weight": "csc", "layer2.weight": "csc",
                                                 "layer3.weight": "csc"}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.layer1(x))
        h = torch.relu(self.layer2(h))
        return self.layer3(h)


class BigBirdAttention(nn.Module):
    def __init__(self, seq: int, d: int, heads: int) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"hidden size {d} is not a multiple of the number of heads {heads}")
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.out = nn.Linear(d, d)
        self.seq = seq
        self.heads = heads
        self.dh = d // heads
        self.scale = 1.0 / math.sqrt(self.dh)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        s, h, dh = self.seq, self.heads, self.dh
        q = self.q(x).reshape(s, h, dh).transpose(0, 1)
        k = self.k(x).reshape(s, h, dh).transpose(0, 1)
        v = self.v(x).reshape(s, h, dh).transpose(0, 1)
        scores = torch.matmul(q, k.transpose(1, 2)) * self.scale
        scores = scores.masked_fill(~mask, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(p, v).transpose(0, 1).reshape(s, h * dh)
        return self.out(ctx)


class DecoderBlock(nn.Module):
    def __init__(self, seq: int, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = BigBirdAttention(seq, d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.ffn1 = nn.Linear(d, ffn)
        self.ffn2 = nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask)
        return x + self.ffn2(F.gelu(self.ffn1(self.ln2(x))))


class GPTBigBird(nn.Module):
    """``blocks`` GPT-3-style pre-LN decoder blocks (LN → BigBird attention → residual → LN →
    FFN with GELU → residual) over one sequence ``x`` of shape (seq, d); ``mask`` is the BigBird
    keep-mask (bool, seq x seq; ``default_mask`` holds the seeded one)."""

    def __init__(self, seq: int = 64, d: int = 64, heads: int = 2, ffn: int = 128, blocks: int = 2,
                 block: int = 8, seed: int = 0) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(DecoderBlock(seq, d, heads, ffn) for _ in range(blocks))
        self.default_mask = torch.from_numpy(bigbird_mask(seq, block, seed=seed))

    sparse_formats: ClassVar[dict[str, str]] = {"mask": "csr"}

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for blk in self.blocks:
            x = blk(x, mask)
        return x


@dataclass
class ModelCase:
    """A model with seeded float64 weights, its inputs and sparse-format annotations (graph
    models: the adjacency is a torch CSR tensor and the features are annotated ``csr``, the
    lossless input sparsity of the paper's Table 2)."""

    name: str
    module: nn.Module
    inputs: dict[str, torch.Tensor]
    formats: dict[str, str] = field(default_factory=dict)
    description: str = ""

    def reference(self) -> np.ndarray:
        with torch.no_grad():
            return self.module(**self.inputs).detach().numpy()


def _graph_inputs(ds: GraphDataset, model: str) -> dict[str, torch.Tensor]:
    adj = gcn_normalize(ds.adjacency) if model == "gcn" else mean_normalize(ds.adjacency)
    return {"adj": to_torch_csr(adj), "x": torch.from_numpy(ds.features.copy())}


SAE_DATASETS = ("random", "digits")


def _sae_input(dataset: str | None, batch: int, sae_in: int, seed: int) -> tuple[np.ndarray, str]:
    if dataset in (None, "random"):
        rng = np.random.default_rng(seed)
        x = rng.random((batch, sae_in))
        x[x < 0.5] = 0.0  # half-dark synthetic images
        return x, f"{batch} seeded random half-dark images"
    if dataset == "digits":
        if sae_in != 64:
            raise ValueError(f"sae on digits: the images have 64 pixels, not {sae_in}")
        return digits(batch), f"{batch} scikit-learn handwritten digits (8x8)"
    raise ValueError(f"sae dataset {dataset!r}: use one of {', '.join(SAE_DATASETS)}")


def make_case(model: str, dataset: str | GraphDataset | None = None, *, hidden: int = 16,
              classes: int = 4, seed: int = 0, seq: int = 64, d: int = 64, heads: int = 2,
              blocks: int = 2, sae_in: int = 64, batch: int = 5) -> ModelCase:
    """``model`` in :data:`MODELS`.  Graph models use ``dataset`` (a name for
    :func:`~fuseflow.models.datasets.load_dataset` or a :class:`GraphDataset`; default
    ``karate``); the SAE takes a batch of ``batch`` images of ``sae_in`` pixels (``dataset``
    ``random``, the default: seeded half-dark ones; ``digits``: scikit-learn's handwritten
    digits, 64 pixels); GPT takes one seeded random sequence (no dataset)."""
    torch.manual_seed(seed)
    if model in ("gcn", "graphsage"):
        dataset = "karate" if dataset is None else dataset
        ds = dataset if isinstance(dataset, GraphDataset) else load_dataset(dataset, seed=seed)
        cls = GCN if model == "gcn" else GraphSAGE
        m = cls(ds.num_features, hidden, classes).double().eval()
        return ModelCase(model, m, _graph_inputs(ds, model), {"x": "csr"},
                         f"{model} on {ds.describe()}; hidden {hidden}, {classes} classes")
    if model == "sae":
        x, what = _sae_input(dataset if isinstance(dataset, str | None) else "graph", batch, sae_in, seed)
        m = SparseAutoencoder(sae_in, sae_in // 2, sae_in // 4).double().eval()
        return ModelCase(model, m, {"x": torch.from_numpy(x)}, dict(m.sparse_formats),
                         f"sae {sae_in}->{sae_in // 2}->{sae_in // 4}->{sae_in} on {what}, "
                         "50% pruned weights")
    if model == "gpt" and dataset is not None:
        raise ValueError(f"gpt takes a seeded random sequence, not dataset {dataset!r}")
    if model == "gpt":
        m = GPTBigBird(seq, d, heads, 2 * d, blocks, seed=seed).double().eval()
        x = torch.from_numpy(np.random.default_rng(seed).standard_normal((seq, d)))
        dens = float(m.default_mask.double().mean())
        return ModelCase(model, m, {"x": x, "mask": m.default_mask}, dict(m.sparse_formats),
                         f"gpt {blocks} blocks, seq {seq}, hidden {d}, {heads} heads, BigBird "
                         f"mask {100 * (1 - dens):.1f}% sparse")
    raise ValueError(f"unknown model {model!r}: use one of {', '.join(MODELS)}")
