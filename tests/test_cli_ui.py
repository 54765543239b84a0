"""The command line's rich output off a terminal: tables one greppable line per row, phase
lines on stderr."""

from __future__ import annotations

from fuseflow_cli.ui import phases, print_table, table_text


def test_table_rows_are_single_lines_with_numbers_right_aligned(capsys):
    long = "x" * 300  # wider than any terminal: still not wrapped or cut
    print_table([["spmv [i]", 7, "12.5%"], [long, 12345, "3.0%"]], ["kernel", "cycles", "use"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["kernel", "cycles", "use"]
    assert set(lines[1].strip()) <= {"─", "-", " "}
    assert lines[2].split() == ["spmv", "[i]", "7", "12.5%"]  # brackets kept, not rich markup
    assert lines[3].split() == [long, "12345", "3.0%"]
    # right-aligned: the numbers end in the same column
    assert lines[2].rstrip().rindex("7") == lines[3].rstrip().rindex("12345") + 4
    assert "\x1b[" not in "".join(lines)  # no colour codes into a pipe


def test_table_text_is_what_print_table_prints(capsys):
    rows, head = [["B.vals", "on", 5]], ["array", "chip", "words"]
    print_table(rows, head)
    assert capsys.readouterr().out.rstrip("\n") == table_text(rows, head)


def test_phases_print_each_tool_and_each_loud_step(capsys):
    with phases("synthesising") as progress:
        for step in (("yosys", "proc pass"), ("yosys", "opt pass"), ("nextpnr-ice40", "placing"),
                     ("nextpnr-ice40", "routing"), ("icepack", "writing the bitstream")):
            progress(*step)
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout stays for the report / JSON
    lines = [ln.split(" s  ", 1)[1] for ln in captured.err.splitlines()]
    assert lines == ["yosys: proc pass", "nextpnr-ice40: placing", "nextpnr-ice40: routing",
                     "icepack: writing the bitstream"]


def test_phases_disabled_print_nothing(capsys):
    with phases("synthesising", enabled=False) as progress:
        progress("yosys", "proc pass")
    assert capsys.readouterr() == ("", "")
