"""Programming a board with the bitstream of a ``fuseflow-hw synth`` build directory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fuseflow.ir.json_file import JsonFileError, read_json
from rtl_sim.toolchain import find_tool

from .boards import Board

__all__ = ["FlashError", "flash", "flash_command"]


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


def flash_command(board: Board, build_dir: str | Path) -> list[str]:
    """The programmer command line for ``board`` (its env variable, e.g. ``ICEPROG``, overrides
    the executable, as amaranth-boards' own ``toolchain_program`` does)."""
    programmer = board.programmer
    return programmer.command(
        str(_bitstream(board, Path(build_dir))), os.environ.get(programmer.env)
    )


def flash(board: Board, build_dir: str | Path) -> int:
    """Run the programmer; returns its exit code."""
    argv = flash_command(board, build_dir)
    exe = find_tool(argv[0])  # next to the interpreter (an unactivated venv), then on PATH
    if exe is None:
        raise FlashError(
            f"programmer {argv[0]!r} not found: install it or set {board.programmer.env}=/path/to/it"
        )
    argv[0] = exe
    return subprocess.run(argv, check=False).returncode
