"""The synthesis build reports its phases as the tools start them, from the logs the quiet
tools write (no yosys or nextpnr needed: a script writes such logs)."""

from __future__ import annotations

from fpga.families import FAMILIES
from fpga.synth import BuildWatch, _run_script

ICE40 = FAMILIES["ice40"]

SCRIPT = """\
set -e
printf '1. Executing RTLIL frontend.\\n2. Executing SYNTH_ICE40 pass.\\n2.2. Executing HIERARCHY pass (x).\\n' > top.rpt
sleep 0.6
printf '2.11. Executing OPT pass (performing simple optimizations).\\n2.11.1. Executing OPT_EXPR pass\\n' >> top.rpt
sleep 0.6
printf 'Info: Packing constants..\\n' > top.tim
sleep 0.6
printf 'Info: Running main analytical placer, max placement attempts per cell = 9.\\n' >> top.tim
sleep 0.6
printf 'Info: Routing..\\nInfo: Routing 8260 arcs.\\n' >> top.tim
sleep 0.6
printf 'Info: Program finished normally.\\n' >> top.tim
sleep 0.6
echo packed
"""


def test_phases_stream_in_order(tmp_path):
    (tmp_path / "build_top.sh").write_text(SCRIPT)
    seen: list[tuple[str, str]] = []
    code, output = _run_script("build_top.sh", tmp_path, {"PATH": "/usr/bin:/bin"},
                               BuildWatch(tmp_path, "top", ICE40), lambda tool, step: seen.append((tool, step)))
    assert code == 0 and "packed" in output
    assert (tmp_path / "build.log").read_text() == output
    expected = [("yosys", "hierarchy pass"), ("yosys", "opt pass"), ("nextpnr-ice40", "packing cells"),
                ("nextpnr-ice40", "placing"), ("nextpnr-ice40", "routing"),
                ("icepack", "writing the bitstream")]
    # in order, each once (a machine too busy to poll within 0.6 s may merge two steps)
    assert seen == sorted(set(seen), key=expected.index)
    assert seen[-1] == ("icepack", "writing the bitstream")
    assert {t for t, _ in seen} == {"yosys", "nextpnr-ice40", "icepack"}
    assert len(seen) >= 4


def test_a_failing_script_returns_its_code_and_output(tmp_path):
    (tmp_path / "build_top.sh").write_text("echo boom >&2\nexit 3\n")
    code, output = _run_script("build_top.sh", tmp_path, {"PATH": "/usr/bin:/bin"},
                               BuildWatch(tmp_path, "top", ICE40), None)
    assert code == 3 and "boom" in output


def test_watch_reads_only_whole_new_lines(tmp_path):
    w = BuildWatch(tmp_path, "top", ICE40)
    assert w.poll() is None  # no log yet
    rpt = tmp_path / "top.rpt"
    rpt.write_text("2.3. Executing PROC pass (convert processes).\n2.4. Executing CHE")
    assert w.poll() == ("yosys", "proc pass")  # the unfinished line is not read yet
    with rpt.open("a") as f:
        f.write("CK pass (checking).\n")
    assert w.poll() == ("yosys", "check pass")
    (tmp_path / "top.tim").write_text("Info: constrained 'clk' to 12 MHz\n")
    assert w.poll() == ("nextpnr-ice40", "reading the netlist")
