"""``fuseflow-hw`` command line.  Each subcommand lives in a module that registers itself."""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import UserError

__all__ = ["UserError", "main"]

# subcommand name -> module defining ``add_parser(subparsers)`` and ``run(args) -> int``
SUBCOMMANDS = {
    "demo": "fuseflow.cmd_demo",
    "sim": "fuseflow.cmd_sim",
    "build": "fuseflow.cmd_build",
    "rtl": "fuseflow.cmd_rtl",
    "compile": "fuseflow.cmd_compile",
    "correlate": "fuseflow.cmd_correlate",
    "synth": "fuseflow.cmd_synth",
    "run": "fuseflow.cmd_run",
    "flash": "fuseflow.cmd_flash",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fuseflow-hw", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, modname in SUBCOMMANDS.items():
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name != modname:
                raise
            continue
        mod.add_parser(sub)
        modules[name] = mod
    args = parser.parse_args(argv)
    try:
        return int(modules[args.command].run(args) or 0)
    except UserError as exc:
        print(f"fuseflow-hw {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
