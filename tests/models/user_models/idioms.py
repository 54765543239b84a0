"""User models for ``fuseflow-hw compile / sim --model tests/models/user_models/idioms.py:NAME``:
common idioms of issue 35 (a pruned dense weight, masked attention)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Pruned(nn.Module):
    """A linear layer whose dense weight is mostly zeros (the frontend hints --formats)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(8, 8)
        with torch.no_grad():
            self.fc.weight.mul_(torch.rand(8, 8, generator=torch.Generator().manual_seed(3)) < 0.3)

    def forward(self, x):
        return torch.relu(self.fc(x))


def pruned():
    return Pruned().double(), {"x": torch.randn(4, 8, generator=torch.Generator().manual_seed(0),
                                               dtype=torch.float64)}


class MaskedAttention(nn.Module):
    """Self-attention with a boolean keep-mask through F.scaled_dot_product_attention."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.qkv = nn.Linear(4, 12)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def masked_attention():
    g = torch.Generator().manual_seed(1)
    mask = (torch.rand(6, 6, generator=g) < 0.5) | torch.eye(6, dtype=torch.bool)
    return MaskedAttention().double(), {"x": torch.randn(6, 4, generator=g, dtype=torch.float64), "mask": mask}
