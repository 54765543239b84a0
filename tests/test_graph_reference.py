"""A graph file carries its own Einsum (``Graph.reference``), so that a run of it on anyone's
data is checked: ``sim`` / ``rtl`` on a compiled graph file report ``ok`` true or false against
numpy on the recorded statements, never ``null`` when a reference can exist."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fuseflow.compiler import Program, compile_program, einsum, relu
from fuseflow.compiler.program import ProgramError
from fuseflow.compiler.program_json import program_from_reference
from fuseflow.compiler.runner import reference_all
from fuseflow.ir.samml import Graph
from fuseflow.suites.compiler import MODES, PROGRAMS
from fuseflow_cli.cli import main


def _sim_json(path: Path, capsys, *extra: str) -> dict:
    code = main(["sim", str(path), "--json", *extra])
    rec = json.loads(capsys.readouterr().out)
    assert code == (0 if rec["ok"] else 1)
    return rec


def _perm_program() -> Program:
    """A sum of a CSC and a CSR operand times B: the CSR one is read from a permuted copy."""
    p = Program("perm")
    a = p.tensor("A", (6, 5), "csc")
    b = p.tensor("B", (5, 4), "csr")
    c = p.tensor("C", (6, 5), "csr")
    p.output(p.let("T", relu(einsum("ik,kj->ij", a + c, b))))
    return p


def test_reference_round_trips_and_equals_the_program() -> None:
    """The record read back computes what the program computes (numpy on the same data)."""
    rng = np.random.default_rng(3)
    data = {"A": rng.integers(-3, 4, (6, 5)) * (rng.random((6, 5)) < 0.4),
            "B": rng.integers(-3, 4, (5, 4)), "C": rng.integers(-3, 4, (6, 5)) * (rng.random((6, 5)) < 0.4)}
    p = _perm_program()
    [g] = compile_program(p, "full").graphs
    assert g.reference["aliases"] == {"C": next(t for t in g.input_tensors() if t.startswith("C_"))}
    back = program_from_reference(Graph.from_json(json.loads(json.dumps(g.to_json()))).reference, "perm")
    np.testing.assert_array_equal(reference_all(back, data)["T"], reference_all(p, data)["T"])
    want = np.maximum((data["A"] + data["C"]) @ data["B"], 0)
    np.testing.assert_array_equal(reference_all(back, data)["T"], want)


def test_every_suite_graph_records_its_statements() -> None:
    for name, prog in PROGRAMS.items():
        for mode, (fusion, factored, locate) in MODES.items():
            if mode in prog.modes:
                for g in compile_program(prog.build(), fusion, factored=factored, locate=locate).graphs:
                    assert g.reference is not None and g.reference["statements"], (name, mode, g.name)
                    assert set(g.reference["outputs"]) == set(g.output_tensors())


@pytest.mark.parametrize("fusion", ["unfused", "partial", "full"])
def test_graph_files_are_checked_on_random_data(tmp_path, capsys, fusion: str) -> None:
    """Every graph of the GCN-with-ReLU suite program, run from its file on the CLI's random
    operands, is checked (ok true), also in fixed point."""
    prog = PROGRAMS["gcn_relu"] if "gcn_relu" in PROGRAMS else next(iter(PROGRAMS.values()))
    for g in compile_program(prog.build(), fusion).graphs:
        path = tmp_path / f"{g.name}.json"
        g.save(path)
        rec = _sim_json(path, capsys)
        assert rec["ok"] is True, (g.name, rec["error"])
        rec = _sim_json(path, capsys, "--numerics", "q16.16", "--seed", "2")
        assert rec["ok"] is True and rec["numerics"] == "q16.16", (g.name, rec["error"], rec["tolerance"])


def test_permuted_copy_graph_checked_with_user_data(tmp_path, capsys) -> None:
    [g] = compile_program(_perm_program(), "full").graphs
    path = tmp_path / "perm.json"
    g.save(path)
    rng = np.random.default_rng(0)
    arrays = {t: rng.integers(-4, 5, g.tensors[t].operand_shape) * (rng.random(g.tensors[t].operand_shape) < 0.5)
              for t in g.input_tensors()}
    np.savez(tmp_path / "in.npz", **arrays)
    rec = _sim_json(path, capsys, "--data", str(tmp_path / "in.npz"))
    assert rec["ok"] is True


def test_a_wrong_graph_fails_its_check(tmp_path, capsys) -> None:
    """The check can fail: the same graph with its recorded statement changed (relu dropped,
    so negative sums would survive) reports ok false and exit 1 on data with negative sums."""
    [g] = compile_program(_perm_program(), "full").graphs
    d = g.to_json()
    d["reference"]["statements"][-1]["rhs"] = d["reference"]["statements"][-1]["rhs"]["arg"]  # relu(x) -> x
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(d))
    arrays = {t: -np.ones(g.tensors[t].operand_shape, dtype=np.int64) for t in g.input_tensors()}
    arrays[next(t for t in g.input_tensors() if t.startswith("B"))] *= -1  # every sum negative
    np.savez(tmp_path / "neg.npz", **arrays)
    rec = _sim_json(path, capsys, "--data", str(tmp_path / "neg.npz"))
    assert rec["ok"] is False and rec["error"] > 0


def test_malformed_reference_is_a_clear_error(tmp_path, capsys) -> None:
    [g] = compile_program(_perm_program(), "full").graphs
    d = g.to_json()
    d["reference"]["statements"][0]["rhs"] = {"access": "Nope", "indices": ["i"]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    assert main(["sim", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "Nope" in err
    with pytest.raises(ProgramError, match="malformed expression"):
        program_from_reference({"tensors": {}, "statements": [{"out": "T", "indices": [], "rhs": {"x": 1}}],
                                "outputs": ["T"]}, "r")


def test_hand_written_graph_without_record_says_so(tmp_path, capsys) -> None:
    [g] = compile_program(_perm_program(), "full").graphs
    d = g.to_json()
    del d["reference"]
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(d))
    assert main(["sim", str(path)]) == 0
    out = capsys.readouterr().out
    assert "check: none (the graph file records no Einsum" in out


def test_rtl_checks_a_graph_file(tmp_path, capsys) -> None:
    prog = PROGRAMS["gcn_relu"] if "gcn_relu" in PROGRAMS else next(iter(PROGRAMS.values()))
    g = compile_program(prog.build(), "partial").graphs[0]
    path = tmp_path / f"{g.name}.json"
    g.save(path)
    assert main(["rtl", str(path), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["check"] == "pass" and rec["outputs_identical"] is True
