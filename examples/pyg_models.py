"""PyTorch Geometric models on KarateClub for ``--model examples/pyg_models.py:NAME``.

Each factory returns ``(module, inputs)``: a 2-layer model and its inputs ``x`` (the karate
features of :func:`fuseflow.models.datasets.karate`) and ``edge_index`` (both directions of every
edge, as PyG stores an undirected graph).  The frontend compiles the aggregation of each layer on
dataflow (docs/models.md, "Graph layers")::

    fuseflow-hw sim --model examples/pyg_models.py:gcn --fusion partial --explain
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv

from fuseflow.models.datasets import karate


class TwoLayers(torch.nn.Module):
    def __init__(self, conv1: torch.nn.Module, conv2: torch.nn.Module) -> None:
        super().__init__()
        self.conv1 = conv1
        self.conv2 = conv2

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)


def _karate_inputs(features: int = 8) -> dict[str, torch.Tensor]:
    ds = karate(features=features, seed=1)
    a = ds.adjacency.tocoo()
    edge_index = torch.from_numpy(np.stack([a.col, a.row]).astype(np.int64))
    return {"x": torch.from_numpy(ds.features.copy()), "edge_index": edge_index}


def _model(conv1, conv2):
    torch.manual_seed(0)
    return TwoLayers(conv1, conv2).double().eval(), _karate_inputs()


def gcn():
    return _model(GCNConv(8, 16), GCNConv(16, 4))


def sage():
    return _model(SAGEConv(8, 16), SAGEConv(16, 4))


def gin():
    return _model(GINConv(torch.nn.Linear(8, 16)), GINConv(torch.nn.Linear(16, 4)))


def gat():
    return _model(GATConv(8, 4), GATConv(4, 4))
