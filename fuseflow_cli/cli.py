"""``fuseflow-hw`` command line.  Each subcommand lives in a module that registers itself.

A subcommand module has ``add_parser(subparsers)`` and ``run(args) -> int``; :data:`SUBCOMMANDS`
lists them.
"""

from __future__ import annotations

import argparse
import sys

from . import (
    cmd_build,
    cmd_compile,
    cmd_correlate,
    cmd_demo,
    cmd_estimate,
    cmd_flash,
    cmd_primitives,
    cmd_rank,
    cmd_rtl,
    cmd_run,
    cmd_sim,
    cmd_sweep,
    cmd_synth,
)
from .errors import UserError

__all__ = ["UserError", "main"]

# subcommand name -> its module, in the order of ``fuseflow-hw --help``
SUBCOMMANDS = {
    "demo": cmd_demo,
    "sim": cmd_sim,
    "build": cmd_build,
    "rtl": cmd_rtl,
    "compile": cmd_compile,
    "estimate": cmd_estimate,
    "rank": cmd_rank,
    "sweep": cmd_sweep,
    "correlate": cmd_correlate,
    "synth": cmd_synth,
    "run": cmd_run,
    "flash": cmd_flash,
    "primitives": cmd_primitives,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fuseflow-hw", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in SUBCOMMANDS.values():
        mod.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return int(SUBCOMMANDS[args.command].run(args) or 0)
    except UserError as exc:
        print(f"fuseflow-hw {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
