"""Tensor data handed to the simulators is checked before any cycle: each kind of broken level
array is an error naming the tensor, level, index and value; every tensor built from a dense
array (hypothesis) passes; the CLI's numeric options are range-checked; no traceback reaches a
user (top-level handler, --debug)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.kernels import example
from fuseflow.ir.samml import GraphError
from fuseflow.ir.tensor import CSR, DCSR, DENSE2, TensorData, TensorFormat
from fuseflow.ir.validate import tensor_problems
from fuseflow_cli import cmd_sim
from fuseflow_cli.cli import main
from sw_sim import run_graph

FORMATS = [CSR, DCSR, DENSE2, TensorFormat(("dense", "compressed"), (1, 0)),
           TensorFormat(("compressed", "compressed"), (1, 0)), TensorFormat(("compressed", "dense"))]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.floats(0, 1), st.integers(0, 2**31 - 1),
       st.sampled_from(FORMATS))
def test_tensors_from_dense_arrays_have_no_problems(n, m, density, seed, fmt) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(-5, 6, (n, m)) * (rng.random((n, m)) < density)
    assert tensor_problems(TensorData.from_dense(a, fmt)) == []


def _spmv(**change):
    g, data, _, _ = example("spmv", 8, seed=1, density=0.4)
    b = data["B"]
    seg, crd, vals = b.seg[1].copy(), b.crd[1].copy(), np.asarray(b.vals).copy()
    new = change.get("fn", lambda s, c, v: (s, c, v))(seg, crd, vals)
    data["B"] = TensorData(b.shape, b.fmt, [None, new[0]], [None, new[1]], new[2])
    return g, data


def _swap(s, c, v):
    k = int(np.flatnonzero(np.diff(s) >= 2)[0])  # a row with two entries
    c[s[k]], c[s[k] + 1] = c[s[k] + 1], c[s[k]]
    return s, c, v


CASES = {
    "crd out of range": (lambda s, c, v: (s, np.r_[c[:-1], 8], v), r"level 1: crd\[\d+\] = 8 is outside the dimension 0..7"),
    "crd not increasing": (_swap, r"level 1: crd\[\d+\] = \d+ does not increase within its segment"),
    "seg decreasing": (lambda s, c, v: (np.r_[s[:3], s[2] - 1 if s[2] else 5, s[4:]], c, v), r"level 1: seg"),
    "seg not at nnz": (lambda s, c, v: (np.r_[s[:-1], s[-1] - 1], c, v), r"level 1: seg ends at \d+, but crd has \d+ entries"),
    "seg too short": (lambda s, c, v: (s[:-2], c, v), r"level 1: seg has 7 entries, expected 9"),
    "vals too short": (lambda s, c, v: (s, c, v[:-1]), r"vals has \d+ entries, expected \d+"),
    "NaN value": (lambda s, c, v: (s, c, np.r_[v[:-1].astype(float), np.nan]), r"vals\[\d+\] is NaN"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_level_arrays_are_named(case) -> None:
    fn, says = CASES[case]
    g, data = _spmv(fn=fn)
    with pytest.raises(GraphError, match=r"tensor 'B': " + says):
        run_graph(g, data)


def test_valid_data_still_runs() -> None:
    g, data = _spmv()
    assert run_graph(g, data).cycles > 0


@pytest.mark.parametrize(("argv", "says"), [
    (["sim", "--kernel", "spmv", "--density", "2.0"], "--density: 2.0 is out of range"),
    (["sim", "--kernel", "spmv", "--density", "nan"], "--density: 'nan' is not a finite number"),
    (["sim", "--kernel", "spmv", "--size", "0"], "--size: 0 is out of range: use from 1 to 65536"),
    (["sim", "--kernel", "spmv", "--seed", "-1"], "--seed: -1 is out of range: use at least 0"),
    (["build", "--kernel", "spmv", "-o", "x", "--fifo-depth", "0"], "--fifo-depth: 0 is out of range"),
    (["build", "--kernel", "spmv", "-o", "x", "--fifo-depth", "1000000000"], "use from 2 to 65536"),
    (["sim", "--model", "gcn", "--hidden", "x"], "--hidden: 'x' is not an integer"),
    (["sweep", "f.toml", "-o", "x", "-j", "0"], "--jobs: 0 is out of range"),
])
def test_numeric_options_are_range_checked(argv, says, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and says in capsys.readouterr().err


def test_no_traceback_reaches_a_user(tmp_path, capsys, monkeypatch) -> None:
    bad = tmp_path / "g.json"
    bad.write_text('{"name": "g", "tensors": 5}')
    assert main(["sim", str(bad)]) == 2  # malformed JSON types: the schema names the field
    err = capsys.readouterr().err
    assert "tensors = 5: must be object" in err and "Traceback" not in err

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cmd_sim, "simulate_graph", broken)  # an internal error, not bad input
    assert main(["sim", "--kernel", "spmv"]) == 3
    err = capsys.readouterr().err
    assert "unexpected error: RuntimeError: boom" in err and "Traceback" not in err and "--debug" in err
    with pytest.raises(RuntimeError):
        main(["--debug", "sim", "--kernel", "spmv"])


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("fuseflow-hw ")
