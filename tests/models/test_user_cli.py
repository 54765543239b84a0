"""``--model FILE.py:NAME`` on the command line: sim / compile with --inputs (.npz, .pt),
--formats and --strict; explain with source lines and the fused-index legend; one-line errors."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")

from fuseflow_cli.cli import main

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
SUITE = Path(__file__).parent / "user_models" / "suite.py"
ROOT = Path(__file__).resolve().parents[2]


def _graph_inputs(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    adj = (rng.random((10, 10)) < 0.3) * rng.random((10, 10))
    path = tmp_path / "in.npz"
    np.savez(path, adj=adj, x=rng.standard_normal((10, 6)))
    return path


def test_sim_user_model_from_npz(tmp_path, capsys) -> None:
    inputs = _graph_inputs(tmp_path)
    assert main(["sim", "--model", f"{SUITE}:GIN", "--inputs", str(inputs), "--formats", "adj=csr",
                 "--fusion", "full"]) == 0
    out = capsys.readouterr().out
    assert "GIN from" in out and "check against PyTorch" in out and "PASS" in out
    assert "host steps: none (fully on dataflow)" in out
    assert main(["sim", "--model", f"{SUITE}:GIN", "--inputs", str(inputs), "--formats", "adj=csr",
                 "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["ok"] and rec["graph_breaks"] == 0 and rec["capture"] == "torch.export"


def test_sim_factory_with_sparse_tensors_and_pt_inputs(tmp_path, capsys) -> None:
    assert main(["sim", "--model", f"{SUITE}:gcn_factory"]) == 0
    assert "PASS" in capsys.readouterr().out
    rng = np.random.default_rng(1)
    adj = torch.from_numpy((rng.random((10, 10)) < 0.3) * rng.random((10, 10))).to_sparse_csr()
    path = tmp_path / "in.pt"
    torch.save({"adj": adj, "x": torch.from_numpy(rng.standard_normal((10, 6)))}, path)
    assert main(["sim", "--model", f"{SUITE}:GCNMatmul", "--inputs", str(path), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["ok"]


def test_compile_explain_maps_graphs_to_source_lines(tmp_path, capsys) -> None:
    inputs = _graph_inputs(tmp_path)
    out_dir = tmp_path / "graphs"
    assert main(["compile", "--model", f"{SUITE}:SAGEConcat", "--inputs", str(inputs), "--formats", "adj=csr",
                 "--explain", "--run", "-o", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "h = torch.cat([x, torch.sparse.mm(adj, x)], dim=-1)" in out  # every node's source line
    assert " is index " in out and "fused:" in out  # the legend of the fused indices
    assert "PASS" in out and list(out_dir.glob("*.json"))


def test_graph_breaks_reported_and_strict_refuses_them(tmp_path, capsys) -> None:
    rng = np.random.default_rng(2)
    path = tmp_path / "x.npz"
    np.savez(path, x=rng.standard_normal((12, 6)))
    assert main(["sim", "--model", f"{SUITE}:DataDependentBranch", "--inputs", str(path), "--explain"]) == 0
    out = capsys.readouterr().out
    assert "graph break" in out and "if h.sum() > 0:" in out and "PASS" in out
    assert "materialised" in out
    assert main(["sim", "--model", f"{SUITE}:LogSoftmaxHead", "--inputs", str(path), "--strict"]) != 0
    err = capsys.readouterr().err.strip()
    assert "strict" in err and "aten._log_softmax" in err and "log_softmax" in err and len(err.splitlines()) == 1


def test_user_model_errors_are_one_line(tmp_path, capsys) -> None:
    inputs = _graph_inputs(tmp_path)
    cases = [
        (["sim", "--model", f"{SUITE}:Nope", "--inputs", str(inputs)], "defines no 'Nope'"),
        (["sim", "--model", f"{SUITE}:GIN"], "no inputs: give --inputs"),
        (["sim", "--model", f"{SUITE}:GIN", "--inputs", str(inputs), "--dataset", "cora"], "--dataset"),
        (["sim", "--model", "nope.py:X", "--inputs", str(inputs)], "no such file"),
        (["sim", "--model", "mlp"], "give a zoo model"),
        (["sim", "--model", f"{SUITE}:GIN", "--inputs", str(inputs), "--formats", "adj"], "is not NAME=FORMAT"),
        (["sim", "--model", "gcn", "--inputs", str(inputs)], "--inputs / --formats"),
        (["compile", "--inputs", str(inputs)], "options of --model"),
    ]
    for argv, want in cases:
        assert main(argv) != 0, argv
        err = capsys.readouterr().err.strip()
        assert want in err and len(err.splitlines()) == 1 and "Traceback" not in err, (argv, err)


def test_zoo_models_and_their_options_on_compile_and_rtl(capsys) -> None:
    """compile / rtl take a zoo name with its options (they read args.dataset without having the
    option: exit 3); the zoo options with a kernel or program are errors, not ignored."""
    assert main(["compile", "--model", "gcn", "--dataset", "karate", "--hidden", "4"]) == 0
    assert "gcn on karate" in capsys.readouterr().out
    assert main(["rtl", "--kernel", "spmv", "--dataset", "karate"]) == 2
    assert "--dataset karate applies to models only, not to --kernel spmv" in capsys.readouterr().err
    assert main(["compile", str(ROOT / "examples/programs/spmm.py"), "--hidden", "4"]) == 2
    assert "--hidden 4 applies to models only" in capsys.readouterr().err


@pytest.mark.rtl
@pytest.mark.slow  # one Verilator build
def test_rtl_model_json_reports_each_graph_against_sim(capsys) -> None:
    """``rtl --model --json``: one JSON object (it printed the text tables before), its sw_sim
    cycles those of ``sim --model`` at the same numerics, and RTL equal to them."""
    opts = ["--model", "graphsage", "--hidden", "8", "--fusion", "full", "--numerics", "q16.16", "--json"]
    assert main(["sim", *opts]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert main(["rtl", *opts]) == 0
    rtl = json.loads(capsys.readouterr().out)
    assert [g["sw_cycles"] for g in rtl["graphs"]] == [g["cycles"] for g in sim["graphs"]]
    assert rtl["rtl_cycles"] == rtl["sw_cycles"] == sim["cycles"]
    assert rtl["outputs_identical"] and rtl["ok"] and all(c["ok"] for c in rtl["checks"])
