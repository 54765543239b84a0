"""Frictions of the command line (issue 35, part 8): command-line syntax in its errors,
did-you-mean for a misspelt option on every subcommand, a quiet exit on a closed pipe, input
names checked against ``forward``, ``rank``'s first line, and one runner default for the RTL
API and the CLI."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fuseflow_cli.cli import BROKEN_PIPE, SUBCOMMANDS, build_parser, main
from fuseflow_cli.errors import cli_syntax

ROOT = Path(__file__).resolve().parents[1]

MODEL = textwrap.dedent("""
    import torch

    class M(torch.nn.Module):
        def forward(self, x, mask):
            return (x @ x.T) * mask

    class A(torch.nn.Module):
        def forward(self, q, k, mask):
            return torch.softmax((q @ k.T).masked_fill(~mask, float("-inf")), dim=-1)
""")


@pytest.fixture
def user_model(tmp_path):
    py = tmp_path / "m.py"
    py.write_text(MODEL)
    rng = np.random.default_rng(0)
    mask = (rng.random((8, 8)) < 0.3) | np.eye(8, dtype=bool)
    np.savez(tmp_path / "good.npz", x=rng.random((8, 4)), mask=mask.astype(float))
    np.savez(tmp_path / "bad.npz", x=rng.random((8, 4)), msk=mask.astype(float))
    np.savez(tmp_path / "att.npz", q=rng.random((8, 4)), k=rng.random((8, 4)), mask=mask)
    return tmp_path


# (a) command-line syntax -------------------------------------------------------------------
def test_python_keywords_become_flags():
    assert cli_syntax("give it as formats={'mask': 'csr'} (or a sparse layout)") == \
        "give it as --formats mask=csr (or a sparse layout)"
    assert cli_syntax("formats={'a': 'csr', 'fc1.weight': 'csc'}; par={'i': 2}") == \
        "--formats a=csr,fc1.weight=csc; --par i=2"
    assert cli_syntax("shape={'a': 1} and formats={x}") == "shape={'a': 1} and formats={x}"  # left alone


def test_missing_mask_format_is_written_as_a_flag(user_model, capsys):
    pytest.importorskip("torch")
    rc = main(["sim", "--model", f"{user_model}/m.py:A", "--inputs", str(user_model / "att.npz")])
    err = capsys.readouterr().err
    assert rc == 2 and "--formats mask=csr" in err and "formats={" not in err


# (b) did-you-mean ----------------------------------------------------------------------------
def _subparsers():
    parser = build_parser()
    return parser._subparsers._group_actions[0].choices


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_misspelt_option_gets_suggestions_on_every_command(name, capsys):
    sub = _subparsers()[name]
    flag = max((o for o in sub._option_string_actions if o.startswith("--") and o != "--help"), key=len)
    typo = flag[:-2] + flag[-1] + flag[-2]  # the last two letters swapped
    with pytest.raises(SystemExit) as exc:
        main([name, typo])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"fuseflow-hw {name}: error: unknown option {typo} (did you mean " in err
    assert flag in err.split("did you mean", 1)[1] and "Traceback" not in err


def test_unknown_option_named_before_a_missing_required_one(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--bord", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown option --bord (did you mean --board" in err and "usage: fuseflow-hw run" in err


def test_known_options_and_abbreviations_still_parse(capsys):
    assert main(["sim", "--kernel", "spmv", "--siz", "4", "--seed=1", "--density", "0.5"]) == 0
    with pytest.raises(SystemExit):
        main(["sim", "--kernel", "spmv", "--xyzzy=3"])
    assert "(see fuseflow-hw sim --help)" in capsys.readouterr().err


# (c) a closed pipe -----------------------------------------------------------------------------
def test_closed_stdout_is_a_quiet_exit_141():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "fuseflow_cli", "primitives"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # the reader went away (| head) before the command wrote
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == BROKEN_PIPE == 141
    assert err == "", err


# (d) input names against forward -----------------------------------------------------------------
def test_npz_names_checked_against_forward(user_model, capsys):
    pytest.importorskip("torch")
    rc = main(["sim", "--model", f"{user_model}/m.py:M", "--inputs", str(user_model / "bad.npz")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "no input for mask" in err and "msk is not a parameter of M.forward(x, mask)" in err
    assert "inspect.py" not in err


def test_trace_checks_names_too(user_model):
    torch = pytest.importorskip("torch")
    from fuseflow.models.frontend import FrontendError, trace

    ns: dict = {}
    exec(MODEL, ns)
    with pytest.raises(FrontendError, match=r"no input for mask; msk is not a parameter"):
        trace(ns["M"](), {"x": torch.rand(8, 4), "msk": torch.rand(8, 8)})


# (e) rank's first line ----------------------------------------------------------------------------
def test_rank_names_the_model_not_none(user_model, capsys):
    pytest.importorskip("torch")
    assert main(["rank", "--model", f"{user_model}/m.py:M", "--inputs", str(user_model / "good.npz")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "None" not in first and first.startswith("M from ") and "memory" in first


# (f) one runner default ----------------------------------------------------------------------------
def test_rtl_api_defaults_to_the_cli_runner():
    import rtl_sim
    from fuseflow_cli.cmd_rtl import resolve_runner

    args = build_parser().parse_args(["rtl", "--kernel", "spmv"])
    cli = resolve_runner(args)
    for fn in (rtl_sim.run_graph, rtl_sim.run_graph_batch):
        assert inspect.signature(fn).parameters["runner"].default == cli == "native"


def test_declared_sources_refuse_what_a_source_ignores_and_keep_what_it_uses(capsys):
    """``--seed`` seeds a kernel's or graph file's random operands and a program's
    ``example_data(seed)``; a model ignores it: refused there (exit 2, naming it), taken by the
    others."""
    program = str(Path(__file__).resolve().parent.parent / "examples" / "programs" / "spmm.py")
    assert main(["estimate", program, "--seed", "3"]) == 0
    assert main(["estimate", "--kernel", "spmv", "--size", "8", "--seed", "3"]) == 0
    capsys.readouterr()
    assert main(["estimate", program, "--data", "x.npz"]) == 2
    assert "--data x.npz applies to kernels and graph files only" in capsys.readouterr().err
    assert main(["sim", "--model", "gcn", "--seed", "3"]) == 2
    assert "--seed 3 applies to kernels, graph files and programs only, not to --model gcn" in capsys.readouterr().err
