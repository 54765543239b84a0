"""Module-level fixes of the second fuzz pass, each compared with PyTorch on the dense tensors,
and what ``CompiledModel.explain`` says about a mask taken from the code."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch")
import torch.nn.functional as F
from harness import check
from torch import nn

from fuseflow.models import trace
from fuseflow.models.plan import compile_model, run_model
from sw_sim import run_graph

FUSIONS = ("unfused", "partial", "full")


def _compiled(module, inputs, formats, fusion):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ir = trace(module, inputs, formats)
        return ir, compile_model(ir, fusion)


def _matches(module, inputs, formats, fusion):
    dense = {k: v.to_dense() if v.layout != torch.strided else v for k, v in inputs.items()}
    with torch.no_grad():
        want = module(**dense).numpy()
    ir, cm = _compiled(module, inputs, formats, fusion)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_model(cm, simulate=run_graph)
    why = check(ir.outputs[0], res.outputs[ir.outputs[0]], want)
    assert why is None, why
    return cm


class _MaskedSoftmax(nn.Module):
    def forward(self, x, m):
        return torch.softmax(x.masked_fill(~m, float("-inf")), dim=-1)


class _PlainSoftmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x * 2.0, dim=-1)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_explain_says_a_mask_was_taken_from_the_code(fusion: str) -> None:
    """Issue 32: masking is the semantics only where the code asks for it, and ``--explain``
    says so: the keep-mask, the scores it keeps and the source line."""
    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 0.5]], dtype=torch.float64)
    m = torch.tensor([[True, True, False], [True, False, True]])
    cm = _matches(_MaskedSoftmax(), {"x": x, "m": m}, {"m": "csr"}, fusion)
    lines = [ln for ln in cm.explain().splitlines() if "mask taken from the code" in ln]
    assert len(lines) == 1, cm.explain()
    assert "keeps the scores x at the entries of m" in lines[0]
    assert 'masked_fill(~m, float("-inf"))' in lines[0]


def test_explain_names_no_mask_where_the_code_has_none() -> None:
    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 0.5]], dtype=torch.float64)
    cm = _matches(_PlainSoftmax(), {"x": x.to_sparse_csr()}, None, "partial")
    assert "mask taken from the code" not in cm.explain()


def test_sparse_softmax_is_softmax_over_the_stored_entries() -> None:
    """``torch.sparse.softmax`` normalises over the stored entries (implicit zeros stay 0, they
    are not e^0 terms): the compiled model equals PyTorch's sparse result, never a dense
    softmax (it was refused before the frontend captured it)."""

    class S(nn.Module):
        def forward(self, x):
            return torch.sparse.softmax(x, dim=-1)

    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 0.5]], dtype=torch.float64).to_sparse()
    want = torch.sparse.softmax(x, dim=-1).to_dense().numpy()
    ir, cm = _compiled(S(), {"x": x}, None, "partial")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = run_model(cm, simulate=run_graph).outputs[ir.outputs[0]]
    got = got.to_dense() if hasattr(got, "to_dense") else np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert not np.allclose(want, torch.softmax(x.to_dense(), -1).numpy())  # the dense softmax differs


class _VarOfSoftmaxProduct(nn.Module):
    """Module fuzzer seed 32 (refused in every fusion: ``tensor 't_mean': format [c] has 1
    levels but the tensor has 0 modes``): the planner's retry with row-major intermediates gave
    the 0-d mean a one-level format."""

    def forward(self, x, w0):
        h = F.softmax(x.clamp(min=0.3), dim=0)
        return (w0 @ h).var(correction=0) + 3.0


@pytest.mark.parametrize("fusion", FUSIONS)
def test_full_variance_after_a_row_major_retry(fusion: str) -> None:
    x = torch.tensor([[0.0, 1.5], [-0.7, 0.0]], dtype=torch.float64)
    w = torch.tensor([[0.4, -1.2], [2.0, 0.3]], dtype=torch.float64)
    _matches(_VarOfSoftmaxProduct(), {"x": x, "w0": w}, {"x": "csc"}, fusion)
