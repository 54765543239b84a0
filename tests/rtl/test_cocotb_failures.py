"""The project's cocotb runs report a testbench failure as a failed cocotb test: the
testbench raises inside cocotb and ``rtl_sim.toolchain.run_cocotb`` raises the failure cocotb
recorded in ``results.xml`` (no side-channel error file)."""

from __future__ import annotations

import pytest

from fuseflow.kernels import KERNELS, example
from rtl_sim import run_graph
from rtl_sim.native import RtlTimeout
from rtl_sim.toolchain import ToolchainError, cocotb_failure

PASSED = ('<testsuites><testsuite name="m" tests="1"><testcase classname="m" name="t" time="0.1">'
          '<properties/></testcase></testsuite></testsuites>')
FAILED = ('<testsuites><testsuite name="m" tests="2"><testcase classname="m" name="ok"/>'
          '<testcase classname="m" name="t"><failure message="x != y" type="AssertionError">'
          'Traceback: line 3</failure></testcase></testsuite></testsuites>')


def test_cocotb_failure_reads_results_xml(tmp_path):
    xml = tmp_path / "results.xml"
    xml.write_text(PASSED)
    assert cocotb_failure(xml) is None
    xml.write_text(FAILED)
    assert cocotb_failure(xml) == "t: AssertionError: x != y\nTraceback: line 3"
    xml.write_text("<testsuites/>")
    with pytest.raises(ToolchainError, match="holds no test"):
        cocotb_failure(xml)
    with pytest.raises(ToolchainError, match="cocotb wrote no missing.xml"):
        cocotb_failure(tmp_path / "missing.xml")


@pytest.mark.rtl
def test_a_graph_timeout_fails_the_cocotb_test():
    """tb_graph's timeout is a failed cocotb test, raised with the testbench's message (and
    turned into RtlTimeout with sw_sim's report by rtl_sim.run_graph)."""
    g = KERNELS["spmv"](16)
    _, data, _, _ = example("spmv", 16, 3, 0.3)
    with pytest.raises(RtlTimeout, match=r"testbench error: run_jobs: TimeoutError: graph not done after 10 cycles"):
        run_graph(g, data, runner="cocotb", max_cycles=10)
