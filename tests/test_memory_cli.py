"""Command-line and schedule errors of the memory system, estimate and rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuseflow.ir.memory import PRESETS
from fuseflow.schedule import ScheduleError, load_schedule
from fuseflow_cli.cli import main


def fails(capsys, argv: list[str]) -> str:
    """Run the CLI, expect exit code 2 (a user error), return stderr."""
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    return cap.err


def test_unknown_memory_preset(capsys):
    err = fails(capsys, ["sim", "--kernel", "spmv", "--size", "8", "--memory", "hbm3"])
    assert "'hbm3'" in err and "hbm2" in err  # names it, and lists the presets


def test_bad_memory_field(capsys):
    err = fails(capsys, ["sim", "--kernel", "spmv", "--size", "8", "--memory", "hbm2:banks=3"])
    assert "banks = 3" in err and "power of two" in err
    err = fails(capsys, ["sim", "--kernel", "spmv", "--size", "8", "--memory", "hbm2:nope=3"])
    assert "'nope'" in err


def test_unknown_onchip_tensor(capsys):
    err = fails(capsys, ["sim", "--kernel", "spmv", "--size", "8", "--memory", "hbm2", "--onchip", "nosuch"])
    assert "'nosuch'" in err
    err = fails(capsys, ["sim", "--kernel", "spmv", "--size", "8", "--onchip", "B,nosuch"])
    assert "'nosuch'" in err and "'B'" not in err.split("(tensors")[0]


def test_skipping_with_off_chip_tensors(capsys):
    err = fails(capsys, ["sim", "--kernel", "spmspm_inner", "--size", "8", "--skip", "--memory", "hbm2"])
    assert "scan_A1" in err and "'A'" in err
    assert main(["sim", "--kernel", "spmspm_inner", "--size", "8", "--skip", "--memory", "hbm2",
                 "--onchip", "A,B"]) == 0


@pytest.mark.parametrize("rate", ["i=2", "i", "=0.5", "i=x", "i=-0.1"])
def test_estimate_bad_rate(capsys, rate):
    err = fails(capsys, ["estimate", "--kernel", "spmv", "--size", "8", "--rate", rate])
    assert repr(rate) in err and "between 0 and 1" in err


def test_estimate_rate_is_used(capsys):
    """A measured rate replaces the independence assumption at that index: rate 0 at mul's j
    intersection leaves no products; rate 1 keeps every coordinate of the row-level fibres."""
    assert main(["estimate", "--kernel", "mul", "--size", "8", "--rate", "j=0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["configs"][0]["flops_total"] == 0


def test_estimate_memory_errors(capsys):
    err = fails(capsys, ["estimate", "--kernel", "spmv", "--size", "8", "--memory", "hbm3"])
    assert "'hbm3'" in err


def test_rank_needs_a_model(capsys):
    err = fails(capsys, ["rank"])
    assert "--model" in err


def test_schedule_memory_and_onchip_are_read(tmp_path):
    path = tmp_path / "mem.toml"
    path.write_text('memory = "ddr4"\nonchip = ["c"]\n')
    s = load_schedule(str(path))
    assert s.memory is PRESETS["ddr4"] and s.onchip == ("c",)
    assert s.to_json()["memory"]["t_cl"] == 15 and s.to_json()["onchip"] == ["c"]
    table = tmp_path / "table.toml"
    table.write_text('[memory]\npreset = "hbm2"\nbytes_per_cycle = 16\n')
    t = load_schedule(str(table))
    assert (t.memory.bytes_per_cycle, t.memory.burst_bytes, t.memory.xfer_cycles) == (16, 64, 4)
    assert t.onchip is None
    js = tmp_path / "mem.json"
    js.write_text(json.dumps({"memory": "sdram:latency=3", "onchip": []}))
    j = load_schedule(str(js))
    assert (j.memory.latency, j.memory.burst_bytes, j.onchip) == (3, 16, ())


def test_schedule_memory_reaches_the_simulator(tmp_path, capsys):
    path = tmp_path / "mem.toml"
    path.write_text('memory = "sdram"\nonchip = ["B"]\n')
    assert main(["sim", "--kernel", "spmv", "--size", "8", "--json", "--schedule", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memory"]["name"] == "sdram" and out["onchip"] == ["B"]
    assert {k for k, a in out["counters"]["arrays"].items() if a["offchip"]} == {"c.vals", "y.vals"}
    # the command line wins over the schedule
    assert main(["sim", "--kernel", "spmv", "--size", "8", "--json", "--schedule", str(path),
                 "--memory", "ideal"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"]["ideal"] is True


@pytest.mark.parametrize("text, key", [
    ("memory = 5\n", "memory"),
    ('onchip = [1]\n', "onchip"),
    ('onchip = "c"\n', "onchip"),
    ('memory = "hbm3"\n', "hbm3"),
    ('[memory]\npreset = "hbm2"\nspeed = 3\n', "speed"),
])
def test_bad_schedule_memory_names_the_key(tmp_path, text, key):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScheduleError) as exc:
        load_schedule(str(path))
    assert key in str(exc.value) and "bad.toml" in str(exc.value)


@pytest.mark.parametrize("text", ['[memory]\npreset = "hbm2"\nbanks = 3\n', 'memory = "hbm2:banks=3"\n'])
def test_bad_schedule_memory_value_names_the_file(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScheduleError) as exc:
        load_schedule(str(path))
    assert "banks = 3" in str(exc.value)
    assert "bad.toml" in str(exc.value)


def test_bad_schedule_memory_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text("memory = 5\nonchip = [1]\n")
    err = fails(capsys, ["sim", "--kernel", "spmv", "--size", "8", "--schedule", str(path)])
    assert "memory = 5" in err


@pytest.mark.parametrize("target", [["--kernel", "spmv", "--size", "8"], [str(Path(__file__).resolve().parent.parent / "examples/programs/spmm.py")]])
def test_estimate_unknown_onchip_tensor(capsys, target):
    assert main(["estimate", *target, "--memory", "hbm2", "--onchip", "nosuch"]) == 2
    assert "'nosuch'" in capsys.readouterr().err
