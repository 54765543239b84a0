"""Values that do not fit the datapath never run silently: raw words outside the numerics'
range, fractions and infinities in an integer datapath are errors naming the tensor and index
(sw_sim, the RTL loaders, the model runner, the CLI), and the explicit saturating mode clamps
them and reports how many -- checked against numpy's own clipping."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.kernels import example
from fuseflow.models.plan import quantized_input
from fuseflow.ir.numerics import INT32, Numerics
from fuseflow.ir.samml import GraphError
from fuseflow.ir.tensor import DENSE2, TensorData, TensorFormat
from fuseflow.ir.validate import require_words, saturate_inputs, value_problems
from fuseflow_cli.cli import main
from sw_sim import run_graph

VEC = TensorFormat(("dense",))


def _with_vals(values):
    """SpMV 8x8 whose matrix ``B`` carries ``values`` (as many as it stores)."""
    g, data, _, _ = example("spmv", 8, seed=3, density=0.5)
    b = data["B"]
    vals = np.asarray(values)[: len(b.vals)]
    data["B"] = TensorData(b.shape, b.fmt, b.seg, b.crd, np.resize(vals, len(b.vals)))
    return g, data


@pytest.mark.parametrize(("vals", "num", "says"), [
    ([2**40], INT32, "vals[0] = 1099511627776 does not fit the int32 datapath"),
    ([1, -(2**31) - 1], INT32, "vals[1] = -2147483649 does not fit"),
    ([2**70], INT32, "vals[0] = 1180591620717411303424 does not fit"),
    ([0.5, 1.0], INT32, "vals[0] = 0.5 is not a whole number"),
    ([1.0, np.inf], INT32, "vals[1] is inf: values must be finite"),
    ([2**20], Numerics.parse("q8.8"), "does not fit the q8.8 datapath (raw words -32768..32767)"),
])
def test_sw_sim_refuses_values_outside_the_datapath(vals, num, says) -> None:
    g, data = _with_vals(np.array(vals, dtype=object if max(map(abs, vals)) > 2**62 else None))
    with pytest.raises(GraphError, match="tensor 'B'") as exc:
        run_graph(g, data, numerics=num)
    assert says in str(exc.value)


def test_whole_numbers_in_range_still_run_and_float_pass_through_stays_without_numerics() -> None:
    g, data = _with_vals([2**31 - 1, -(2**31)])  # inputs in range; their products wrap
    assert run_graph(g, data, numerics=INT32, on_overflow="ignore").cycles > 0
    g, data = _with_vals([0.5, 0.25])  # no explicit numerics: sw_sim's float tokens
    res = run_graph(g, data)
    x = data["c"].to_dense()
    np.testing.assert_allclose(res.outputs["y"].to_dense(), data["B"].to_dense() @ x)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-(2**45), 2**45), min_size=1, max_size=40), st.sampled_from([12, 16, 32]))
def test_saturate_inputs_matches_numpy_clip(values, width) -> None:
    num = Numerics.integer(width)
    g, data = _with_vals(values)
    stored = np.asarray(data["B"].vals)
    fixed, counts = saturate_inputs(g, data, num)
    expect = np.clip(stored, num.lo, num.hi)
    assert np.array_equal(fixed["B"].vals, expect)
    assert counts.get("B", 0) == int(np.count_nonzero(stored != expect))
    assert value_problems(fixed["B"], num) == []


def test_saturated_data_runs_like_numpy_on_the_clipped_matrix() -> None:
    num = Numerics.integer(16)
    g, data = _with_vals([40000, -3, 70000, 2])
    fixed, counts = saturate_inputs(g, data, num)
    assert counts["B"] > 0
    res = run_graph(g, fixed, numerics=num, on_overflow="ignore")
    clipped = np.clip(data["B"].to_dense(), num.lo, num.hi)
    ref = (clipped @ data["c"].to_dense()).astype(np.int64)
    wrapped = ((ref - num.lo) % (1 << 16)) + num.lo  # int16 arithmetic wraps (documented)
    assert np.array_equal(res.outputs["y"].to_dense(), wrapped)


@pytest.mark.parametrize(("values", "width", "signed", "says"), [
    ([1, 2**15], 16, True, "entry 1 = 32768 does not fit a 16-bit signed word (-32768..32767)"),
    ([-1], 10, False, "entry 0 = -1 does not fit a 10-bit unsigned word (0..1023)"),
    ([1.5], 32, True, "entry 0 = 1.5 is not a whole number"),
    (["a"], 32, True, "entries must be numbers"),
])
def test_memory_image_words_are_checked(values, width, signed, says) -> None:
    with pytest.raises(ValueError, match="B vals") as exc:
        require_words(values, width, signed=signed, where="B vals")
    assert says in str(exc.value)
    require_words([0, 1, 2], width, signed=signed, where="B vals")


def test_model_inputs_outside_fixed_point_range_are_an_error_or_counted() -> None:
    num = Numerics.parse("q8.8")
    a = np.array([[1.0, 200.0], [-129.0, 0.25]])
    with pytest.raises(ValueError, match=r"input 'x': 2 value\(s\) outside the q8.8 range"):
        quantized_input("x", a, a.shape, num, DENSE2)
    counts: dict[str, int] = {}
    td = quantized_input("x", a, a.shape, num, DENSE2, saturate=True, saturated=counts)
    assert counts == {"x": 2}
    expect = np.clip(np.floor(a * 256 + 0.5), num.lo, num.hi)
    assert np.array_equal(td.to_dense(), expect)
    edge = np.array([num.from_raw(num.hi), num.from_raw(num.lo)])  # exactly the bounds: fine
    assert np.array_equal(quantized_input("e", edge, (2,), num, VEC).to_dense(), [num.hi, num.lo])


def _npz_graph(tmp_path, big):
    g, data, _, _ = example("spmv", 8, seed=1, density=0.5)
    path = tmp_path / "spmv.json"
    g.save(path)
    arrays = {t: d.to_dense() for t, d in data.items()}
    arrays["c"] = arrays["c"].astype(np.int64)
    arrays["c"][0] = big
    np.savez(tmp_path / "data.npz", **arrays)
    return path, tmp_path / "data.npz", arrays


def test_cli_names_the_value_and_saturate_reports_the_count(tmp_path, capsys) -> None:
    graph, npz, arrays = _npz_graph(tmp_path, 2**40)
    assert main(["sim", str(graph), "--data", str(npz)]) == 2
    err = capsys.readouterr().err
    assert "tensor 'c'" in err and "1099511627776 does not fit the int32 datapath" in err
    assert "Traceback" not in err
    # c[0] clamped to 2**31 - 1: its products with B's column 0 (other than 0 and 1) then wrap,
    # an error by default (exit status 1), a warning with --on-overflow report (exit status 0)
    hi = 2**31 - 1
    products = [int(b) * hi for b in arrays["B"][:, 0] if b]
    wraps = sum(not -hi - 1 <= p <= hi for p in products)
    code = main(["sim", str(graph), "--data", str(npz), "--saturate", "--json"])
    rec = json.loads(capsys.readouterr().out)
    assert rec["saturated"] == {"c": 1}
    assert rec["overflows"].get("mul", 0) == wraps and code == (1 if wraps else 0)
    assert main(["sim", str(graph), "--data", str(npz), "--saturate", "--on-overflow", "report"]) == 0
    out = capsys.readouterr().out
    assert "saturated: 1 value(s) of 'c' clamped to the int32 range" in out
    assert ("warning: overflow in graph" in out) == bool(wraps)


def test_cli_refuses_fractions_in_an_integer_graph(tmp_path, capsys) -> None:
    graph, npz, arrays = _npz_graph(tmp_path, 0)
    arrays["c"] = arrays["c"] + 0.5
    np.savez(npz, **arrays)
    assert main(["sim", str(graph), "--data", str(npz)]) == 2
    assert "is not a whole number" in capsys.readouterr().err


def test_run_model_refuses_data_it_would_ignore():
    """``run_model(data=...)`` overrides inputs; a name that is no input, or a new value for an
    input fixed at trace time (an integer edge_index compiled in as constants), is an error
    instead of a run on the traced values."""
    pytest.importorskip("torch")
    import torch

    from fuseflow.models.frontend import trace
    from fuseflow.models.plan import compile_model, run_model
    from sw_sim import run_graph

    class Agg(torch.nn.Module):
        def forward(self, x, edge_index):
            out = torch.zeros_like(x)
            return out.index_add(0, edge_index[1], x[edge_index[0]])

    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    x = torch.arange(6.0).reshape(3, 2)
    ir = trace(Agg(), {"x": x, "edge_index": ei})
    cm = compile_model(ir, "partial")
    ok = run_model(cm, {"x": x.numpy() * 2, "edge_index": ei.numpy()}, simulate=run_graph)
    want = torch.zeros_like(x).index_add(0, ei[1], (2 * x)[ei[0]]).numpy()
    assert np.allclose(next(iter(ok.outputs.values())), want)
    with pytest.raises(ValueError, match="was fixed when the model was traced"):
        run_model(cm, {"edge_index": ei.numpy()[:, ::-1].copy()}, simulate=run_graph)
    with pytest.raises(ValueError, match="has no such input"):
        run_model(cm, {"nosuch": np.zeros(3)}, simulate=run_graph)
