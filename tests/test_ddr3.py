"""The ECPIX-5's DDR3 (hw/litedram.py, docs/dram.md): LiteDRAM's MT41K256M16 behind ECP5DDRPHY
at 1:2, the engine's 16-bit user port through LiteDRAM's port converter.

The figures are checked against LiteDRAM's own module, PHY and init sequence and against the
board's pins (amaranth-boards' ``ddr3`` resource); the Verilator run (the real controller and
converter with LiteDRAM's SDRAM model given ECP5DDRPHY's settings) against numpy and sw_sim."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("litedram")

from fuseflow.kernels import example
from hw.config import HwConfig
from hw.litedram import (
    DRAM_BOARDS,
    INIT_WAITS,
    _module,
    _phy_settings,
    dram_board,
    dram_memory_model,
    dram_timings,
    generate_core,
    init_steps,
    level_pattern,
)


def _ecpix5_pins():
    from fpga.boards import get_board

    platform = get_board("ecpix5-85f").platform_class()
    ddr3 = next(r for r in platform.resources if r.name == "ddr3")
    return {s.name: len(getattr(s.ios[0], "names", None) or s.ios[0].p.names) for s in ddr3.ios}


def test_the_module_matches_the_boards_ddr3_pins():
    b = dram_board("ecpix5-85f")
    assert b is dram_board("ecpix5-45f") is DRAM_BOARDS["ecpix5"]
    assert (b.phy, b.rate, b.memory_name) == ("ECP5DDRPHY", "1:2", "ecpix5-ddr3")
    mod = _module(b)
    pins = _ecpix5_pins()
    g = mod.geom_settings
    assert (pins["a"], pins["ba"], pins["dq"]) == (g.addressbits, g.bankbits, 16)
    assert g.rowbits == pins["a"]  # the module's rows use every address pin: 2**15 rows
    t = dram_timings("ecpix5")
    assert t["size_bytes"] == 512 * 2**20  # 8 banks x 32768 rows x 1024 columns x 2 bytes


def test_phy_settings_are_ecp5ddrphys():
    from litedram.phy.ecp5ddrphy import ECP5DDRPHY
    from migen.genlib.record import Record

    b = dram_board("ecpix5")
    mod = _module(b)
    ps = _phy_settings(b, mod)
    g = mod.geom_settings
    pads = Record([("clk_p", 1), ("a", g.addressbits), ("ba", g.bankbits), ("ras_n", 1), ("cas_n", 1),
                   ("we_n", 1), ("cke", 1), ("odt", 1), ("dm", 2), ("dq", 16), ("dqs_p", 2)])
    ref = ECP5DDRPHY(pads, sys_clk_freq=b.sys_clk_hz).settings
    for field in ("memtype", "nphases", "dfi_databits", "cl", "cwl", "read_latency", "write_latency",
                  "rdphase", "wrphase", "read_leveling", "bitslips", "delays"):
        assert getattr(ps, field) == getattr(ref, field), field
    t = dram_timings("ecpix5")
    ts = mod.timing_settings
    # one BL8 burst of the x16 part is the controller's word: 128 bits; the engine's port 16 bits
    assert (t["native_bytes"], t["word_bytes"], t["nphases"]) == (16, 2, 2)
    assert (t["tRCD"], t["tRP"], t["tREFI"], t["tRFC"], t["tCCD"]) == (ts.tRCD, ts.tRP, ts.tREFI, ts.tRFC, ts.tCCD)
    assert t["row_bytes"] == mod.ncols * 2 and t["banks"] == 8
    m = dram_memory_model("ecpix5", fitted=False)
    assert m.name == "ecpix5-ddr3" and m.bytes_per_cycle == 2.0  # the port's word per cycle
    assert (m.banks, m.row_bytes, m.t_cl, m.t_rcd, m.t_rp) == (8, 2048, ps.cl, ts.tRCD + 1, ts.tRP)


def test_ddr3_init_steps():
    """JEDEC's DDR3 power-up through the sequencer: RESET# low for 200 us with CKE low, RESET#
    high for 500 us before CKE, then LiteDRAM's mode registers and ZQ calibration, each command
    followed by at least tZQinit (512 DRAM clocks = 256 controller cycles at 1:2)."""
    from litedram.init import get_sdram_phy_init_sequence

    b = dram_board("ecpix5")
    mod = _module(b)
    ps = _phy_settings(b, mod)
    clk = b.sys_clk_hz
    steps = init_steps(ps, mod.timing_settings, clk)
    first, release, cke = steps[:3]
    assert first["ctl"] == {"cke": 0, "odt": 0, "reset_n": 0} and first["wait"] >= 200e-6 * clk
    assert release["ctl"]["reset_n"] == 1 and release["ctl"]["cke"] == 0 and release["wait"] >= 500e-6 * clk
    assert cke["ctl"] == {"cke": 1, "odt": 1, "reset_n": 1}
    seq, _ = get_sdram_phy_init_sequence(ps, mod.timing_settings)
    cmds = [(s["address"], s["bank"]) for s in steps if s["cmd"] is not None]
    assert cmds == [(a, ba) for _, a, ba, cmd, _ in seq if not cmd.startswith("DFII_CONTROL")]
    assert [s["comment"] for s in steps if s["cmd"] is not None][-1] == "ZQ Calibration"
    assert all(s["wait"] >= 256 for s in steps if s["cmd"] is not None)
    assert all(s["ctl"]["reset_n"] and s["ctl"]["cke"] for s in steps if s["cmd"] is not None)
    # the generated core plays these steps: 1.2 ms and the commands at 50 MHz
    _, info = generate_core("ecpix5", True)
    assert info["init_steps"] == steps
    assert info["init_cycles"] > (200 + 500) * 1e-6 * clk
    # the SDR waits are the ones the ULX3S always had
    sdr = dram_board("ulx3s")
    sdr_steps = init_steps(_phy_settings(sdr, _module(sdr)), _module(sdr).timing_settings, sdr.sys_clk_hz)
    assert sdr_steps[0]["wait"] == 500 and min(s["wait"] for s in sdr_steps if s["cmd"]) == 64
    assert INIT_WAITS["DDR3"]["power_us"] == 200 and INIT_WAITS["DDR3"]["control_us"] == 500


def test_init_steps_refuse_an_unknown_memory_type():
    b = dram_board("ecpix5")
    mod = _module(b)
    ps = _phy_settings(b, mod)
    ps.memtype = "LPDDR4"
    with pytest.raises(ValueError, match="memory type 'LPDDR4' has no minimum waits"):
        init_steps(ps, mod.timing_settings, b.sys_clk_hz)


def test_the_core_gives_a_16_bit_port_through_litedrams_converter():
    text, info = generate_core("ecpix5", True)
    t = info["timings"]
    assert info["data_width"] == 16
    # the converter's port addresses 16-bit words: 3 bits more than the 128-bit native port
    native_aw = t["rowbits"] + t["bankbits"] + t["colbits"] - 3
    assert info["address_width"] == native_aw + 3
    assert "module litedram_core(" in text.replace(" (", "(") and "Auto-Generated by LiteX on" not in text
    assert generate_core.__wrapped__("ecpix5", True)[0] == text  # no date: equal text, equal build key


def test_the_real_phy_core_makes_its_clocks_and_has_every_pin():
    """The board core: ECP5DDRPHY on the pins, the PLL, edge clock and divider inside, the
    controller clock an output; the DDR3 pins as ports (data and strobes bidirectional); the
    read leveler inside, on the PHY's leveling controls (no port for them)."""
    text, info = generate_core("ecpix5", False)
    head = text[text.index("module litedram_core"):text.index(");", text.index("module litedram_core"))]
    for cell in ("EHXPLLL", "ECLKSYNCB", "CLKDIVF", "DDRDLLA", "DQSBUFM", "ODDRX2F", "IDDRX2DQA", "TRELLIS_IO"):
        assert f"{cell} " in text or f"{cell}(" in text, cell
    assert "output wire          sys_clk" in head and "input  wire          clk_in" in head
    assert "inout  wire   [15:0] sdram_dq" in head and "inout  wire    [1:0] sdram_dqs_p" in head
    assert info["own_clock"] and info["pins"]["sdram_dq"] == "io" and info["pins"]["clk_in"] == "i"
    assert "phy_" not in head and info["read_leveling"]["pattern"] == level_pattern(2)
    assert info["data_width"] == 16 and not info["sim"]


@pytest.mark.slow
def test_the_ecpix5_board_top_puts_every_ddr3_pin_on_the_core(tmp_path):
    """The board top's constraints: every DDR3 pin of amaranth-boards' resource at its site,
    the oscillator into the core, nothing buffered between the core and a DDR3 pin."""
    from fpga.board_top import DRAM_BAUD
    from fpga.synth import prepare
    from hw.litedram import DramGraphTop
    from rtl_sim.dram import dram_config

    g, _, _, _ = example("spmv", 8, seed=0)
    cfg = dram_config(g, HwConfig(), "ecpix5", min_bytes=0)
    top = DramGraphTop(g, cfg, "ecpix5", sim=False)
    prepare(top, "ecpix5-85f", tmp_path, baud=DRAM_BAUD)
    lpf = (tmp_path / "top.lpf").read_text()
    pins = _ecpix5_pins()
    for res, n in pins.items():
        names = ([f"ddr3_0__{res}__p"] if res in ("clk", "dqs") and n == 1 else
                 [f"ddr3_0__{res}__p[{i}]" for i in range(n)] if res == "dqs" else
                 [f"ddr3_0__{res}__io"] if n == 1 else [f"ddr3_0__{res}__io[{i}]" for i in range(n)])
        for name in names:
            assert f'LOCATE COMP "{name}"' in lpf, name
    assert 'LOCATE COMP "clk100_0__io" SITE "K23"' in lpf
    assert (tmp_path / "litedram_core.v").read_text() == top.dram_verilog
    il = (tmp_path / "top.il").read_text()
    assert "cell \\litedram_core" in il and "pin_ddr3" not in il  # no amaranth buffer on a DDR3 pin


def test_the_rtl_memory_name():
    from fuseflow_cli.cmd_rtl_dram import DRAM_MEMORIES

    assert DRAM_MEMORIES["ecpix5-ddr3"] == "ecpix5" and DRAM_MEMORIES["ulx3s-sdram"] == "ulx3s"


@pytest.mark.rtl
def test_spmv_in_ddr3_against_numpy_and_sw_sim():
    """One Verilator build (about a minute): SpMV with every tensor in the DDR3, the inputs
    loaded a word at a time through the converter (single 16-bit writes, masked into their
    128-bit bursts), read back by the engine in whole lines, the output written back in lines
    and read by the host a word at a time; two datasets (the second overwrites the first's
    words and re-reads them).  Values equal numpy's and sw_sim's; cycles within the preset's
    statistical bound."""
    from rtl_sim.dram import dram_config, run_graph_dram
    from sw_sim import run_graph

    runs = [example("spmv", 8, seed=s, density=0.4) for s in (0, 1)]
    g = runs[0][0]
    res = run_graph_dram(g, [r[1] for r in runs], board="ecpix5", min_bytes=0)
    cfg = dram_config(g, HwConfig(), "ecpix5", min_bytes=0)
    assert cfg.onchip == () and cfg.memory.name == "ecpix5-ddr3"
    for (_, data, _, expected), r in zip(runs, res):
        [out] = r.outputs
        assert r.status == 0
        assert np.array_equal(r.outputs[out].to_dense(), np.asarray(expected))
        sw = run_graph(g, data, memory=cfg.memory, onchip=cfg.onchip)
        assert np.array_equal(r.outputs[out].to_dense(), sw.outputs[out].to_dense())
        assert abs(r.cycles / sw.cycles - 1) < 0.15  # the preset's statistical bound, docs/dram.md


def _level_in_migen_sim(windows: list[set[tuple[int, int]]], max_cycles: int = 20000):
    """The read leveler (migen simulation) against a model of the PHY's read path: per lane a
    read delay and a bitslip register moved by the leveler's strobes as ECP5DDRPHY moves them
    (only for the selected lanes), and a memory whose reads come back right for a lane only when
    its (bitslip, delay) is in the lane's window, garbled otherwise.  Returns (done, choice per
    lane as (bitslip, delay), the settings the lanes hold at the end)."""
    from litedram.common import LiteDRAMNativePort
    from migen import Signal, run_simulation

    from hw.litedram import _read_leveler

    lanes = len(windows)
    port = LiteDRAMNativePort("both", 10, 8 * lanes)
    ctl = {"sel": Signal(lanes), "rdly_rst": Signal(), "rdly_inc": Signal(), "bitslip_rst": Signal(),
           "bitslip": Signal()}
    lev = _read_leveler(port, ctl, lanes, 4, 8)
    state = {"rdly": [5] * lanes, "bs": [3] * lanes, "mem": {}, "writes": [], "reads": [], "done": False,
             "bad_read": False}

    def strobes(sel: int):
        """The PHY's delay and bitslip registers of the selected lanes, moved by the strobes."""
        rdly_rst, rdly_inc = (yield ctl["rdly_rst"]), (yield ctl["rdly_inc"])
        bs_rst, bs_inc = (yield ctl["bitslip_rst"]), (yield ctl["bitslip"])
        for lane in (k for k in range(lanes) if sel >> k & 1):
            state["rdly"][lane] = 0 if rdly_rst else (state["rdly"][lane] + rdly_inc) % 8
            state["bs"][lane] = 0 if bs_rst else (state["bs"][lane] + bs_inc) % 4

    def bench():
        # every cycle: act on what the leveler sees in this cycle (values written here are seen
        # from the next one)
        yield lev.start.eq(1)
        yield lev.cmd_ready.eq(1)
        for cycle in range(max_cycles):
            sel = yield ctl["sel"]
            yield from strobes(sel)
            if (yield lev.cmd_valid) and (yield lev.cmd_ready):
                addr = yield lev.cmd_addr
                if (yield lev.cmd_we):
                    state["writes"].append(addr)
                else:
                    state["bad_read"] |= sel != 0  # a lane's strobe capture is paused while selected
                    state["reads"].append([cycle + 6, addr])
            if (yield lev.wdata_take):
                state["mem"][state["writes"].pop(0)] = yield lev.wdata
            yield lev.wdata_take.eq(len(state["writes"]) > 0)
            if state["reads"] and state["reads"][0][0] <= cycle:
                _, a = state["reads"].pop(0)
                word = state["mem"].get(a, 0)
                for lane in range(lanes):
                    if (state["bs"][lane], state["rdly"][lane]) not in windows[lane]:
                        word ^= 0x5A << (8 * lane)
                yield lev.rdata_valid.eq(1)
                yield lev.rdata.eq(word)
            else:
                yield lev.rdata_valid.eq(0)
            if (yield lev.done):
                state["done"] = True
                break
            yield
        choice = yield lev.choice
        state["choice"] = [((choice >> (16 * lane + 8)) & 0xFF, (choice >> (16 * lane)) & 0xFF)
                           for lane in range(lanes)]

    run_simulation(lev, bench())
    assert not state["bad_read"]
    return state["done"], state.get("choice"), list(zip(state["bs"], state["rdly"]))


def _reference_choice(window: set[tuple[int, int]]) -> tuple[int, int]:
    """The bitslip with the longest run of passing delays (the first on a tie), the run's middle."""
    best = (0, 0, 0)  # length, bitslip, start
    for b in range(4):
        d = 0
        while d < 8:
            if (b, d) in window:
                start = d
                while d < 8 and (b, d) in window:
                    d += 1
                if d - start > best[0]:
                    best = (d - start, b, start)
            d += 1
    return best[1], best[2] + (best[0] - 1) // 2


def test_read_leveling_finds_each_lanes_window():
    windows = [{(0, 0), (0, 1)} | {(2, d) for d in range(3, 7)},  # lane 0: bitslip 2, delays 3..6
               {(1, d) for d in range(1, 8)} | {(3, 2)}]  # lane 1: bitslip 1, delays 1..7
    done, choice, held = _level_in_migen_sim(windows)
    assert done
    assert choice == [_reference_choice(w) for w in windows] == [(2, 4), (1, 4)]
    assert held == choice  # each lane was set to its choice


@pytest.mark.slow
def test_read_leveling_keeps_the_port_closed_without_a_window():
    windows = [{(2, d) for d in range(8)}, set()]  # lane 1 never reads right
    done, _, held = _level_in_migen_sim(windows, max_cycles=5000)  # the scan and the pick take about 3,000
    assert not done
    assert held == [(3, 7), (3, 7)]  # the whole scan ran (its last setting) and no lane was set after it


@pytest.mark.rtl
@pytest.mark.slow
def test_gcn_whole_on_the_simulated_ecpix5(capsys):
    """The karate 2-layer GCN whole (both graphs in one top) on the simulated ECPIX-5-85F, its
    tensors in the DDR3 (the generated controller, converter and leveler with LiteDRAM's PHY
    model), driven over the UART: values equal sw_sim's and within PyTorch's bound, cycles within
    the preset's statistical bound; the second graph reads the first one's output from DRAM."""
    import json

    pytest.importorskip("torch")
    from fuseflow_cli.cli import main

    assert main(["run", "--board", "ecpix5-85f", "--sim", "--model", "gcn", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["check"] == "pass" and all(r["equal_to_sw_sim"].values())
    assert abs(r["cycles_ratio"] - 1) < 0.15
    assert "t4_relu" in r["graphs"][1]["from_dram"]


@pytest.mark.slow
def test_spmv_on_the_ecpix5_places_and_routes(tmp_path, capsys):
    """synth of an SpMV DRAM design for the ECPIX-5-85F (the real ECP5DDRPHY, its clocks, the
    leveler): yosys and nextpnr place and route it and meet the 50 MHz controller clock (about
    15 minutes on two cores)."""
    import json

    from fuseflow_cli.cli import main

    rc = main(["synth", "--board", "ecpix5-85f", "--kernel", "spmv", "--size", "16", "-o", str(tmp_path), "--json"])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0 and r["board"] == "ecpix5-85f" and r["board_clock_mhz"] == 50.0
    assert r["fmax_mhz"] >= 50.0
    used = r["nextpnr_utilisation"]
    assert used["DQSBUFM"]["used"] == 2 and used["DDRDLL"]["used"] == 1 and used["CLKDIVF"]["used"] == 1
    assert (tmp_path / "top.bit").is_file()


@pytest.mark.rtl
@pytest.mark.slow
def test_cli_rtl_spmv_in_ddr3(capsys):
    import json

    from fuseflow_cli.cli import main

    rc = main(["rtl", "--kernel", "spmv", "--size", "16", "--memory", "ecpix5-ddr3", "--dram-min-bytes", "0",
               "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["outputs_identical"] and out["check"] == "pass"
    assert out["controller"] == "LiteDRAM MT41K256M16 ECP5DDRPHY" and out["preset"]["name"] == "ecpix5-ddr3"
    assert {r["tensor"]: r["place"] for r in out["placement"]} == {"B": "dram", "c": "dram", "y": "dram"}
    assert abs(out["ratio"] - 1) < 0.15
