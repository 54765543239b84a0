"""Real synthesis, place and route with yosys + nextpnr (YoWASP) for the iCE40UP5K (iCEBreaker):
a small SpMV board top builds, fits and yields a bitstream and a report; an oversized one fails
with a message naming the exhausted resource and its numbers."""

import json
import re

import pytest

from fpga.board_top import config_from_json
from fpga.boards import get_board
from fpga.families import ICE40
from fpga.synth import (
    DoesNotFit,
    SynthError,
    SynthReport,
    ToolMissing,
    _raise_failure,
    resolve_tools,
    synthesize,
)
from fuseflow.kernels import KERNELS
from hw.elaborate import GraphTop, HwConfig

pytestmark = pytest.mark.synth

UP5K_BITSTREAM_BYTES = 104_090  # iCE40UP5K configuration image size (Lattice TN1248 / icepack)
UP5K = {"LC": 5280, "BRAM": 30, "DSP": 8}  # iCE40UP5K datasheet: logic cells, EBRs, SB_MAC16s


@pytest.fixture(scope="module")
def ice40_tools():
    try:
        resolve_tools(ICE40.tools)
    except ToolMissing as exc:
        pytest.skip(str(exc))


def test_small_spmv_fits_icebreaker(ice40_tools, tmp_path):
    g = KERNELS["spmv"](8)
    report = synthesize(GraphTop(g, HwConfig(max_nnz=(("B", 32),))), "icebreaker", tmp_path)
    assert (tmp_path / "top.bin").stat().st_size == UP5K_BITSTREAM_BYTES
    for name, avail in UP5K.items():
        assert report.resources[name].available == avail
    assert 0 < report.resources["LC"].used <= UP5K["LC"]
    assert 0 < report.resources["LUT"].used <= report.resources["LC"].used
    assert 0 < report.resources["FF"].used <= report.resources["LC"].used
    assert 0 < report.resources["BRAM"].used <= UP5K["BRAM"]
    assert report.resources["DSP"].used >= 1  # the val multiplier maps to SB_MAC16
    assert report.clock_mhz == pytest.approx(12.0, rel=1e-3)  # the iCEBreaker oscillator
    assert report.fmax_mhz > 0
    saved = json.loads((tmp_path / "synth_report.json").read_text())
    assert SynthReport.from_json(saved) == report
    assert json.loads((tmp_path / "graph.json").read_text())["name"] == "spmv"

    design = json.loads((tmp_path / "design.json").read_text())
    assert config_from_json(design["hw_config"]) == HwConfig(max_nnz=(("B", 32),))
    table = report.table()
    assert "Fmax" in table and "BRAM" in table


def test_oversized_design_names_the_resource(ice40_tools, tmp_path):
    g = KERNELS["spmv"](
        64
    )  # no max_nnz: B holds all 4096 dense positions, in 16- and 32-bit memories
    with pytest.raises(DoesNotFit) as info:  # (fpga.capacity refuses it earlier by default)
        synthesize(GraphTop(g, HwConfig()), "icebreaker", tmp_path, precheck=False)
    msg = str(info.value)
    m = re.search(r"BRAM \(ICESTORM_RAM\): needs (\d+), iCE40UP5K has 30", msg)
    assert m, msg
    # at least the 4096 x 32-bit values of B alone need 4096 * 32 / 4096 = 32 EBRs of 4 kbit
    assert int(m.group(1)) >= 32


def test_placement_failure_says_utilisation_limit(tmp_path):
    """nextpnr's "Unable to find legal placement" (a design near the limit that still packs)
    becomes a message with the utilisation figures, not a log tail."""

    (tmp_path / "top.tim").write_text(
        "Info: Device utilisation:\n"
        "Info: \t         ICESTORM_LC:    5067/   5280    95%\n"
        "Info: \t        ICESTORM_RAM:      28/     30    93%\n"
        "Info: \t               SB_IO:       5/     39    12%\n"
        "ERROR: Unable to find legal placement for all cells, design is probably at utilisation limit.\n"
    )
    with pytest.raises(SynthError) as info:
        _raise_failure(get_board("icebreaker"), tmp_path, "top", "")
    msg = str(info.value)
    assert "could not place the design on the icebreaker (iCE40UP5K)" in msg
    assert "ICESTORM_LC 5067/5280 (95 %)" in msg and "ICESTORM_RAM 28/30 (93 %)" in msg
    assert "SB_IO" not in msg  # only the resources at 80 % or more
