"""Every model x fusion configuration: sw_sim (float numerics) against PyTorch (float64).

Tolerance: max |sim - torch| <= 1e-6 * max |torch| (sw_sim's float mode computes in Python
float64; softmax / layernorm / gelu use exact math functions in that mode)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the model zoo needs PyTorch (pip install -e '.[torch]')")

from model_checks import assert_model_matches

from fuseflow.compiler import FusionError
from fuseflow.models.datasets import karate
from fuseflow.models.frontend import MKind, trace
from fuseflow.models.plan import CompilerStep, HostStep, MLStep, compile_model, run_model
from fuseflow.models.zoo import make_case
from fuseflow.ir.overflow import NumericOverflowError
from sw_sim import run_graph

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

CASES = {
    "gcn": lambda: make_case("gcn", karate(features=8, seed=1), hidden=4, classes=3, seed=1),
    "graphsage": lambda: make_case("graphsage", karate(features=6, seed=2), hidden=4, classes=3, seed=2),
    "sae": lambda: make_case("sae", sae_in=32, batch=3, seed=3),
    "gpt": lambda: make_case("gpt", seq=16, d=16, heads=2, blocks=2, seed=4),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def traced(request):
    case = CASES[request.param]()
    return case, trace(case.module, case.inputs, case.formats, name=request.param)


@pytest.mark.parametrize("fusion", ["unfused", "partial", "full"])
def test_model_matches_pytorch(traced, fusion: str) -> None:
    case, ir = traced
    cm = compile_model(ir, fusion)
    res = run_model(cm, simulate=run_graph)
    assert_model_matches(cm, res, case.reference())
    assert res.total_cycles > 0 and len(res.cycles) == len(cm.graphs)


def test_fusion_configurations_group_statements(traced) -> None:
    """unfused: one graph per statement; partial / full never use more graphs than unfused
    (full may use more than partial: the compiler cuts a full region where a reduction is read
    under an addition, which need not be at a layer boundary)."""
    _, ir = traced
    cms = {f: compile_model(ir, f) for f in ("unfused", "partial", "full")}
    counts = {f: len(cm.graphs) for f, cm in cms.items()}
    compiled_nodes = sum(n.kind in (MKind.EINSUM, MKind.ADD, MKind.SUB, MKind.MUL, MKind.MASK)
                         for n in ir.nodes)
    host = sum(isinstance(s, HostStep) for s in cms["unfused"].steps)
    assert counts["partial"] <= counts["unfused"] and counts["full"] <= counts["unfused"]
    assert counts["unfused"] >= compiled_nodes - host
    assert not cms["full"].notes and not cms["partial"].notes  # no fallback to a finer fusion


@pytest.mark.parametrize("model", ["gcn", "graphsage", "sae"])
def test_full_fusion_crosses_layers(model: str) -> None:
    """In ``full`` some graph computes statements of two layers (``partial`` never does)."""
    case = CASES[model]()
    ir = trace(case.module, case.inputs, case.formats, name=model)
    region = {n.name: n.region for n in ir.nodes}

    def regions_per_graph(fusion: str) -> list[set[str]]:
        out = []
        for s in compile_model(ir, fusion).steps:
            if isinstance(s, CompilerStep):
                for cg in s.compiled.groups:
                    out.append({region[st.out] for st in cg.group.statements if st.out in region})
        return out

    assert max(len(r) for r in regions_per_graph("full")) >= 2
    assert max(len(r) for r in regions_per_graph("partial")) == 1


def test_gpt_structure_reshape_barriers_and_masked_sddmm() -> None:
    """ML subgraphs path (row functions off): the mask fused with the score einsum (SDDMM), the
    softmax a separate subgraph reading scores that store exactly the mask's entries."""
    case = CASES["gpt"]()
    ir = trace(case.module, case.inputs, case.formats)
    cm = compile_model(ir, "partial", row_functions_in_compiler=False)
    kinds = [type(s) for s in cm.steps]
    assert HostStep in kinds and MLStep in kinds and CompilerStep in kinds
    # the mask fused with the score einsum: one compiler step computes both
    sddmm = [s for s in cm.steps if isinstance(s, CompilerStep)
             and any(n.kind is MKind.MASK for n in s.nodes)]
    assert sddmm and any(n.kind is MKind.EINSUM and len(n.args) == 2 for n in sddmm[0].nodes)
    assert len(sddmm[0].graphs) == 1
    # the scores the softmax reads store exactly the mask's entries per head
    res = run_model(cm, simulate=run_graph)
    softmax = next(s for s in cm.steps if isinstance(s, MLStep) and s.nodes[0].kind is MKind.SOFTMAX)
    assert softmax.input in sddmm[0].outputs
    nnz = res.tensors[softmax.input].nnz
    assert nnz == 2 * int(case.inputs["mask"].sum())


@pytest.mark.parametrize("fusion", ["partial", "full"])
def test_gpt_row_functions_fuse_the_attention_and_the_projections(fusion: str) -> None:
    """Row functions in the compiler (default): no ML subgraph is left; the query / key /
    value projections with their layernorm are one graph, the masked scores, softmax and P·V
    another; PyTorch's values, and at least 2x fewer cycles than unfused."""
    case = CASES["gpt"]()
    ir = trace(case.module, case.inputs, case.formats)
    cm = compile_model(ir, fusion)
    assert not any(isinstance(s, MLStep) for s in cm.steps)
    steps = [s for s in cm.steps if isinstance(s, CompilerStep)]
    qkv = next(s for s in steps if any(n.kind is MKind.LAYERNORM for n in s.nodes))
    assert sum(n.name.endswith("_linear") for n in qkv.nodes) >= 3 and len(qkv.graphs) >= 1
    att = next(s for s in steps if any(n.kind is MKind.SOFTMAX for n in s.nodes))
    assert {MKind.MASK, MKind.SOFTMAX, MKind.EINSUM} <= {n.kind for n in att.nodes}
    assert len(att.graphs) == 1
    res = run_model(cm, simulate=run_graph)
    assert_model_matches(cm, res, case.reference())
    unfused = run_model(compile_model(ir, "unfused"), simulate=run_graph)
    assert 2 * res.total_cycles <= unfused.total_cycles


@pytest.mark.parametrize("fusion", ["unfused", "partial"])
def test_ml_subgraph_path_for_elementwise(fusion: str) -> None:
    """relu as a separate SAMML subgraph (the path used when the Program API lacks it)."""
    case = CASES["gcn"]()
    ir = trace(case.module, case.inputs, case.formats)
    cm = compile_model(ir, fusion, elementwise_in_compiler=False)
    assert any(isinstance(s, MLStep) and s.nodes[0].attrs.get("op") == "relu" for s in cm.steps)
    assert_model_matches(cm, run_model(cm, simulate=run_graph), case.reference())


def test_layernorm_as_einsum_statements() -> None:
    case = make_case("gpt", seq=8, d=8, heads=2, blocks=1, seed=5)
    ir = trace(case.module, case.inputs, case.formats)
    cm = compile_model(ir, "partial", layernorm_in_compiler=True)
    assert not any(isinstance(s, MLStep) and s.nodes[0].kind is MKind.LAYERNORM for s in cm.steps)
    assert_model_matches(cm, run_model(cm, simulate=run_graph), case.reference())


@pytest.mark.parametrize("numerics", ["q16.16", "q12.20", "q8.8"])
def test_model_fixed_point_within_the_derived_bound(traced, numerics: str) -> None:
    """Each format's bound from its resolution and the op chain (fuseflow.models.bounds): the
    output against PyTorch and every materialised tensor against the values it read."""
    case, ir = traced
    cm = compile_model(ir, "partial")
    res = run_model(cm, numerics=numerics, simulate=run_graph, on_overflow="ignore")
    if res.overflows:  # Q8.8 (+-128) is too narrow for some models: then the run raises
        with pytest.raises(NumericOverflowError, match=f"saturated .* into the {numerics} range"):
            run_model(cm, numerics=numerics, simulate=run_graph)
        return
    checks = assert_model_matches(cm, res, case.reference(), numerics)
    assert any(c.bound < 0.1 * np.max(np.abs(c_ref)) for c, c_ref in [(checks[0], case.reference())]) or \
        all(c.worst < 1 for c in checks[1:])  # a check that can fail: a tight bound, or stage checks


@pytest.mark.parametrize("par", [{"i": 2}, {"i": 2, "j": 2}], ids=str)
def test_model_with_parallel_lanes_matches_pytorch(traced, par) -> None:
    """Every model-zoo model with lanes on its row index (nested on the next): PyTorch's values,
    in fewer cycles than one lane; every einsum graph that iterates i is split."""
    case, ir = traced
    cm = compile_model(ir, "partial", par=par)
    res = run_model(cm, simulate=run_graph)
    assert_model_matches(cm, res, case.reference())
    groups = [g for s in cm.steps if isinstance(s, CompilerStep) for g in s.compiled.groups]
    assert all(g.parallel for g in groups if "i" in g.graph.indices)
    assert res.total_cycles < run_model(compile_model(ir, "partial"), simulate=run_graph).total_cycles


def test_model_par_on_an_index_no_graph_iterates(traced) -> None:
    _, ir = traced
    with pytest.raises(FusionError, match="no graph iterates index 'zz'"):
        compile_model(ir, "partial", par={"zz": 2})
