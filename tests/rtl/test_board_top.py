"""The board top (UART bridge + SpMV accelerator) in Verilator, driven by the host driver of
``fuseflow-hw run`` through a cocotb UART model: results equal numpy and sw_sim, and the
hardware cycle counter equals sw_sim's cycle count."""

import numpy as np
import pytest
from sparse_data import random_sparse
from test_overflow_rtl import _spmv_reference

from fpga.board_sim import simulate_board
from fpga.board_top import host_view
from fpga.host import load_words
from fuseflow.kernels import KERNELS
from fuseflow.ir.overflow import NumericOverflowError
from fuseflow.ir.tensor import CSR, TensorData, TensorFormat
from fuseflow_cli.cli import main
from hw.elaborate import HwConfig
from sw_sim import run_graph

pytestmark = pytest.mark.rtl

DENSE1 = TensorFormat(("dense",))


def test_board_top_spmv_matches_sw_sim():
    n = 16
    rng = np.random.default_rng(7)
    cases = []
    for density in (
        0.25,
        0.05,
        0.6,
    ):  # typical, mostly empty rows, dense-ish (restart clears state)
        b = random_sparse(rng, (n, n), density)
        c = rng.integers(-100, 100, size=n)
        cases.append((b, c))
    cfg = HwConfig(max_nnz=(("B", 192),))
    g = KERNELS["spmv"](n)
    datasets = [
        {"B": TensorData.from_dense(b, CSR), "c": TensorData.from_dense(c, DENSE1)}
        for b, c in cases
    ]
    results = simulate_board(g, datasets, cfg=cfg)
    for (b, c), data, hw in zip(cases, datasets, results):
        sw = run_graph(g, data)
        assert np.array_equal(hw.outputs["y"].to_dense(), b @ c)
        assert np.array_equal(hw.outputs["y"].vals, sw.outputs["y"].vals)
        assert hw.cycles == sw.cycles, f"board cycle counter {hw.cycles}, sw_sim {sw.cycles}"


def test_board_top_refuses_data_beyond_capacity():
    n = 16
    g = KERNELS["spmv"](n)
    mmap, _ = host_view(g, HwConfig(max_nnz=(("B", 8),)))
    b = np.ones((n, n), dtype=np.int64)
    data = {
        "B": TensorData.from_dense(b, CSR),
        "c": TensorData.from_dense(np.ones(n, np.int64), DENSE1),
    }
    with pytest.raises(
        ValueError, match=r"tensor 'B' array '1.crd' has 256 entries; the hardware holds 8"
    ):
        load_words(g, data, mmap)


def test_cli_run_sim(capsys):
    # same graph and capacity as above: reuses the cached Verilator build
    code = main(
        [
            "run",
            "--board",
            "icebreaker",
            "--sim",
            "--kernel",
            "spmv",
            "--size",
            "16",
            "--max-nnz",
            "B=192",
            "--density",
            "0.3",
            "--seed",
            "11",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "y: equal to sw_sim" in out


def test_board_reports_the_overflow_flags(tmp_path, capsys):
    """The board host reads STATUS and the OVERFLOW words after each run: SpMV datasets whose
    products wrap, whose row sums wrap and that fit (one simulation, so each start clears the
    flags) flag the nodes exact Python arithmetic says leave int32, as sw_sim counts them;
    ``run --sim`` prints them and exits 1 on a wrapped result (same build as above)."""
    n = 16
    g = KERNELS["spmv"](n)
    cfg = HwConfig(max_nnz=(("B", 192),))
    mask = random_sparse(np.random.default_rng(3), (n, n), 0.25) != 0
    assert (mask.sum(axis=1) >= 2).any()
    cases = [(np.where(mask, 3 << 28, 0), np.full(n, 5)), (np.where(mask, 1, 0), np.arange(n)),
             (np.where(mask, 1 << 20, 0), np.full(n, 1 << 10))]
    refs = [_spmv_reference(b, c) for b, c in cases]
    assert "mul" in refs[0] and refs[1] == [] and refs[2] == ["reduce"]
    datasets = [{"B": TensorData.from_dense(b, CSR), "c": TensorData.from_dense(c, DENSE1)} for b, c in cases]
    with pytest.raises(NumericOverflowError, match="simulated board"):  # the flags raise by default
        simulate_board(g, datasets, cfg=cfg)
    for data, ref, hw in zip(datasets, refs, simulate_board(g, datasets, cfg=cfg, on_overflow="ignore")):
        sw = run_graph(g, data, on_overflow="ignore")
        assert hw.overflow == ref == sorted(sw.overflows) and bool(hw.status & 1) == bool(ref)
        assert np.array_equal(hw.outputs["y"].vals, sw.outputs["y"].vals)
    path = tmp_path / "big.npz"
    np.savez(path, B=cases[0][0], c=cases[0][1])
    code = main(["run", "--board", "icebreaker", "--sim", "--kernel", "spmv", "--size", str(n),
                 "--max-nnz", "B=192", "--data", str(path)])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 1, out
    assert "y: equal to sw_sim" in out and "hardware overflow flags: node 'mul'" in out
    assert "error: overflow in graph" in captured.err and "node 'mul' wrapped" in captured.err
    assert "MISMATCH" not in out
