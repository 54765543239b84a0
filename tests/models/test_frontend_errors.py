"""Frontend errors name the op, the tensor and the source line; CLI model path."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (pip install -e '.[torch]')")

from torch import nn

import fuseflow_cli.models as mcli
from fuseflow.models.frontend import FrontendError, trace
from fuseflow.models.zoo import GCN, to_torch_csr
from fuseflow_cli.cli import main

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


class Sigmoidal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.lin(x))


class Logarithmic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.relu(self.lin(x)) + 1.0)  # log: no dataflow form


class DenseAdj(nn.Module):
    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(adj, x)


class Masked(nn.Module):
    def forward(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)


class MaskedNoSoftmax(nn.Module):
    def forward(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.relu(s.masked_fill(~mask, float("-inf")))


def test_op_without_dataflow_form_is_a_graph_break_naming_op_and_line() -> None:
    """torch.log becomes a host step (explain names the op, why and the source line) and the
    model still matches PyTorch; strict compilation refuses it with the same facts."""
    from fuseflow.compiler import LoweringError
    from fuseflow.models.plan import HostOpStep, compile_model, run_model
    from sw_sim import run_graph

    m = Logarithmic().double()
    x = torch.randn(2, 4, dtype=torch.float64)
    ir = trace(m, {"x": x})
    assert [n.kind.value for n in ir.nodes if n.kind.value not in ("input",)][-1] == "host"
    cm = compile_model(ir, "partial")
    [brk] = cm.breaks
    assert isinstance(brk, HostOpStep) and brk.node.attrs["op"] == "aten.log.default"
    text = cm.explain()
    assert "graph break" in text and "torch.log(torch.relu(self.lin(x)) + 1.0)" in text
    assert "test_frontend_errors.py" in text
    out = run_model(cm, simulate=run_graph).outputs[ir.outputs[0]]
    assert abs(out - m(x).detach().numpy()).max() <= 1e-9
    with pytest.raises(LoweringError) as exc:
        compile_model(ir, "partial", strict=True)
    msg = str(exc.value)
    assert "aten.log.default" in msg and "torch.log(torch.relu(self.lin(x)) + 1.0)" in msg
    assert "\n" not in msg
    assert [n.attrs["op"] for n in trace(Sigmoidal().double(), {"x": x}).nodes if n.kind.value == "unary"] \
        == ["sigmoid"]


def test_unannotated_sparse_operand() -> None:
    a = torch.eye(4, dtype=torch.float64)
    x = torch.ones(4, 2, dtype=torch.float64)
    with pytest.raises(FrontendError, match=r"'adj' is a dense tensor without a format annotation"):
        trace(DenseAdj(), {"adj": a, "x": x})
    ir = trace(DenseAdj(), {"adj": a, "x": x}, formats={"adj": "csr"})
    assert ir.formats == {"adj": "csr"}
    ir = trace(DenseAdj(), {"adj": a.to_sparse_coo(), "x": x})
    assert ir.formats == {"adj": "coo"}  # a COO tensor stays COO (the compiler has COO operands)


def test_unannotated_mask() -> None:
    s = torch.randn(4, 4, dtype=torch.float64)
    m = torch.eye(4, dtype=torch.bool)
    with pytest.raises(FrontendError, match=r"attention mask 'mask' has no sparse format annotation"):
        trace(Masked(), {"s": s, "mask": m})
    trace(Masked(), {"s": s, "mask": m}, formats={"mask": "csr"})
    with pytest.raises(FrontendError, match=r"relu reads the masked scores .* may only feed softmax"):
        trace(MaskedNoSoftmax(), {"s": s, "mask": m}, formats={"mask": "csr"})


def test_shape_mismatch_names_tensors_and_line() -> None:
    model = GCN(5, 3, 2).double()
    adj = to_torch_csr(torch.eye(6, dtype=torch.float64).numpy())
    with pytest.raises(FrontendError) as exc:
        trace(model, {"adj": adj, "x": torch.ones(6, 4, dtype=torch.float64)})
    msg = str(exc.value)
    assert "shape mismatch in layer1.lin" in msg and "(6, 4)" in msg and "zoo.py" in msg


def test_bad_annotations() -> None:
    x = {"x": torch.ones(2, 4, dtype=torch.float64)}
    with pytest.raises(FrontendError, match="names 'nope', which is not an input"):
        trace(Sigmoidal(), x, formats={"nope": "csr"})
    with pytest.raises(FrontendError, match="unsupported format 'xyz'"):
        trace(DenseAdj(), {"adj": torch.eye(4, dtype=torch.float64), "x": torch.ones(4, 2)},
              formats={"adj": "xyz"})


def test_cli_sim_model_passes_and_kernel_path_still_works(capsys) -> None:
    assert main(["sim", "--model", "sae", "--fusion", "full"]) == 0
    out = capsys.readouterr().out
    assert "check against PyTorch" in out and "PASS" in out and "cycles in sw_sim" in out
    assert main(["sim", "--kernel", "spmv", "--size", "8"]) == 0
    assert "check against numpy: PASS" in capsys.readouterr().out


def test_cli_build_model_builds_every_graph(tmp_path, capsys) -> None:
    """Every graph of the model, each in its directory with Q16.16 values, and ``--max-nnz``
    reaching the graphs that have the tensor (their value memories hold that many)."""
    import json

    tensor = "layer1_weight"  # sparse (CSR); a dense tensor's memories hold its dense size
    assert main(["build", "--model", "sae", "-o", str(tmp_path / "d"), "--max-nnz", "x=5"]) == 2
    assert "tensor 'x' is dense in every graph of model sae" in capsys.readouterr().err
    assert main(["build", "--model", "sae", "-o", str(tmp_path / "d"), "--max-nnz", "nosuch=5"]) == 2
    assert "no graph of model sae has tensor 'nosuch'" in capsys.readouterr().err
    assert main(["build", "--model", "sae", "--fusion", "partial", "-o", str(tmp_path),
                 "--max-nnz", f"{tensor}=5"]) == 0
    out = capsys.readouterr().out
    assert "q16.16 values" in out  # model graphs build with fixed-point arithmetic by default
    m = json.loads((tmp_path / "model.json").read_text())
    graphs = m["graphs"]
    assert len(graphs) == 3 and all(g in out for g in graphs)  # every graph, each named
    readers = {x["name"] for s in m["steps"] if s["kind"] == "graphs" for x in s["graphs"] if tensor in x["inputs"]}
    assert readers
    for g in graphs:
        assert (tmp_path / g / "fuseflow_top.v").exists()
        config = json.loads((tmp_path / g / "summary.json").read_text())["config"]
        assert config["numerics"] == {"mode": "fixed", "width": 32, "frac": 16}
        regions = json.loads((tmp_path / g / "memory_map.json").read_text())["regions"]
        vals = [r["depth"] for r in regions if r["name"] == f"{tensor}.vals"]
        assert vals == ([5] if g in readers else [])


def test_cli_numerics_errors_name_the_option(tmp_path, capsys) -> None:
    assert main(["build", "--model", "sae", "-o", str(tmp_path), "--numerics", "float"]) != 0
    assert "--numerics float: float is sw_sim only" in capsys.readouterr().err
    assert main(["build", "--kernel", "spmv", "--size", "8", "-o", str(tmp_path), "--numerics",
                 "q1.2.3"]) != 0
    assert "--numerics q1.2.3" in capsys.readouterr().err
    assert main(["build", "--kernel", "spmv", "--size", "8", "-o", str(tmp_path), "--numerics",
                 "q8.8"]) == 0


def test_cli_sim_model_exits_non_zero_when_the_check_fails(monkeypatch, capsys) -> None:
    real = mcli._reference
    monkeypatch.setattr(mcli, "_reference", lambda case: real(case) + 1e-3)  # a reference off by 1e-3
    assert main(["sim", "--model", "sae", "--fusion", "unfused"]) == 1
    assert "FAIL" in capsys.readouterr().out
