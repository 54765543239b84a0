"""Modules written the way users write them, beyond the zoo: each compiled at every fusion
granularity, run in sw_sim and checked against PyTorch (float64)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")

from fuseflow.compiler import LoweringError
from fuseflow.models.frontend import trace
from fuseflow.models.ir import MKind, MNode
from fuseflow.models.plan import HostStep, compile_model, run_model
from fuseflow.ir.tensor import Format
from sw_sim import run_graph

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


class TwoBranchSage(torch.nn.Module):
    """GraphSAGE-style layer with its sum written in the root module over two submodules'
    outputs: the sum reads region ``b``'s output, so it must not run in region ``a``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 4)
        self.b = torch.nn.Linear(8, 4)

    def forward(self, adj, x):
        return torch.relu(self.a(adj @ x) + self.b(x))


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    adj = (torch.rand(6, 6, generator=g) < 0.4).double()
    return adj, torch.rand(6, 8, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("fusion", ["unfused", "partial", "full"])
def test_root_op_over_two_submodules_runs_in_the_later_region(fusion) -> None:
    torch.manual_seed(0)
    m = TwoBranchSage().double().eval()
    adj, x = _inputs()
    ir = trace(m, {"adj": adj, "x": x}, formats={"adj": "csr"})
    computed = {n.name: n.region for n in ir.nodes if n.kind is not MKind.INPUT}
    [add] = [n for n in ir.nodes if n.kind is MKind.ADD and all(a in computed for a in n.args)]
    assert {computed[a] for a in add.args} == {"a", "b"} and add.region == "b"
    res = run_model(compile_model(ir, fusion), simulate=run_graph)
    [out] = res.outputs.values()
    ref = m(adj, x).detach().numpy()
    assert np.max(np.abs(out - ref)) <= 1e-9 * max(1.0, float(np.max(np.abs(ref))))


def test_a_region_reading_a_later_region_is_refused_at_compile_time() -> None:
    """An IR whose op sits in an earlier region than a tensor it reads (as the tracer used to
    place root ops) is refused naming the node and both regions, before anything runs."""
    torch.manual_seed(0)
    m = TwoBranchSage().double().eval()
    adj, x = _inputs()
    ir = trace(m, {"adj": adj, "x": x}, formats={"adj": "csr"})
    computed = {n.name for n in ir.nodes if n.kind is not MKind.INPUT}
    ir.nodes = [MNode(n.name, n.kind, n.args, n.shape, "a", n.source, n.attrs)
                if n.kind is MKind.ADD and all(a in computed for a in n.args) else n for n in ir.nodes]
    with pytest.raises(LoweringError, match=r"in region 'a' reads '[^']+', which region 'b' computes later"):
        compile_model(ir, "partial")


class TransposedAdjacency(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, adj, x):
        return self.lin(adj.t() @ x)


@pytest.mark.parametrize("fusion", ["unfused", "partial", "full"])
def test_transpose_of_a_sparse_adjacency_stays_sparse(fusion) -> None:
    """``adj.t()`` of a CSR adjacency: converted on the host to the CSR of the transpose (said
    in the notes), read sparse by the graph after it — never a dense matrix — and the values
    equal PyTorch's."""
    torch.manual_seed(1)
    m = TransposedAdjacency().double().eval()
    adj, x = _inputs(3)
    adj = adj * torch.arange(1, 7, dtype=torch.float64)[:, None]  # not symmetric
    ir = trace(m, {"adj": adj, "x": x}, formats={"adj": "csr"})
    cm = compile_model(ir, fusion)
    [host] = [s for s in cm.steps if isinstance(s, HostStep)]
    assert host.sparse and "stays sparse" in " ".join(cm.notes)
    readers = [g for g in cm.graphs if host.node.name in g.tensors]
    assert readers and all(Format.COMPRESSED in g.tensors[host.node.name].fmt.levels for g in readers)
    res = run_model(cm, simulate=run_graph)
    t = res.tensors[host.node.name]
    assert Format.COMPRESSED in t.fmt.levels and np.array_equal(t.to_dense(), adj.numpy().T)
    [out] = res.outputs.values()
    ref = m(adj, x).detach().numpy()
    assert np.max(np.abs(out - ref)) <= 1e-9 * max(1.0, float(np.max(np.abs(ref))))
