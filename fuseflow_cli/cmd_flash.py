"""``fuseflow-hw flash``: program a board with a ``fuseflow-hw synth`` build (iceprog /
openFPGALoader / dfu-util, overridable by ICEPROG / OPENFPGALOADER / DFU_UTIL)."""

from __future__ import annotations

import argparse
import shlex

from fpga.flash import FlashError, flash, flash_command

from .board_args import add_board_parser, board_from_args
from .errors import UserError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = add_board_parser(subparsers, "flash", "program a board with a synthesised bitstream",
                         __doc__, graph=False)
    p.add_argument("builddir", metavar="BUILDDIR", help="build directory of fuseflow-hw synth")
    p.add_argument(
        "--dry-run", action="store_true", help="print the programmer command, do not run it"
    )


def run(args: argparse.Namespace) -> int:
    board = board_from_args(args)
    try:
        if args.dry_run:
            print(shlex.join(flash_command(board, args.builddir)))
            return 0
        return flash(board, args.builddir)
    except FlashError as exc:
        raise UserError(str(exc)) from None
