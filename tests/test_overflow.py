"""Results the arithmetic brings into range are counted, never silent: sw_sim's per-node
overflow counts (wrapped integers, saturated fixed point) checked against exact Python
arithmetic, and how sim reports them."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from fuseflow.compiler import Program, compile_program, einsum, run_program
from fuseflow.kernels import example
from fuseflow.ir.numerics import Numerics
from fuseflow.ir.overflow import NumericOverflowError, NumericOverflowWarning
from fuseflow.ir.primitives import AluOp
from fuseflow.ir.tensor import TensorData
from fuseflow_cli.cli import main
from sw_sim import run_graph
from sw_sim.overflow import CountingNumerics, counting


@pytest.mark.parametrize("num", ["int16", "int32", "q8.8", "q16.16"])
@pytest.mark.parametrize("op", [AluOp.ADD, AluOp.SUB, AluOp.MUL])
def test_counting_numerics_same_results_and_counts_out_of_range(num, op) -> None:
    """Same results as the plain numerics; the count is the number of exact results (Python
    integers, rounded for fixed-point products) outside the format's range."""
    plain = Numerics.parse(num)
    arith = counting(plain)
    assert isinstance(arith, CountingNumerics)
    f, g = plain.binop(op), arith.binop(op)
    rnd = random.Random(7)
    expected = 0
    for _ in range(2000):
        a, b = rnd.randint(plain.lo, plain.hi), rnd.randint(plain.lo, plain.hi)
        if rnd.random() < 0.5:
            a, b = a >> rnd.randint(0, plain.width - 1), b >> rnd.randint(0, plain.width - 1)
        exact = {AluOp.ADD: a + b, AluOp.SUB: a - b, AluOp.MUL: a * b}[op]
        if op is AluOp.MUL and plain.frac:
            exact = (exact + (1 << (plain.frac - 1))) >> plain.frac
        expected += not plain.lo <= exact <= plain.hi
        assert g(a, b) == f(a, b), (a, b)
    assert arith.events == expected > 0


def test_float_numerics_count_nothing() -> None:
    num = Numerics.parse("float")
    assert counting(num) is num


def _spmv_big(value: int, n: int = 8, seed: int = 1):
    g, _, ops, _ = example("spmv", n, seed=seed, density=0.5)
    big = {t: np.where(v != 0, value, 0) for t, v in ops.items()}
    return g, {t: TensorData.from_dense(v, g.tensors[t].fmt) for t, v in big.items()}, big


def test_spmv_overflow_counts_match_exact_arithmetic() -> None:
    """Products that leave int32 counted in the multiplier; partial sums of the (wrapped)
    products that leave it counted in the reduction, in the order the rows are summed."""
    g, data, dense = _spmv_big(3 << 28)
    res = run_graph(g, data, numerics="int32", on_overflow="ignore")
    num = Numerics.integer(32)
    a, x = dense["B"], dense["c"]
    muls = sums = 0
    for i in range(a.shape[0]):
        acc = 0
        for j in np.flatnonzero(a[i]):
            p = int(a[i, j]) * int(x[j])
            if not x[j]:
                continue
            muls += not num.lo <= p <= num.hi
            s = acc + num.wrap(p)
            sums += not num.lo <= s <= num.hi
            acc = num.wrap(s)
    assert muls > 0
    by_kind = {}
    for node, k in res.overflows.items():
        kind = g.nodes[node].kind.value
        by_kind[kind] = by_kind.get(kind, 0) + k
    assert by_kind == {k: v for k, v in {"alu": muls, "reduce": sums}.items() if v}
    peak = max(abs(int(a[i, j]) * int(x[j])) for i, j in zip(*np.nonzero(a)))
    assert max(o.peak for o in res.overflow_records) == peak  # the largest exact product


def test_overflow_raises_by_default_naming_node_count_magnitude_and_format() -> None:
    g, data, _ = _spmv_big(3 << 28)
    with pytest.raises(NumericOverflowError) as exc:
        run_graph(g, data, numerics="int32")
    text = str(exc.value)
    assert "node 'mul' wrapped" in text and "into the int32 range" in text and "largest magnitude" in text
    assert {o.node for o in exc.value.overflows} >= {"mul"}
    with pytest.warns(NumericOverflowWarning, match="node 'mul' wrapped"):
        res = run_graph(g, data, numerics="int32", on_overflow="report")
    assert res.overflows["mul"] > 0
    with pytest.raises(ValueError, match="on_overflow='warn'"):
        run_graph(g, data, numerics="int32", on_overflow="warn")


def test_no_overflow_reports_none() -> None:
    g, data, _ = _spmv_big(3)
    assert run_graph(g, data, numerics="int32").overflows == {}


def test_fixed_point_saturation_counted_through_a_program() -> None:
    """A compiled program in Q8.8 whose products exceed the range: the saturations are
    reported per graph and node by run_program."""
    p = Program()
    a, b = p.tensor("A", (4, 4)), p.tensor("B", (4, 4))
    p.output(p.let("C", einsum("ik,kj->ij", a, b)))
    cp = compile_program(p)
    num = Numerics.parse("q8.8")
    big = np.full((4, 4), 100.0)
    data = {"A": num.quantize(big), "B": num.quantize(big)}
    with pytest.raises(NumericOverflowError, match=r"saturated .* into the q8\.8 range \(largest magnitude 10000\)"):
        run_program(cp, data, simulate=run_graph, numerics="q8.8")
    with pytest.warns(NumericOverflowWarning):
        res = run_program(cp, data, simulate=run_graph, numerics="q8.8", on_overflow="report")
    assert res.overflows and all("/" in k for k in res.overflows)
    assert sum(res.overflows.values()) >= 16  # every product 100 * 100 leaves Q8.8 (max 127.99)
    assert {o.node for o in res.overflow_records} == set(res.overflows)


def test_sim_cli_fails_on_wrapped_results_unless_reported(tmp_path, capsys) -> None:
    m = sp.random(8, 8, density=0.5, random_state=1, format="csr")
    m.data[:] = 2**30
    path = tmp_path / "big.mtx"
    scipy.io.mmwrite(str(path), m)
    assert main(["sim", "--kernel", "spmv", "--size", "8", "--data", str(path)]) == 1
    err = capsys.readouterr().err
    assert "error: overflow in graph" in err and "node 'mul' wrapped" in err and "largest magnitude" in err
    assert main(["sim", "--kernel", "spmv", "--size", "8", "--data", str(path), "--json"]) == 1
    captured = capsys.readouterr()
    rec = json.loads(captured.out)
    assert rec["overflows"].get("mul", 0) > 0 and "error: overflow" in captured.err
    # --on-overflow report: the run passes with a warning; the wrapped sums still fail numpy's check
    main(["sim", "--kernel", "spmv", "--size", "8", "--data", str(path), "--on-overflow", "report"])
    assert "warning: overflow in graph" in capsys.readouterr().out
    assert main(["sim", "--kernel", "spmv", "--size", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overflows"] == {}
