"""Overflow is never silent in RTL: a writer whose output does not fit its memory is an error
in every runner (its length register counts past the region depth while the address wraps,
and the STATUS overrun bit is set); a result the arithmetic wraps or saturates sets the sticky
flag of its node, which every runner reads from the host port and which equals sw_sim's
per-node counts and an exact reference computed here."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from test_ml_primitives_sw import csr_graph

from fuseflow.ir.numerics import Numerics
from fuseflow.ir.overflow import NumericOverflowError
from fuseflow.ir.samml import NodeKind
from fuseflow.ir.tensor import CSR, TensorData
from fuseflow.kernels import example
from fuseflow_cli import cmd_rtl
from fuseflow_cli.cli import main
from hw.elaborate import HwConfig
from rtl_sim import ToolchainError
from rtl_sim import run_graph as rtl_run
from rtl_sim import run_graph_batch as rtl_run_batch
from sw_sim import run_graph

pytestmark = pytest.mark.rtl

# the cocotb runner's twin of each test behind -m slow (about 2.5 minutes): the native runner
# reads the same STATUS / OVERFLOW registers, and the cocotb runner is in test_native_rtl's CLI test
RUNNERS = ["native", pytest.param("cocotb", marks=pytest.mark.slow)]


@pytest.mark.parametrize("runner", RUNNERS)
def test_output_larger_than_its_memory_is_an_error(runner) -> None:
    g, data, ops, _ = example("add", 8, seed=3, density=0.5)
    [out] = [t for t, s in g.tensors.items() if s.role.value == "output"]
    nnz = len(run_graph(g, data).outputs[out].vals)
    union = np.logical_or.reduce([v != 0 for v in ops.values()])
    assert nnz == int(union.sum()) > 4  # sw_sim writes every position either operand stores
    cfg = HwConfig(max_nnz=((out, 4),))
    with pytest.raises(ToolchainError, match=rf"output array '{out}\.[0-9a-z.]+' reports \d+ entries but its "
                                             r"memory holds 4: its writer overflowed"):
        rtl_run(g, data, cfg=cfg, runner=runner)


# ------------------------------------------------------------------------ arithmetic overflow
HI, LO = 2**31 - 1, -(2**31)


def _fits(v: int, width: int = 32) -> bool:
    return -(1 << (width - 1)) <= v < 1 << (width - 1)


def _wrap(v: int, width: int = 32) -> int:
    half = 1 << (width - 1)
    return (v + half) % (2 * half) - half


def _spmv_reference(b: np.ndarray, c: np.ndarray) -> list[str]:
    """The nodes of the spmv kernel whose results leave int32, from exact Python integers: a
    product (``mul``), or a partial row sum of the wrapped products in column order (``reduce``)."""
    nodes = set()
    for i in range(b.shape[0]):
        acc = 0
        for j in np.flatnonzero(b[i]):
            p = int(b[i, j]) * int(c[j])
            if not _fits(p):
                nodes.add("mul")
            if not _fits(acc + _wrap(p)):
                nodes.add("reduce")
            acc = _wrap(acc + _wrap(p))
    return sorted(nodes)


def _spmv_data(g, b: np.ndarray, c: np.ndarray) -> dict:
    return {"B": TensorData.from_dense(b, g.tensors["B"].fmt), "c": TensorData.from_dense(c, g.tensors["c"].fmt)}


@pytest.mark.parametrize("runner", RUNNERS)
def test_rtl_flags_exactly_the_nodes_that_wrap(runner) -> None:
    """SpMV at int32 on datasets whose products wrap, whose row sums wrap, and that fit, in one
    simulation (the start of each run clears the flags): the nodes the RTL's status registers
    flag are the ones exact arithmetic says leave int32, and the ones sw_sim counts."""
    g, _, ops, _ = example("spmv", 8, seed=2, density=0.5)
    mask = ops["B"] != 0
    assert (mask.sum(axis=1) >= 2).any()
    c = np.ones(8, dtype=np.int64)
    cases = [(np.where(mask, 3 << 28, 0), np.full(8, 5)),  # products wrap (sums of wrapped products too)
             (np.where(mask, 1 << 20, 0), np.full(8, 1 << 10)),  # products fit, sums of two reach 2**31
             (np.where(mask, 3, 0), c),  # nothing wraps
             (np.where(mask, HI, 0), np.where(np.arange(8) % 2, -1, 1))]  # +-HI: sums may wrap, products fit
    refs = [_spmv_reference(b, x) for b, x in cases]
    assert refs[0] and "mul" in refs[0] and refs[1] == ["reduce"] and refs[2] == []
    datasets = [_spmv_data(g, b, x) for b, x in cases]
    results = rtl_run_batch(g, datasets, runner=runner, on_overflow="ignore")
    for (b, x), data, ref, hw in zip(cases, datasets, refs, results):
        sw = run_graph(g, data, numerics="int32", on_overflow="ignore")
        assert hw.overflow == ref == sorted(sw.overflows), (b, x)
        assert bool(hw.status & 1) == bool(ref) and not hw.status & 2
        assert np.array_equal(hw.outputs["y"].to_dense(), sw.outputs["y"].to_dense())
        assert hw.cycles == sw.cycles


def test_accumulator_wrap_in_a_16_bit_build() -> None:
    """SpMM (Gustavson: mul, then the order-1 sparse accumulator) built with 16-bit values: the
    accumulator flagged when a sum over k leaves int16 while every product fits, the multiplier
    when a product does; exact Python integers decide, as sw_sim in int16."""
    n = 6
    g, _, ops, _ = example("spmm_csr", n, seed=4, density=0.6)
    ma, mb = ops["A"] != 0, ops["B"] != 0
    cfg = HwConfig(vw=16)

    def reference(a, b) -> list[str]:
        nodes = set()
        for i in range(n):
            for j in range(n):
                acc = None
                for k in range(n):
                    if a[i, k] and b[k, j]:
                        p = int(a[i, k]) * int(b[k, j])
                        nodes |= set() if _fits(p, 16) else {"mul"}
                        if acc is not None and not _fits(acc + _wrap(p, 16), 16):
                            nodes.add("spacc")
                        acc = _wrap(p, 16) if acc is None else _wrap(acc + _wrap(p, 16), 16)
        return sorted(nodes)

    cases = [(np.where(ma, 150, 0), np.where(mb, 150, 0)),  # 22500 fits, two of them do not
             (np.where(ma, 200, 0), np.where(mb, -200, 0)),  # -40000
             (np.where(ma, 3, 0), np.where(mb, 7, 0))]
    refs = [reference(a, b) for a, b in cases]
    assert refs[0] == ["spacc"] and "mul" in refs[1] and refs[2] == []
    datasets = [{"A": TensorData.from_dense(a, g.tensors["A"].fmt), "B": TensorData.from_dense(b, g.tensors["B"].fmt)}
                for a, b in cases]
    for data, ref, hw in zip(datasets, refs, rtl_run_batch(g, datasets, cfg=cfg, runner="native", on_overflow="ignore")):
        sw = run_graph(g, data, numerics="int16", on_overflow="ignore")
        assert hw.overflow == ref == sorted(sw.overflows)
        assert np.array_equal(hw.outputs["C"].to_dense(), sw.outputs["C"].to_dense())


def _unary_graph(n: int, m: int):
    """C = exp(4 A) elementwise over a CSR matrix: a ``mul_scalar`` node ``scale`` and an
    ``exp`` node ``expo``."""
    def body(b, a):
        scaled = b.node(NodeKind.ALU, "scale", {"a": a}, op="mul_scalar", scalar=4.0)["val"]
        return b.node(NodeKind.ALU, "expo", {"a": scaled}, op="exp")["val"]

    return csr_graph("exp_scaled", n, m, CSR, body)


@pytest.mark.parametrize("runner", RUNNERS)
def test_fixed_point_saturation_in_unary_ops(runner) -> None:
    """Q8.8 (range +-128): ``4 x`` saturates for |x| >= 32, ``exp`` saturates above ln 128 ~ 4.85
    (numpy decides from the values, far from both thresholds); the flagged nodes are those,
    as sw_sim counts them."""
    num = Numerics.parse("q8.8")
    g = _unary_graph(3, 4)
    pos = np.array([[1, 0, 1, 0], [0, 1, 1, 0], [1, 0, 0, 1]], dtype=bool)
    cases = [np.where(pos, 0.5, 0.0), np.where(pos, 2.0, 0.0), np.where(pos, -40.0, 0.0),
             np.where(pos, 40.0, 0.0), np.where(pos, -1.0, 0.0)]

    def reference(a: np.ndarray) -> list[str]:
        x = a[pos] * 4
        nodes = ["scale"] if (np.abs(x) >= 128).any() else []
        return nodes + (["expo"] if (np.exp(np.clip(x, -128, 127.99)) >= 128).any() else [])

    refs = [reference(a) for a in cases]
    assert refs == [[], ["expo"], ["scale"], ["scale", "expo"], []]
    datasets = [{"A": TensorData.from_dense(num.quantize(a), CSR)} for a in cases]
    results = rtl_run_batch(g, datasets, cfg=HwConfig.for_numerics(num), runner=runner, on_overflow="ignore")
    for data, ref, hw in zip(datasets, refs, results):
        sw = run_graph(g, data, numerics=num, on_overflow="ignore")
        assert hw.overflow == ref == list(sw.overflows)
        assert np.array_equal(hw.outputs["C"].vals, sw.outputs["C"].vals)


def _matrix(tmp_path, name: str, value: int) -> str:
    """An 8x8 sparse integer matrix file (``--data``; the add kernel computes A + A)."""
    m = sp.random(8, 8, density=0.4, random_state=5, format="csr")
    m.data[:] = value
    path = tmp_path / f"{name}.npz"
    sp.save_npz(path, m)
    return str(path)


def test_rtl_cli_reports_the_flagged_nodes(tmp_path, capsys) -> None:
    """``rtl --json`` has ``rtl_overflow``; an addition that wraps (A + A with entries near
    2**31: exact sums above int32) exits 1 and names the node in the text; the same build on
    small values flags nothing and exits 0."""
    big, small = _matrix(tmp_path, "big", HI - 3), _matrix(tmp_path, "small", 9)
    assert not _fits(2 * (HI - 3))
    argv = ["rtl", "--kernel", "add", "--size", "8"]
    assert main([*argv, "--data", big, "--json"]) == 1
    rec = json.loads(capsys.readouterr().out)
    assert rec["rtl_overflow"] == ["add"] and set(rec["overflows"]) == {"add"}
    assert rec["outputs_identical"] is True  # the RTL wraps as sw_sim does
    assert main([*argv, "--data", big]) == 1
    captured = capsys.readouterr()
    assert "RTL overflow flags: node 'add'" in captured.out
    assert "error: overflow in graph" in captured.err and "node 'add' wrapped" in captured.err
    with pytest.raises(NumericOverflowError, match=r"\(RTL\): node 'add' wrapped"):  # the API raises on the flags
        g, data, _, _ = example("add", 8)
        rtl_run(g, {t: TensorData.from_array(sp.load_npz(big).toarray(), d.fmt) for t, d in data.items()},
                runner="native")
    assert main([*argv, "--data", small, "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["rtl_overflow"] == [] and rec["overflows"] == {}


def test_rtl_cli_mismatch_names_the_node(tmp_path, capsys, monkeypatch) -> None:
    """Where the RTL flags a node sw_sim did not count (or the reverse), ``rtl`` exits 1 with a
    line naming it (the RTL result replaced by one that flags the wrong node)."""
    real = cmd_rtl.rtl_run

    def wrong(*args, **kw):
        res = real(*args, **kw)
        res.overflow = ["add"] if not res.overflow else []
        return res

    monkeypatch.setattr(cmd_rtl, "rtl_run", wrong)
    argv = ["rtl", "--kernel", "add", "--size", "8", "--data"]
    assert main([*argv, _matrix(tmp_path, "small", 9)]) == 1
    assert "overflow MISMATCH: the RTL flagged node 'add', where sw_sim brought no result into range" in \
        capsys.readouterr().out
    assert main([*argv, _matrix(tmp_path, "big", HI - 3)]) == 1
    assert "in node 'add', which the RTL did not flag" in capsys.readouterr().out
