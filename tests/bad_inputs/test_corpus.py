"""Every case of the bad-input corpus (``corpus.py``: the CLI's options, graph files, data
files, schedules, sweep files, Einsum programs, the Python API) ends within the time limit in
a clear error that names what was wrong: no traceback, no hang, nothing silently accepted."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import pytest

from .corpus import CASES, run_case
from .generated import DECLARED, REDUCED, SOURCES


def test_the_corpus_is_large_and_spans_every_entry_point() -> None:
    entries = Counter(c.entry for c in CASES)
    everything = CASES + DECLARED + SOURCES
    assert len(everything) >= 1000 and len({c.id for c in everything}) == len(everything)
    assert len(CASES) >= 300
    assert set(entries) == {"cli", "graph", "data", "sweep", "program", "api"}
    assert all(c.says for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_a_clear_error(case, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # examples/ paths in the cases
    warnings.filterwarnings("ignore")
    out = run_case(case, tmp_path)
    assert out.verdict == "clear", f"{out.verdict}: {out.message}"


@pytest.mark.parametrize("case", [c if c.id in REDUCED else pytest.param(c, marks=pytest.mark.slow)
                                  for c in DECLARED], ids=[c.id for c in DECLARED])
def test_declared_option_value_gets_a_clear_error(case, tmp_path) -> None:
    """The cases generated from the options' declarations (``generated.py``): the first bad
    value of each option by default, every one with ``-m slow``."""
    warnings.filterwarnings("ignore")
    out = run_case(case, tmp_path)
    assert out.verdict == "clear", f"{out.verdict}: {out.message}"


@pytest.mark.parametrize("case", SOURCES, ids=[c.id for c in SOURCES])
def test_option_given_with_a_source_it_does_not_apply_to_is_refused(case, tmp_path) -> None:
    """The cases generated from the options' declared sources (``generated.py``): an option
    given with a kernel, graph file, program or model it would be ignored for."""
    warnings.filterwarnings("ignore")
    out = run_case(case, tmp_path)
    assert out.verdict == "clear", f"{out.verdict}: {out.message}"
