"""The user-model suite (suite.py): every module traced (torch.export + core ATen, graph breaks
through torch.compile for data-dependent control flow), compiled and run in sw_sim (float
numerics), checked against PyTorch; graph breaks are exactly the ones each module is written
to have, reported with their source lines, refused by ``strict``; no tensor declared sparse is
read densely without being said so."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")

sys.path.insert(0, str(Path(__file__).parent))
from model_checks import assert_model_matches
from suite import CASES, reference

from fuseflow.compiler import LoweringError
from fuseflow.models.frontend import trace
from fuseflow.models.ir import MKind
from fuseflow.models.plan import (
    CompilerStep,
    ConvertStep,
    HostOpStep,
    HostStep,
    MLStep,
    compile_model,
    converted_name,
    run_model,
)
from fuseflow.ir.tensor import Format
from sw_sim import run_graph

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
FULL = ("mlp", "gcn2_sparse_mm_csr", "gin", "sage_concat", "multi_head_attention", "preln_block",
        "manual_layernorm", "mttkrp_coo", "data_dependent_branch", "gat_lite")


@pytest.fixture(scope="module")
def traced():
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            m, ins, fmts = CASES[name].make()
            cache[name] = (m, ins, trace(m, ins, fmts, name=name))
        return cache[name]
    return get


def silent_densifications(cm) -> list[str]:
    """Where a tensor declared sparse (a model input with a sparse format) is read with dense
    levels only without a step that says so (a host graph break lists it in ``sparse_reads``)."""
    ir = cm.ir
    sparse = {t for t, f in ir.formats.items() if f not in ("dense",)}
    names = {t: t for t in sparse}
    for s in cm.steps:
        if isinstance(s, ConvertStep) and s.tensor in sparse:
            names[s.output] = s.tensor
    bad = []
    for s in cm.steps:
        if isinstance(s, CompilerStep | MLStep):
            for g in s.graphs:
                for t, decl in g.tensors.items():
                    if names.get(t) in sparse and all(lv is Format.DENSE for lv in decl.fmt.levels):
                        bad.append(f"{g.name} reads {t} dense")
        elif isinstance(s, HostStep) and s.node.args[0] in sparse and not s.sparse:
            bad.append(f"host {s.node.name} makes {s.node.args[0]} dense")
        elif isinstance(s, HostOpStep):
            bad += [f"{s.node.name} reads {a} dense unsaid" for a in s.node.args
                    if a in sparse and a not in s.sparse_reads]
    return bad


@pytest.mark.parametrize("name", sorted(CASES))
def test_user_module_matches_pytorch(traced, name: str) -> None:
    m, ins, ir = traced(name)
    cm = compile_model(ir, "partial")
    assert len(cm.breaks) == CASES[name].breaks, cm.explain()
    assert not silent_densifications(cm), cm.explain()
    res = run_model(cm, simulate=run_graph)
    ref = reference(m, ins)
    assert_model_matches(cm, res, ref)
    # every computed node maps back to a line of the user's file
    for n in ir.nodes:
        if n.kind is not MKind.INPUT:
            assert "suite.py:" in n.source, (n.name, n.source)
    host = [h for h in res.host if h["kind"] == "graph break"]
    assert len(host) == len(cm.breaks) and all(h["bytes_read"] > 0 < h["bytes_written"] for h in host)


@pytest.mark.parametrize("name", FULL)
def test_user_module_full_fusion(traced, name: str) -> None:
    m, ins, ir = traced(name)
    cm = compile_model(ir, "full")
    assert_model_matches(cm, run_model(cm, simulate=run_graph), reference(m, ins))


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.breaks))
def test_strict_refuses_each_graph_break_in_one_line(traced, name: str) -> None:
    _, _, ir = traced(name)
    with pytest.raises(LoweringError) as exc:
        compile_model(ir, "partial", strict=True)
    msg = str(exc.value)
    assert "\n" not in msg and "strict" in msg and "suite.py:" in msg


def test_fully_dataflow_modules_pass_strict(traced) -> None:
    for name in ("mlp", "gcn2_sparse_mm_csr", "gelu_tanh_mlp", "manual_layernorm", "stack_cat"):
        compile_model(traced(name)[2], "partial", strict=True)


def test_explain_names_ops_lines_and_the_index_legend(traced) -> None:
    _, _, ir = traced("data_dependent_branch")
    text = compile_model(ir, "partial").explain()
    assert "torch.compile graph breaks" in text and "if h.sum() > 0:" in text
    assert "data-dependent control flow" in text and "graph break" in text
    _, _, ir = traced("gin")
    text = compile_model(ir, "full").explain()
    assert "fused:" in text and " is index " in text  # u0 is index k of '...'
    assert "return self.mlp((1 + self.eps) * x + adj @ x)" in text


def test_guard_refuses_inputs_that_take_the_other_branch(traced) -> None:
    m, ins, ir = traced("data_dependent_branch")
    cm = compile_model(ir, "partial")
    taken = bool(m.fc1(ins["x"]).sum() > 0)
    # h.sum() is affine in x: some multiple of x flips its sign
    xs = next(ins["x"] * t for t in (-1.0, -10.0, 10.0, -100.0, 100.0)
              if bool(m.fc1(ins["x"] * t).sum() > 0) != taken)
    flipped = dict(ir.data, x=xs.detach().numpy())
    with pytest.raises(ValueError, match=r"suite.py:\d+: if h.sum\(\) > 0:: these inputs take the other branch"):
        run_model(cm, flipped, simulate=run_graph)


def test_sparse_inputs_keep_their_format_and_conversions_are_said(traced) -> None:
    _, _, ir = traced("gcn_matmul_csc")
    assert ir.formats["adj"] == "csc"
    _, _, ir = traced("gcn_matmul_coo")
    assert ir.formats["adj"] == "coo"
    _, _, ir = traced("bsr_weight_buffer")
    assert ir.formats["w"] == "csr" and any("converted to CSR on the host" in n for n in ir.notes)
    assert hasattr(ir.data["w"], "nnz")  # kept as scipy.sparse, never a dense array
    _, _, ir = traced("degree_norm_csc")
    cm = compile_model(ir, "partial")
    [conv] = [s for s in cm.steps if isinstance(s, ConvertStep)]
    assert conv.tensor == "adj" and "does not compile with adj stored" in conv.label()
    [user] = [s for s in cm.steps if isinstance(s, CompilerStep) and "adj" in s.converted]
    assert user.converted["adj"] == conv.dst and Format.COMPRESSED in conv.dst.levels  # sparse to sparse
    assert converted_name("adj", conv.dst) in run_model(cm, simulate=run_graph).tensors
    _, _, ir = traced("transposed_adj")
    cm = compile_model(ir, "partial")
    assert "stays sparse" in cm.explain()


def test_converted_name_is_stable() -> None:
    from fuseflow.ir.tensor import TensorFormat

    assert converted_name("adj", TensorFormat((Format.DENSE, Format.COMPRESSED))) == "adj__dc01"
