"""Tensors in DRAM through a generated LiteDRAM controller (hw/litedram.py, rtl_sim/dram.py,
docs/dram.md).

The generator's figures are checked against LiteDRAM's own module definition and init
sequence; the Verilator runs (the real controller with LiteDRAM's SDRAM model) against numpy
and sw_sim."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("litedram")

import itertools

from fuseflow.ir.memory import MemPort
from fuseflow.kernels import example
from hw.build import to_verilog
from hw.config import HwConfig
from hw.elaborate import MemoryMap
from hw.litedram import (
    DramGraphTop,
    dram_board,
    dram_layout,
    dram_memory_model,
    dram_onchip,
    dram_timings,
    generate_core,
    placement_report,
)


def _litedram_module():
    from litedram import modules

    b = dram_board("ulx3s")
    return getattr(modules, b.module)(b.sys_clk_hz, b.rate)


def test_board_names():
    assert dram_board("ulx3s-85f") is dram_board("ulx3s")
    with pytest.raises(ValueError, match="no LiteDRAM DRAM for 'icebreaker'"):
        dram_board("icebreaker")


def test_timings_come_from_the_module_definition():
    mod = _litedram_module()
    t = dram_timings("ulx3s")
    ts = mod.timing_settings
    assert (t["tRCD"], t["tRP"], t["tREFI"], t["tRFC"]) == (ts.tRCD, ts.tRP, ts.tREFI, ts.tRFC)
    assert (t["banks"], t["rows"], t["cols"]) == (mod.nbanks, mod.nrows, mod.ncols)
    assert t["size_bytes"] == 32 * 2**20  # the ULX3S's 256 Mbit x16 part
    # the preset follows: one 16-bit word per cycle, the module's banks and rows, CL and tRCD/tRP
    m = dram_memory_model("ulx3s", fitted=False)
    assert m.bytes_per_cycle == t["word_bytes"] == 2
    assert (m.banks, m.row_bytes) == (mod.nbanks, mod.ncols * 2)
    assert (m.t_cl, m.t_rcd, m.t_rp) == (t["cl"], ts.tRCD + 1, ts.tRP)
    assert m.clock_mhz == 50.0
    assert (m.t_turn, m.t_switch) == (0, 0)  # not derived: fitted (DRAM_FITS)
    assert dram_memory_model("ulx3s", fit={"latency": 3}).latency == 3
    from hw.litedram import DRAM_FITS
    shipped = dram_memory_model("ulx3s")
    assert {k: getattr(shipped, k) for k in DRAM_FITS["ulx3s"]} == DRAM_FITS["ulx3s"]
    assert (shipped.t_cl, shipped.t_rcd, shipped.t_rp, shipped.banks) == (m.t_cl, m.t_rcd, m.t_rp, m.banks)


def test_generated_core_and_init_rom():
    from litedram.init import get_sdram_phy_init_sequence

    text, info = generate_core("ulx3s", True)
    assert "module litedram_core(" in text.replace(" (", "(")
    for port in ("sys_clk", "sys_rst", "init_done", "user_port0_cmd_valid", "user_port0_rdata_data",
                 "user_port0_wdata_ready"):
        assert port in text
    assert "Date" not in text.splitlines()[0:10] and generate_core("ulx3s", True)[0] == text
    assert info["data_width"] == 16
    # the sequencer plays LiteDRAM's own init sequence (mode registers, precharge, refreshes)
    from hw.litedram import _module, _phy_settings

    mod = _module(dram_board("ulx3s"))
    seq, _ = get_sdram_phy_init_sequence(_phy_settings(dram_board("ulx3s"), mod), mod.timing_settings)
    cmds = [(s["address"], s["bank"]) for s in info["init_steps"] if s["cmd"] is not None]
    assert cmds == [(a, ba) for _, a, ba, cmd, _ in seq if not cmd.startswith("DFII_CONTROL")]
    assert info["init_cycles"] > 200e-6 * 50e6  # at least the 200 us power-up wait


def test_placement_rule_and_layout():
    g, _data, _, _ = example("spmv", 16, seed=0, density=0.3)
    assert dram_onchip(g) == ()
    assert dram_onchip(g, ["c"]) == ("c",)
    # c (16 values of 4 bytes) and y are below 100 bytes; B is not
    assert dram_onchip(g, min_bytes=100) == ("c", "y")
    cfg = HwConfig(memory=dram_memory_model("ulx3s"))
    ports = cfg.mem_ports(g)
    top = DramGraphTop(g, cfg)
    lay = top.layout
    assert {p.tensor for p in ports} == {"B", "c", "y"}
    spans = sorted((s.base, s.base + s.nbytes) for s in lay.values())
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # no overlap
    row = dram_timings("ulx3s")["row_bytes"]
    assert all(s.base % row == 0 for s in lay.values())
    # each array starts in the bank the cycle model gives it
    for p in ports:
        name = f"{p.tensor}.vals" if p.array == "vals" else f"{p.tensor}.{p.level}.{p.array}"
        assert lay[name].base // row % 4 == p.array_id % 4
    for name, s in lay.items():
        r = top.mmap.region(name)
        assert s.nbytes >= r.depth * s.word_bytes + 32  # capacity plus the prefetched line
    rep = {r["tensor"]: r for r in placement_report(g, (), lay)}
    assert rep["B"]["place"] == "dram" and set(rep["B"]["arrays"]) == {"B.1.seg", "B.1.crd", "B.vals"}
    assert "module fuseflow_top" in to_verilog(top, "fuseflow_top")
    summary = top.summary()["dram"]
    assert summary["board"] == "ulx3s" and json.dumps(summary)


def test_layout_skips_unused_regions():
    mm = MemoryMap()
    mm.add("A.vals", 10, 32, "w")
    mm.add("B.vals", 10, 32, "w")
    p = MemPort(0, "n", "vals", "B", None, 0, 4, False)
    assert list(dram_layout(mm, [p], 32, 1024)) == ["B.vals"]


def test_dram_top_needs_the_board_model():
    g, _, _, _ = example("spmv", 8, seed=0)
    with pytest.raises(ValueError, match="not board 'ulx3s'"):
        DramGraphTop(g, HwConfig(memory="sdram"))


@pytest.mark.rtl
@pytest.mark.slow
def test_board_top_with_dram_over_the_uart():
    """A LiteDRAM Verilator build under cocotb (the default suite's is tests/test_board_model.py): the board top (UART bridge, line buffers, line
    engine, generated controller with LiteDRAM's SDRAM model) in cocotb, CSR x CSR with every
    tensor in DRAM.  The host loads the inputs over the UART into DRAM (checksummed transfers),
    reads the output back from DRAM, and runs two datasets in one simulation (the second
    re-reads DRAM); values against numpy and sw_sim, cycles against the board preset."""
    from fpga.board_sim import simulate_board
    from rtl_sim.dram import dram_config
    from sw_sim import run_graph

    runs = [example("spmm_csr", 8, seed=s, density=0.4) for s in (3, 4)]
    g = runs[0][0]
    cfg = dram_config(g, HwConfig(), "ulx3s")
    assert cfg.onchip == () and cfg.line_buffers  # every tensor in DRAM
    res = simulate_board(g, [r[1] for r in runs], cfg=cfg, dram="ulx3s")
    for (_, data, _, expected), r in zip(runs, res):
        [out] = r.outputs
        assert np.array_equal(r.outputs[out].to_dense(), np.asarray(expected))
        sw = run_graph(g, data, memory=cfg.memory, onchip=cfg.onchip)
        assert np.array_equal(r.outputs[out].to_dense(), sw.outputs[out].to_dense())
        assert abs(r.cycles / sw.cycles - 1) < 0.15  # the preset's statistical bound, docs/dram.md
        assert r.load_bytes > 0 and r.resent == 0


@pytest.mark.rtl
@pytest.mark.slow
def test_spmm_csr_in_dram_against_numpy_and_sw_sim():
    """One Verilator build: CSR x CSR, the inputs loaded into DRAM through the controller, the
    sparse output written back by its writers; two datasets (the second run re-reads DRAM)."""
    from rtl_sim.dram import dram_config, run_graph_dram
    from sw_sim import run_graph

    runs = [example("spmm_csr", 8, seed=s, density=0.4) for s in (3, 4)]
    g = runs[0][0]
    res = run_graph_dram(g, [r[1] for r in runs])
    cfg = dram_config(g, HwConfig())
    assert cfg.onchip == ()  # every tensor in DRAM
    for (_, data, _, expected), r in zip(runs, res):
        [out] = r.outputs
        assert np.array_equal(r.outputs[out].to_dense(), np.asarray(expected))
        sw = run_graph(g, data, memory=cfg.memory, onchip=cfg.onchip)
        assert np.array_equal(r.outputs[out].to_dense(), sw.outputs[out].to_dense())
        assert r.cycles > 0


@pytest.mark.rtl
@pytest.mark.slow
def test_cli_rtl_spmv_in_dram(capsys):
    from fuseflow_cli.cli import main

    rc = main(["rtl", "--kernel", "spmv", "--size", "16", "--memory", "ulx3s-sdram", "--dram-min-bytes", "0",
               "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["outputs_identical"] and out["check"] == "pass"
    assert {r["tensor"]: r["place"] for r in out["placement"]} == {"B": "dram", "c": "dram", "y": "dram"}
    assert 0.5 < out["ratio"] < 2


@pytest.mark.rtl
def test_banked_outputs_and_narrow_coordinates_in_dram():
    """One Verilator build: SpMM with its rows in 4 lanes, each lane writing its own bank of the
    compressed output (``Graph.banks``) through the line engine into DRAM, with 10-bit
    coordinate words (a word narrower than its 2-byte slot in a DRAM line: the written lines
    used to pack them at 10 bits, and the host read them back at 16).  Values against numpy
    and sw_sim, cycles against the board's preset."""
    from fuseflow.compiler.passes.par import parallelize
    from rtl_sim.dram import dram_config, run_graph_dram
    from sw_sim import run_graph

    runs = [example("spmm_dense", 16, seed=s, density=0.2) for s in (0, 1)]
    g = runs[0][0]
    parallelize(g, {"i": 4})
    assert list(g.banks) == ["C"]
    cfg = HwConfig(cw=10)
    res = run_graph_dram(g, [r[1] for r in runs], cfg=cfg)
    dcfg = dram_config(g, cfg)
    for (_, data, _, expected), r in zip(runs, res):
        assert np.array_equal(r.outputs["C"].to_dense(), np.asarray(expected))
        sw = run_graph(g, data, memory=dcfg.memory, onchip=dcfg.onchip)
        assert np.array_equal(r.outputs["C"].to_dense(), sw.outputs["C"].to_dense())
        assert abs(r.cycles / sw.cycles - 1) < 0.25  # the preset is statistical (docs/dram.md)
