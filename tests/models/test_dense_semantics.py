"""A sparse tensor means the dense tensor it stores (docs/semantics.md): layernorm, softmax,
mean, var, std, amax / amin and the functions with ``f(0) != 0`` over a sparse input, in every
input format the frontend takes (torch CSR, CSC, COO — coalesced and not —, BSR, and a dense
tensor annotated sparse), equal PyTorch on the dense tensor in every fusion granularity.  The
data has empty rows and columns and negative stored values, so a statistic, a maximum or a
softmax taken over the stored entries only differs from the dense one."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")

from fuseflow.models import compile_model, run_model, trace
from sw_sim import run_graph

pytestmark = pytest.mark.filterwarnings("ignore:Sparse .* tensor support is in beta state")

F = torch.nn.functional
OPS = {
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "layer_norm_affine": None,  # nn.LayerNorm with weight and bias (below)
    "softmax_rows": lambda x: torch.softmax(x, -1),
    "softmax_cols": lambda x: torch.softmax(x, 0),
    "mean": lambda x: x.mean(-1),
    "var": lambda x: x.var(-1),
    "std": lambda x: x.std(0),
    "amax": lambda x: x.amax(-1),
    "amin_cols": lambda x: x.amin(0),
    "max_all": lambda x: x.max(),
    "exp": torch.exp,
    "sigmoid": torch.sigmoid,
    "shift": lambda x: x + 0.5,
    "centred": lambda x: x - x.mean(-1, keepdim=True),
}


class Op(torch.nn.Module):
    def __init__(self, name: str, width: int) -> None:
        super().__init__()
        self.name = name
        self.ln = torch.nn.LayerNorm(width).double()
        with torch.no_grad():
            self.ln.weight.copy_(torch.linspace(0.5, 1.5, width))
            self.ln.bias.copy_(torch.linspace(-0.2, 0.3, width))

    def forward(self, x):
        return self.ln(x) if self.name == "layer_norm_affine" else OPS[self.name](x)


def dense_data(shape=(6, 8), seed: int = 0) -> torch.Tensor:
    """Negative stored values (a maximum over them is below the implicit zeros), about half the
    entries stored, an empty row and an empty column."""
    g = torch.Generator().manual_seed(seed)
    d = -(torch.rand(shape, generator=g, dtype=torch.float64) + 0.1)
    d[torch.rand(shape, generator=g) < 0.5] = 0.0
    d[2] = 0.0
    d[:, 5] = 0.0
    d[0, 0] = 1.5
    return d


def uncoalesced(d: torch.Tensor) -> torch.Tensor:
    """A COO tensor whose stored entries are split in two duplicates each (summed)."""
    c = d.to_sparse().coalesce()
    idx, val = c.indices(), c.values()
    return torch.sparse_coo_tensor(torch.cat([idx, idx], 1), torch.cat([val * 0.25, val * 0.75]),
                                   d.shape)


FORMATS = {
    "csr": lambda d: (d.to_sparse_csr(), None),
    "csc": lambda d: (d.to_sparse_csc(), None),
    "coo": lambda d: (d.to_sparse(), None),
    "coo_uncoalesced": lambda d: (uncoalesced(d), None),
    "bsr": lambda d: (d.to_sparse_bsr((2, 2)), None),
    "dense_as_csr": lambda d: (d, {"x": "csr"}),
}


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("op", list(OPS))
def test_sparse_input_means_its_dense_tensor(op: str, fmt: str) -> None:
    d = dense_data()
    x, formats = FORMATS[fmt](d)
    module = Op(op, d.shape[-1]).eval()
    want = module(d).detach().numpy()
    ir = trace(module, {"x": x}, formats)
    for fusion in ("unfused", "partial", "full"):
        got = run_model(compile_model(ir, fusion=fusion), simulate=run_graph).outputs[ir.outputs[0]]
        assert got.shape == want.shape, (fusion, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=f"{op} of {fmt}, {fusion}")


@pytest.mark.parametrize("op", ["exp", "shift", "softmax_rows", "amax"])
def test_ml_subgraphs_visit_every_element(op: str) -> None:
    """With the elementwise ops and row functions as ML subgraphs instead of compiler
    statements, an input stored DCSR-like (COO: missing rows) is still read whole."""
    d = dense_data(seed=3)
    module = Op(op, d.shape[-1]).eval()
    ir = trace(module, {"x": d.to_sparse()})
    cm = compile_model(ir, fusion="partial", elementwise_in_compiler=False)
    got = run_model(cm, simulate=run_graph).outputs[ir.outputs[0]]
    np.testing.assert_allclose(got, module(d).detach().numpy(), rtol=1e-9, atol=1e-12)
