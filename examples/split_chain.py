"""A model whose product chains are split by element-wise ops, for ``--assoc``
(docs/schedules.md, "Association order")::

    fuseflow-hw sim --model examples/split_chain.py:bottleneck --fusion partial --assoc auto --explain

``bottleneck`` projects wide node features through two linear layers without an activation
between them, then aggregates them over a graph: ``Â·((X·W1ᵀ + b1)·W2ᵀ + b2)``.  The bias ``b1``
splits the chain ``X·W1ᵀ·W2ᵀ``; it commutes with the next product, so ``--assoc`` may compute
``X·(W1ᵀ·W2ᵀ) + b1·W2ᵀ``: the two weights multiplied first, the bias as the vector ``b1·W2ᵀ``.
"""

from __future__ import annotations

import numpy as np
import torch

from fuseflow.models.datasets import load_dataset
from fuseflow.models.zoo import gcn_normalize, to_torch_csr


class Bottleneck(torch.nn.Module):
    def __init__(self, features: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.down = torch.nn.Linear(features, hidden)
        self.out = torch.nn.Linear(hidden, classes)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return adj @ self.out(self.down(x))


def bottleneck(nodes: int = 64, features: int = 256, hidden: int = 64, classes: int = 4):
    ds = load_dataset("powerlaw", nodes=nodes, features=features, feature_density=0.3)
    torch.manual_seed(0)
    adj = gcn_normalize(ds.adjacency)
    inputs = {"adj": to_torch_csr(adj), "x": torch.from_numpy(np.asarray(ds.features, dtype=np.float64))}
    return Bottleneck(features, hidden, classes).double().eval(), inputs
