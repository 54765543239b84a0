"""``fuseflow-hw compile``: files written, --explain text, --run check, user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuseflow.ir.samml import Graph
from fuseflow_cli.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "programs"


@pytest.mark.parametrize("fusion", ["unfused", "partial", "full"])
def test_compile_writes_json_and_dot(tmp_path: Path, fusion: str, capsys) -> None:
    rc = main(["compile", str(EXAMPLES / "gcn_layer.py"), "--fusion", fusion, "-o", str(tmp_path)])
    assert rc == 0
    manifest = json.loads((tmp_path / "program.json").read_text())
    assert manifest["fusion"] == fusion
    assert len(manifest["graphs"]) == {"unfused": 3, "partial": 2, "full": 1}[fusion]
    for name in manifest["graphs"]:
        g = Graph.load(tmp_path / f"{name}.json")
        g.verify()
        assert (tmp_path / f"{name}.dot").read_text().startswith(f'digraph "{name}"')


def test_explain_prints_every_stage(capsys) -> None:
    assert main(["compile", str(EXAMPLES / "spmm.py"), "--explain"]) == 0
    out = capsys.readouterr().out
    for part in ["fused einsum:", "T_{i,j} = Σ_{u0} A_{i,u0} · X_{u0,j}", "partial order graph:",
                 "chosen order: i -> u0 -> j", "Intersect_u0(A; locate X)", "Red1_u0[crd]",
                 "located dense levels: X at u0"]:
        assert part in out


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_run_checks_against_numpy(example: str, capsys) -> None:
    assert main(["compile", str(EXAMPLES / example), "--run", "--seed", "3"]) == 0
    assert "check against numpy: " in (out := capsys.readouterr().out) and ": PASS" in out


def test_order_option(capsys) -> None:
    assert main(["compile", str(EXAMPLES / "spmm.py"), "--order", "T=kij"]) == 2
    err = capsys.readouterr().err
    assert "error: group spmm_g0: the ordering constraints form a cycle" in err
    assert "u0 is index k of 'T = einsum" in err


def test_missing_program_function(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    assert main(["compile", str(bad)]) == 2
    assert "must define a function program()" in capsys.readouterr().err


def test_program_error_is_a_user_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from fuseflow.compiler import Program, einsum\n"
        "def program():\n"
        "    p = Program('bad')\n"
        "    A = p.tensor('A', (3, 4), 'csr')\n"
        "    X = p.tensor('X', (5, 2))\n"
        "    p.let('T', einsum('ik,kj->ij', A, X))\n"
        "    return p\n")
    assert main(["compile", str(bad)]) == 2
    assert "index 'k' has size 4 in A but 5 in X" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "lowering"), [
    ("--factored", "factored iteration (own pipelines for T2, T1)"),
    ("--global-iteration", "single iteration space (T1 inlined; factored iteration disabled)"),
])
def test_lowering_flags_are_reported(tmp_path: Path, capsys, flag: str, lowering: str) -> None:
    rc = main(["compile", str(EXAMPLES / "gcn_layer.py"), flag, "-o", str(tmp_path), "--run"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "check against numpy: " in out and ": PASS" in out
    manifest = json.loads((tmp_path / "program.json").read_text())
    assert manifest["graphs"] == (["gcn_layer_g0"] if flag == "--factored" else
                                  ["gcn_layer_g0", "gcn_layer_g1"])
    assert manifest["lowering"]["gcn_layer_g0"] == lowering
    assert f"; {lowering}" in out


def test_list_passes_prints_the_pipeline_in_order(capsys) -> None:
    assert main(["compile", "--list-passes"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split()[1] for r in rows] == ["block", "plan", "fuse", "table", "locate", "lower", "skip",
                                            "par", "fifo", "verify"]
    assert "samml.Graph -> samml.Graph" in rows[6] and "samml.Graph -> samml.Graph" in rows[7]


def test_dump_after_fifo_adds_only_fifo_depths(capsys) -> None:
    """The IR after ``fifo`` is the IR after ``lower`` plus depths on reconvergent edges."""
    prog = str(EXAMPLES / "gcn_layer.py")
    assert main(["compile", prog, "--dump-after", "lower"]) == 0
    lowered = capsys.readouterr().out
    assert main(["compile", prog, "--dump-after", "fifo"]) == 0
    sized = capsys.readouterr().out
    assert " depth=" in sized and sized.count("\nnode ") == lowered.count("\nnode ") > 0
    stripped = "\n".join(ln.split(" depth=")[0] for ln in sized.splitlines())
    assert stripped.replace("after fifo", "after lower") == "\n".join(
        ln.split(" depth=")[0] for ln in lowered.splitlines())


def test_dump_after_unknown_pass_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compile", str(EXAMPLES / "spmm.py"), "--dump-after", "tile"])
    assert exc.value.code == 2
    assert "invalid choice: 'tile'" in capsys.readouterr().err


def test_primitives_listing_comes_from_the_declarations(capsys) -> None:
    assert main(["primitives", "--json"]) == 0
    records = {r["kind"]: r for r in json.loads(capsys.readouterr().out)}
    assert {"scan", "intersect", "spacc1", "crd_mask", "stkn_drop"} <= set(records)
    mask = {p["name"]: p for p in records["crd_mask"]["parameters"]}
    assert mask["pred"]["required"] and mask["block"]["default"] == 1
    assert records["scan"]["tensor"] == "reads_level"
