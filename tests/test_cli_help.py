"""The command line feels native: complete --help texts without reST markup, ``correlate
--list`` without ``-o``, ``demo`` writing the DOT graphs it announces, one-line errors."""

from __future__ import annotations

import argparse
import re

import pytest

from fuseflow.suites import suite
from fuseflow_cli.cli import SUBCOMMANDS, build_parser, main


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_is_registered():
    assert list(_subparsers()) == list(SUBCOMMANDS)


def test_top_level_help_is_clean(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out
    assert "registers itself" not in out  # the module's internal note
    for name in SUBCOMMANDS:
        assert re.search(rf"^\s+{name}\b", out, re.MULTILINE), name


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_command_help_is_complete(name, capsys):
    p = _subparsers()[name]
    assert p.description and len(p.description.split()) >= 5, f"{name}: no description"
    undocumented = [a.option_strings or [a.dest] for a in p._actions
                    if not isinstance(a, argparse._HelpAction) and not a.help]
    assert not undocumented, f"{name}: options without help: {undocumented}"
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: fuseflow-hw {name}")
    assert p.description.splitlines()[0][:40] in out
    assert "``" not in out and ":class:" not in out, f"{name}: reST markup in --help"


def test_correlate_list_needs_no_out(capsys):
    assert main(["correlate", "--list", "--suite", "spine"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == [e.name for e in suite("spine")]


def test_correlate_without_out_is_an_error(capsys):
    assert main(["correlate", "--suite", "spine"]) == 2
    err = capsys.readouterr().err
    assert "-o DIR" in err and "Traceback" not in err


def test_correlate_suite_lists_its_choices(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["correlate", "--list", "--suite", "nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nope'" in err and "'spine'" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["sim", "--size", "abc"], ["sim", "--density", "2"],
                                  ["demo", "--size", "0"], ["nosuchcommand"], ["rtl", "--bogus"]])
def test_bad_options_are_one_error_without_traceback(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_demo_writes_the_dot_graphs_it_announces(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--no-rtl", "--size", "8", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "DOT graphs" in text
    for kernel in ("spmv", "spmm_csr"):
        dot = out / kernel / "graph.dot"
        assert dot.is_file(), f"{dot} announced but not written"
        body = dot.read_text()
        assert body.lstrip().startswith("digraph") and "->" in body
        assert (out / kernel / "fuseflow_top.v").is_file()
