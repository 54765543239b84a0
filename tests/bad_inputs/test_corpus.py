"""Every case of the bad-input corpus (``corpus.py``: the CLI's options, graph files, data
files, schedules, sweep files, Einsum programs, the Python API) ends within the time limit in
a clear error that names what was wrong: no traceback, no hang, nothing silently accepted."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import pytest

from .corpus import CASES, run_case


def test_the_corpus_is_large_and_spans_every_entry_point() -> None:
    entries = Counter(c.entry for c in CASES)
    assert len(CASES) >= 300 and len({c.id for c in CASES}) == len(CASES)
    assert set(entries) == {"cli", "graph", "data", "sweep", "program", "api"}
    assert all(c.says for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_a_clear_error(case, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # examples/ paths in the cases
    warnings.filterwarnings("ignore")
    out = run_case(case, tmp_path)
    assert out.verdict == "clear", f"{out.verdict}: {out.message}"
