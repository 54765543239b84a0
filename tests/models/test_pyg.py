"""PyTorch Geometric layers and the edge_index message-passing idiom through the normal
frontend, against PyG / PyTorch themselves (the independent reference).

``edge_index`` (an integer input) is a constant of the trace: gathers by it and scatters into
it become products with sparse matrices made from its values, so the aggregation runs in
dataflow (an SpMM over the adjacency for sum / mean aggregation of gathered node features;
GAT's scores, softmax over incoming edges and weighted sum through per-edge selection
matrices).  Every check asserts that no host step computes an aggregation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")
pyg_nn = pytest.importorskip("torch_geometric.nn", reason="needs PyTorch Geometric (pip install -e '.[torch]')")

from model_checks import assert_model_matches

from fuseflow.models.datasets import cora_like, karate
from fuseflow.models.frontend import FrontendError, MKind, trace
from fuseflow.models.plan import CompilerStep, HostOpStep, HostStep, compile_model, run_model
from sw_sim import run_graph

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta state.*")

FUSIONS = ("unfused", "partial", "full")


def edge_index_of(ds) -> torch.Tensor:
    """Both directions of every undirected edge of a dataset's adjacency, as PyG stores them."""
    a = ds.adjacency.tocoo()
    return torch.from_numpy(np.stack([a.col, a.row]).astype(np.int64))


class TwoLayers(torch.nn.Module):
    """``conv2(relu(conv1(x, edge_index)), edge_index)``."""

    def __init__(self, conv1, conv2) -> None:
        super().__init__()
        self.conv1 = conv1
        self.conv2 = conv2

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)


def layers(kind: str, fin: int, hidden: int, fout: int, **kw):
    if kind == "gcn":
        return pyg_nn.GCNConv(fin, hidden), pyg_nn.GCNConv(hidden, fout)
    if kind == "sage":
        return pyg_nn.SAGEConv(fin, hidden, **kw), pyg_nn.SAGEConv(hidden, fout, **kw)
    if kind == "gin":
        return (pyg_nn.GINConv(torch.nn.Linear(fin, hidden), eps=0.25, train_eps=True),
                pyg_nn.GINConv(torch.nn.Linear(hidden, fout)))
    heads = kw.get("heads", 1)
    return pyg_nn.GATConv(fin, hidden, heads=heads), pyg_nn.GATConv(hidden * heads, fout)


def model_case(kind: str, ds, hidden: int = 4, classes: int = 3, seed: int = 0, **kw):
    torch.manual_seed(seed)
    m = TwoLayers(*layers(kind, ds.num_features, hidden, classes, **kw)).double().eval()
    inputs = {"x": torch.from_numpy(ds.features.copy()), "edge_index": edge_index_of(ds)}
    with torch.no_grad():
        ref = m(**inputs).numpy()
    return m, inputs, ref


def aggregations_in_dataflow(cm, host_ops: tuple[str, ...] = ()) -> None:
    """Every aggregation is a compiled einsum; host steps (if any) are reshapes and the ops
    ``host_ops`` only."""
    agg = [n for s in cm.steps if isinstance(s, CompilerStep) for n in s.nodes if "aggregate" in n.name]
    assert agg and all(n.kind is MKind.EINSUM for n in agg)
    assert all(s.node.attrs.get("op") in host_ops for s in cm.steps if isinstance(s, HostOpStep)), cm.explain()
    assert all(s.node.kind in (MKind.RESHAPE, MKind.EINSUM) for s in cm.steps if isinstance(s, HostStep))


def adjacency_spmm(cm, ir) -> list:
    """The aggregation einsums that read a sparse adjacency made from edge_index."""
    return [n for s in cm.steps if isinstance(s, CompilerStep) for n in s.nodes
            if n.kind is MKind.EINSUM and n.args[0].startswith("_adj") and n.args[0] in ir.formats]


KARATE = karate(features=8, seed=1)
_TRACED: dict = {}


def traced(kind: str, **kw):
    key = (kind, tuple(sorted(kw.items())))
    if key not in _TRACED:
        m, inputs, ref = model_case(kind, KARATE, **kw)
        _TRACED[key] = (trace(m, inputs, name=f"pyg_{kind}"), ref)
    return _TRACED[key]


# GAT's per-edge scores, softmax and products are E-sized tensors: slower to compile and
# simulate (unfused ~7-14 s, full ~50 s on a loaded 2-core machine); partial runs by default
@pytest.mark.parametrize(("kind", "fusion"), [(k, f) for k in ("gcn", "sage", "gin") for f in FUSIONS]
                         + [("gat", "partial")] + [pytest.param("gat", f, marks=pytest.mark.slow)
                                                   for f in ("unfused", "full")])
def test_pyg_layers_on_karate_match_pyg(kind: str, fusion: str) -> None:
    ir, ref = traced(kind)
    assert not any(n.kind is MKind.HOST for n in ir.nodes), ir.text()
    cm = compile_model(ir, fusion)
    res = run_model(cm, simulate=run_graph)
    assert_model_matches(cm, res, ref)
    aggregations_in_dataflow(cm)
    assert not cm.notes  # no fallback to a finer fusion
    if kind != "gat":  # sum / mean of gathered features: one SpMM over the adjacency per layer
        assert len(adjacency_spmm(cm, ir)) == 2
        assert not any(n.kind is MKind.DIV for n in ir.nodes)  # a mean: rows of A scaled
    if fusion == "unfused":
        assert len(cm.graphs) > len(compile_model(ir, "partial").graphs)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin", pytest.param("gat", marks=pytest.mark.slow)])
def test_pyg_layers_fixed_point_within_the_derived_bound(kind: str) -> None:
    ir, ref = traced(kind)
    cm = compile_model(ir, "partial")
    res = run_model(cm, numerics="q16.16", simulate=run_graph)
    assert_model_matches(cm, res, ref, "q16.16")


def test_gcn_normalisation_folds_into_the_adjacency() -> None:
    """GCNConv's self loops and D^-1/2 (A + I) D^-1/2 are computed from edge_index at trace
    time: the adjacency constant is that matrix."""
    ir, _ = traced("gcn")
    adj = [n for n in ir.nodes if n.name.startswith("_adj")]
    assert len(adj) == 1  # both layers read the same constant
    a = KARATE.adjacency.toarray() + np.eye(KARATE.num_nodes)
    d = a.sum(1) ** -0.5
    np.testing.assert_allclose(ir.data[adj[0].name].toarray(), d[:, None] * a * d[None, :], rtol=1e-12)
    assert any("edge_index: an integer input" in n for n in ir.notes)
    assert np.array_equal(ir.fixed_inputs["edge_index"], edge_index_of(KARATE).numpy())
    assert "edge_index" not in ir.data


@pytest.mark.slow
def test_gat_multi_head_concat_matches_pyg() -> None:
    """heads=2 with concatenation: the heads' reshapes are host data movement, the attention and
    its aggregation are on dataflow."""
    ir, ref = traced("gat", heads=2)
    cm = compile_model(ir, "partial")
    assert_model_matches(cm, run_model(cm, simulate=run_graph), ref)
    aggregations_in_dataflow(cm)


def test_sage_root_weight_off_and_gin_eps_match() -> None:
    torch.manual_seed(3)
    m = TwoLayers(pyg_nn.SAGEConv(8, 4, root_weight=False, normalize=False),
                  pyg_nn.GINConv(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(),
                                                     torch.nn.Linear(4, 2)), eps=-0.5)).double().eval()
    inputs = {"x": torch.from_numpy(KARATE.features.copy()), "edge_index": edge_index_of(KARATE)}
    ir = trace(m, inputs)
    cm = compile_model(ir, "full")
    assert_model_matches(cm, run_model(cm, simulate=run_graph), m(**inputs).detach().numpy())
    aggregations_in_dataflow(cm)


def test_gcn_with_an_edge_weight_input_matches_pyg() -> None:
    """GCNConv(x, edge_index, edge_weight): the weights are on dataflow (degrees, rsqrt,
    normalised messages, aggregation); PyG's guard for isolated nodes (deg^-1/2 == inf -> 0)
    is a comparison, which has no dataflow form: two host steps, neither an aggregation."""
    class Weighted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = pyg_nn.GCNConv(8, 3)

        def forward(self, x, edge_index, w):
            return self.conv(x, edge_index, w)

    torch.manual_seed(9)
    m = Weighted().double().eval()
    ei = edge_index_of(KARATE)
    inputs = {"x": torch.from_numpy(KARATE.features.copy()), "edge_index": ei,
              "w": torch.rand(ei.shape[1], dtype=torch.float64) + 0.5}
    ir = trace(m, inputs)
    cm = compile_model(ir, "partial")
    assert_model_matches(cm, run_model(cm, simulate=run_graph), m(**inputs).detach().numpy())
    aggregations_in_dataflow(cm, ("aten.eq.Scalar", "aten.where.self"))


# ----------------------------------------------------------------------------- hand-written idioms
N, F = 12, 5
EDGES = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 3, 3, 5, 0],
                      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 7, 2, 1]])  # node 0 -> 1 twice


class IndexAdd(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(F, 3)

    def forward(self, x, edge_index):
        src, dst = edge_index
        out = torch.zeros_like(x)
        out.index_add_(0, dst, x.index_select(0, src))
        return self.lin(out + x)


class ScatterAddWeighted(torch.nn.Module):
    """Per-edge weights computed from edge_index (constants) and given as a float input (on
    dataflow: the gather, the product and the scatter are products with selection matrices)."""

    def forward(self, x, edge_index, w):
        src, dst = edge_index[0], edge_index[1]
        deg = torch.zeros(x.shape[0], dtype=x.dtype).scatter_add(0, dst, torch.ones(dst.shape[0], dtype=x.dtype))
        msg = x[src] / deg[dst].view(-1, 1)
        out = torch.zeros_like(x).scatter_add(0, dst.view(-1, 1).expand(-1, x.shape[1]), msg)
        return out + torch.zeros_like(x).index_add(0, dst, x[src] * w.view(-1, 1))


class ScatterMean(torch.nn.Module):
    def forward(self, x, edge_index):
        src, dst = edge_index
        idx = dst.view(-1, 1).expand(-1, x.shape[1])
        mean = torch.zeros_like(x).scatter_reduce(0, idx, x[src], reduce="mean", include_self=False)
        return torch.relu(mean) * 2.0 - x


class ComputedDivisor(torch.nn.Module):
    """Messages divided by a per-node value computed on dataflow and gathered by destination."""

    def forward(self, x, edge_index):
        src, dst = edge_index
        d = (x * x).sum(1) + 1.0
        return torch.zeros_like(x).index_add(0, dst, x[src] / d[dst].view(-1, 1))


def _idiom_inputs():
    torch.manual_seed(5)
    return {"x": torch.randn(N, F, dtype=torch.float64), "edge_index": EDGES}


def _traced_matches_pytorch(m, inputs: dict, fusion: str):
    """Trace ``m`` on ``inputs`` with no host op, compile it with ``fusion`` and check sw_sim's
    run against PyTorch's, every aggregation in dataflow; returns ``(ir, compiled model)``."""
    with torch.no_grad():
        ref = m(**inputs).numpy()
    ir = trace(m, inputs)
    assert not any(n.kind is MKind.HOST for n in ir.nodes), ir.text()
    cm = compile_model(ir, fusion)
    assert_model_matches(cm, run_model(cm, simulate=run_graph), ref)
    aggregations_in_dataflow(cm)
    return ir, cm


@pytest.mark.parametrize(("model", "fusion"), [(IndexAdd, f) for f in FUSIONS] + [
    (ScatterAddWeighted, "unfused"), (ScatterAddWeighted, "full"), (ScatterMean, "partial"),
    (ComputedDivisor, "partial")],
    ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_hand_written_message_passing_matches_pytorch(model, fusion: str) -> None:
    torch.manual_seed(6)
    m = model().double().eval()
    inputs = _idiom_inputs()
    if model is ScatterAddWeighted:
        inputs["w"] = torch.rand(EDGES.shape[1], dtype=torch.float64)
    ir, cm = _traced_matches_pytorch(m, inputs, fusion)
    if model is ComputedDivisor:  # the compiler divides only by a dense tensor: a gathered
        # divisor is made dense by a shift, which fuses with nothing (a note says so)
        assert any("compiled unfused, not partial" in n for n in cm.notes)
        return
    if model is not ScatterAddWeighted:
        a = adjacency_spmm(cm, ir)
        assert len(a) == 1
        dense = ir.data[a[0].args[0]].toarray()
        assert dense[1, 0] == (2.0 if model is IndexAdd else 1.0)  # the repeated edge 0 -> 1


class EdgeConvMean(pyg_nn.MessagePassing):
    """A user's own MessagePassing layer: mean of (x_j - x_i) times a per-edge float input."""

    def __init__(self) -> None:
        super().__init__(aggr="mean")
        self.lin = torch.nn.Linear(F, 3)

    def forward(self, x, edge_index, w):
        return self.propagate(edge_index, x=self.lin(x), w=w) + self.lin(x)

    def message(self, x_j, x_i, w):
        return torch.relu(x_j - x_i) * w.view(-1, 1)


@pytest.mark.parametrize("fusion", ["full"])
def test_own_message_passing_subclass_matches_pyg(fusion: str) -> None:
    torch.manual_seed(8)
    m = EdgeConvMean().double().eval()
    inputs = {**_idiom_inputs(), "w": torch.rand(EDGES.shape[1], dtype=torch.float64)}
    ir, _ = _traced_matches_pytorch(m, inputs, fusion)
    # the mean's division by the in-degree is folded into the scatter matrix's rows
    assert not any(n.kind is MKind.DIV for n in ir.nodes)


def test_message_passing_across_a_data_dependent_branch() -> None:
    """torch.compile's graph breaks: edge_index is a constant in every captured graph too."""
    class Branchy(torch.nn.Module):
        def forward(self, x, edge_index):
            src, dst = edge_index
            h = torch.zeros_like(x).index_add(0, dst, x[src])
            if h.sum() > 0:
                return h * 2.0
            return h - 1.0

    inputs = _idiom_inputs()
    inputs["x"] = inputs["x"].abs()
    ir = trace(Branchy(), inputs)
    assert ir.capture.startswith("torch.compile") and "edge_index" in ir.fixed_inputs
    cm = compile_model(ir, "partial")
    assert_model_matches(cm, run_model(cm, simulate=run_graph), Branchy()(**inputs).numpy())
    aggregations_in_dataflow(cm, ("aten.gt.Scalar", "branch on a tensor's value"))  # the guard


def test_max_aggregation_is_refused_naming_it() -> None:
    torch.manual_seed(7)
    m = TwoLayers(pyg_nn.SAGEConv(F, 4, aggr="max"), pyg_nn.SAGEConv(4, 2)).double().eval()
    with pytest.raises(FrontendError, match=r"scatter_reduce\(reduce='amax'\).*max / min aggregation.*refused"):
        trace(m, _idiom_inputs())


def test_gather_by_a_computed_index_is_a_graph_break_naming_it() -> None:
    class Computed(torch.nn.Module):
        def forward(self, x, edge_index):
            idx = (x[:, 0] > 0).long()  # an index made from the input values
            return x.index_select(0, idx) * 2.0

    ir = trace(Computed(), _idiom_inputs())
    host = [n for n in ir.nodes if n.kind is MKind.HOST]
    assert host and any("index" in n.attrs["op"] for n in host)
    with pytest.raises(Exception, match="index"):
        compile_model(ir, "partial", strict=True)


# ----------------------------------------------------------------------------- the Cora-sized graph
CORA = None


def _cora():
    global CORA
    if CORA is None:
        CORA = cora_like(features=16, seed=0)
    return CORA


@pytest.mark.slow
def test_gcn_on_the_cora_sized_graph_matches_pyg() -> None:
    m, inputs, ref = model_case("gcn", _cora(), hidden=4, classes=3)
    ir = trace(m, inputs)
    cm = compile_model(ir, "full")
    assert_model_matches(cm, run_model(cm, simulate=run_graph), ref)
    aggregations_in_dataflow(cm)
    assert len(adjacency_spmm(cm, ir)) == 2


# every layer kind at every fusion on the Cora-sized graph (SAGEConv partial, ~5 s, runs by
# default; the others take up to a few minutes each, GAT full about 25 CPU minutes: its fused
# graphs locate the per-edge scores' densified iteration from the adjacency's nonzeros,
# 2.26 M cycles partial and 29.4 M full, where merging it with a dense scan took an estimated
# 354 M and 2.28 G)
@pytest.mark.parametrize(("kind", "fusion"), [
    (k, f) if (k, f) == ("sage", "partial") else pytest.param(k, f, marks=pytest.mark.slow)
    for k in ("gcn", "sage", "gin", "gat") for f in FUSIONS])
def test_pyg_layers_on_the_cora_sized_graph_match_pyg(kind: str, fusion: str) -> None:
    m, inputs, ref = model_case(kind, _cora(), hidden=4, classes=3)
    ir = trace(m, inputs)
    cm = compile_model(ir, fusion)
    assert_model_matches(cm, run_model(cm, simulate=run_graph), ref)
    aggregations_in_dataflow(cm)
