"""The board top (UART bridge + SpMV accelerator) in Verilator, driven by the host driver of
``fuseflow-hw run`` through a cocotb UART model: results equal numpy and sw_sim, and the
hardware cycle counter equals sw_sim's cycle count."""

import numpy as np
import pytest
from conftest import random_sparse

from fpga.board_sim import simulate_board
from fpga.board_top import host_view
from fpga.host import load_words
from fuseflow.kernels import KERNELS
from fuseflow.tensor import CSR, TensorData, TensorFormat
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
