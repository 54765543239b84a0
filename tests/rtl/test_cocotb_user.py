"""The user cocotb example (examples/cocotb_user, docs/cocotb.md): build the ``reduce``
harness, run the user's cocotb test through cocotb's runner and read its ``results.xml``: the
test passes, and the same test with a deliberately wrong expectation fails inside cocotb (so the
check can fail).  The expected sums are numpy's; the stream the test builds is checked here
against sw_sim's ``reduce``."""

from __future__ import annotations

import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from sw_sim import simulate_primitive

pytestmark = pytest.mark.rtl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cocotb_user"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"cocotb_user_{name}", EXAMPLE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _cases(xml: Path) -> dict[str, list[str]]:
    """Test name -> the tags of its failure / error children, from cocotb's results.xml."""
    root = ET.parse(xml).getroot()
    return {tc.get("name"): [c.tag for c in tc if c.tag in ("failure", "error")] for tc in root.iter("testcase")}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    run = _load("run")
    d = tmp_path_factory.mktemp("cocotb_user")
    return run, run.build(d), d


def test_the_stream_the_example_sends_is_what_sw_sim_reduces():
    tb = _load("reduce_tb")
    rows = tb.ragged_rows(1)
    assert any(len(r) == 0 for r in rows) and any(len(r) > 1 for r in rows)
    res = simulate_primitive("reduce", {"val": tb.row_tokens(rows)}, op="add")["val"]
    assert [int(x) for x in res[:-2]] == [int(np.sum(r)) for r in rows]


@pytest.mark.parametrize("seed", [1, 7])
def test_user_cocotb_test_passes(built, seed):
    run, runner, d = built
    xml = run.run(runner, d, seed=seed)
    assert _cases(xml) == {"reduce_rows_match_numpy": []}


def test_stream_source_and_sink(built, monkeypatch):
    """tests/rtl/cocotb_streams_tb.py: the stream rule under pauses, back-pressure, pause
    generators that run out or are replaced, the width check; every cocotb test passes."""
    run, runner, d = built
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the runner passes sys.path on
    xml = run.run(runner, d, test_module="cocotb_streams_tb")
    cases = _cases(xml)
    assert len(cases) == 4 and all(v == [] for v in cases.values()), cases


def test_a_wrong_expectation_fails_in_cocotb(built):
    run, runner, d = built
    xml = run.run(runner, d, expect_offset=1)
    assert _cases(xml) == {"reduce_rows_match_numpy": ["failure"]}
    assert "AssertionError" in (xml.parent / "sim.log").read_text()
