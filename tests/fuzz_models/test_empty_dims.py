"""Empty dimensions (size 0): computed as PyTorch computes them, or refused with one clear
FrontendError naming the op and its line (12.8 % of the fuzzer's modules were refused for them,
and ``torch.cat`` of empty operands crashed with an IndexError).  The frontend folds an op whose
result is empty, or whose tensor operands are all empty, into a constant (an empty tensor has no
values; a sum of nothing is 0); an empty operand beside one with values makes the op a host step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch")
import torch.nn.functional as F
from test_regressions import FUSIONS, Expr, assert_matches_pytorch
from torch import nn

from fuseflow.models import trace
from fuseflow.models.ir import FrontendError
from fuseflow.models.plan import compile_model

EMPTY = {  # x: [6, 0], y: [6, 3]
    "sum_of_nothing_plus_values": lambda x, y: torch.relu(x).sum(-1) + y.sum(-1),
    "full_sum_of_nothing_as_a_scalar": lambda x, y: y * (x.sum() + 1.0),
    "cat_of_empty_operands_only": lambda x, y: torch.cat([x, y[:, :0]], 1),
    "cat_with_an_empty_operand": lambda x, y: torch.cat([x * 2, y], 1) + 1.0,
    "stack_of_empty_operands": lambda x, y: torch.stack([x, x * 2.0], dim=1),
    "softmax_over_an_empty_row": lambda x, y: torch.softmax(x[:1], -1),
    "layer_norm_of_no_rows": lambda x, y: F.layer_norm(y[:0], (3,)),
    "matmul_over_an_empty_index": lambda x, y: x @ x.T + y @ y.T,
    "addmm_with_an_empty_product": lambda x, y: torch.addmm(y.sum(-1), x, x.T),
    "the_empty_input_itself": lambda x, y: x,
}


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("expr", sorted(EMPTY))
def test_empty_dimensions_are_computed(expr: str, fusion: str) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.zeros(6, 0, dtype=torch.float64)
    y = torch.randn(6, 3, generator=g, dtype=torch.float64)
    assert_matches_pytorch(Expr(EMPTY[expr]), {"x": x.to_sparse_csr(), "y": y}, None, fusion)


class MaskedSoftmaxOfAnEmptyProduct(nn.Module):
    def forward(self, x, w, m):
        return F.softmax(torch.where(m, x @ w, float("-inf")), dim=-1)


def test_masked_softmax_of_constant_scores() -> None:
    """Scores from a product over an empty index are the constant 0: the masked softmax is
    uniform over the mask's entries of each row (fuzzer seed 208)."""
    m = torch.tensor([[True, False, True], [False, True, False]])
    ins = {"x": torch.zeros(2, 0, dtype=torch.float64), "w": torch.zeros(0, 3, dtype=torch.float64), "m": m}
    assert_matches_pytorch(MaskedSoftmaxOfAnEmptyProduct(), ins, {"m": "csr"}, "partial")


def test_an_empty_operand_beside_values_is_an_announced_host_step() -> None:
    x, y = torch.zeros(6, 0, dtype=torch.float64), torch.ones(6, 3, dtype=torch.float64)
    ir = trace(Expr(EMPTY["addmm_with_an_empty_product"]), {"x": x, "y": y})
    cm = compile_model(ir, "partial")
    assert len(cm.breaks) == 1 and "empty dimension (size 0)" in cm.breaks[0].why
    with pytest.raises(Exception, match="addmm.*would run on the host.*empty dimension"):
        compile_model(ir, "partial", strict=True)


def test_max_over_an_empty_dimension_is_refused_like_pytorch() -> None:
    """PyTorch refuses amax over a size-0 dimension; so does the frontend, naming the line."""
    with pytest.raises(FrontendError, match=r"x\.amax\(-1\).*zero-size dimension"):
        trace(Expr(lambda x, y: x.amax(-1)), {"x": torch.zeros(6, 0, dtype=torch.float64),
                                              "y": torch.ones(6, 3, dtype=torch.float64)})
