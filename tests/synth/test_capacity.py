"""The on-chip capacity check made before elaboration (fpga.capacity): the bits it counts equal
an independent count from the tensor shapes, it refuses what cannot fit (naming the device, the
need and the tensors), never what fits, and the commands that elaborate a board top refuse at once
with exit status 2."""

from __future__ import annotations

import pytest

from fpga.boards import BOARDS, get_board
from fpga.capacity import DEVICE_RAM, TooLargeForChip, check_fits, onchip_bits
from fuseflow.kernels import KERNELS
from fuseflow_cli.cli import main
from hw.elaborate import HwConfig


def test_every_board_device_has_a_ram_record():
    # a device without one would pass every design on to synthesis unchecked
    assert {b.device for b in BOARDS.values()} <= set(DEVICE_RAM)


def test_bits_equal_a_count_from_the_shapes():
    n = 64
    g = KERNELS["spmv"](n)  # y = B (CSR, n x n, no nnz bound) . c
    cfg = HwConfig()
    # B: a segment array of n + 1 entries and n * n coordinates (crd width) and values (value width)
    want_b = (n + 1) * cfg.cw + n * n * cfg.cw + n * n * cfg.vw
    assert onchip_bits(g, cfg) == {"B": want_b, "c": n * cfg.vw, "y": n * cfg.vw}
    bounded = HwConfig(max_nnz=(("B", 100),))
    assert onchip_bits(g, bounded)["B"] == (n + 1) * cfg.cw + 100 * (cfg.cw + cfg.vw)


def test_refuses_what_cannot_fit_naming_the_tensors():
    g = KERNELS["spmv"](64)
    cfg = HwConfig()
    with pytest.raises(TooLargeForChip) as info:
        check_fits(g, cfg, get_board("icebreaker"))
    msg = str(info.value)
    need = sum(onchip_bits(g, cfg).values())
    assert "icebreaker (iCE40UP5K)" in msg and f"{need / 1024:.1f} kbit" in msg
    assert "120.0 kbit (30 block RAMs of 4 kbit)" in msg
    assert msg.index("largest: B ") < msg.index("; c ")  # the largest tensor first
    assert "--max-nnz" in msg
    check_fits(g, cfg, get_board("ulx3s-85f"))  # the same graph fits an ECP5-85F


def test_passes_what_fits():
    # the iCEBreaker demo of the README: SpMV 64 x 64 with at most 512 nonzeros in B
    check_fits(KERNELS["spmv"](64), HwConfig(max_nnz=(("B", 512),)), get_board("icebreaker"))


@pytest.mark.parametrize("command", [
    ["synth", "--kernel", "spmv", "--size", "2048", "--board", "ulx3s-85f", "--no-dram", "-o", "{out}"],
    ["run", "--kernel", "spmv", "--size", "2048", "--board", "ulx3s-85f", "--no-dram", "--sim"],
])
def test_commands_refuse_before_elaborating(command, tmp_path, capsys):
    assert main([a.format(out=tmp_path / "o") for a in command]) == 2
    err = capsys.readouterr().err
    assert "does not fit the ulx3s-85f (LFE5U-85F)" in err and "largest: B " in err
    assert not (tmp_path / "o").exists()  # nothing elaborated, nothing written


def test_dram_takes_what_the_chip_cannot_and_its_own_size_is_checked(tmp_path, capsys):
    """On a board with DRAM the tensors placed there need no block RAM; the DRAM's size bounds
    them instead (SpMV 2048: B's dense capacity, counted here from the shapes: 4 Mi values of 4
    bytes and 4 Mi coordinates of 2 bytes, is 24 MB of the ULX3S's 32 MB; 4096 needs 96 MB)."""
    from fpga.capacity import dram_bytes
    from rtl_sim.dram import dram_config

    g = KERNELS["spmv"](2048)
    cfg = dram_config(g, HwConfig(), "ulx3s", min_bytes=64)
    check_fits(g, cfg, get_board("ulx3s-85f"), dram_size=32 << 20)  # the same graph as above fits
    assert dram_bytes(g, cfg)["B"] >= 2048 * 2048 * (4 + 2)
    big = KERNELS["spmv"](4096)
    with pytest.raises(TooLargeForChip, match=r"ulx3s-85f's DRAM: its tensors there need 9\d\.\d MB"):
        check_fits(big, dram_config(big, HwConfig(), "ulx3s"), get_board("ulx3s-85f"), dram_size=32 << 20)
    assert main(["synth", "--kernel", "spmv", "--size", "4096", "--board", "ulx3s-85f",
                 "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "ulx3s-85f's DRAM" in err and "32 MB" in err and not (tmp_path / "o").exists()


def test_dram_boards_default_to_an_exact_2_mbaud_and_refuse_an_inexact_divisor(tmp_path, capsys):
    """With DRAM the bridge runs at the controller's 50 MHz: 2 Mbaud is 25 cycles a bit; 2.7 Mbaud
    would be 18.5 (2.5 % off 19), refused before anything is built."""
    from fuseflow_cli.board_args import baud_of

    class A:
        baud = None

    assert baud_of(A, object()) == 2_000_000 and 50e6 / 2_000_000 == 25
    assert main(["synth", "--kernel", "spmv", "--size", "8", "--board", "ulx3s-85f", "--baud", "2700000",
                 "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "baud rate 2700000" in err and "2.5% off" in err and "50 MHz" in err
