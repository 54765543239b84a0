"""``fuseflow-hw`` command line.  Each subcommand lives in a module that registers itself.

A subcommand module has ``add_parser(subparsers)`` and ``run(args) -> int``; :data:`SUBCOMMANDS`
lists them.  Its module docstring is the subcommand's ``--help`` description (the reST markup
taken out by :func:`plain`).
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import os
import re
import sys
import textwrap

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
from .applies import check_sources
from .errors import UserError, cli_syntax
from .par_auto import resolve_model_par_auto

__all__ = ["BROKEN_PIPE", "UserError", "build_parser", "main", "parse_args", "plain"]

DESCRIPTION = ("Sparse ML on dataflow hardware: compile Einsum programs and PyTorch models to SAMML "
               "graphs, simulate them cycle by cycle (sw_sim), elaborate them to Verilog, run the RTL "
               "in Verilator and build, flash and run them on open FPGA boards.")
EPILOG = ("Run 'fuseflow-hw COMMAND --help' for a command's options.  Exit status: 0 done, 1 a check "
          "failed, 2 bad input (an unknown option is named, with the nearest ones), 3 an unexpected "
          "error (--debug shows its traceback), 130 interrupted, 141 the output pipe was closed "
          "(as in '| head': the rest of the output is dropped quietly, as for a tool stopped by "
          "SIGPIPE).")
BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool that SIGPIPE stopped

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


def _version() -> str:
    try:
        return importlib.metadata.version("fuseflow-hw")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "(not installed)"


def plain(text: str) -> str:
    """``text`` without reST markup: ``x`` and :role:`x` become x."""
    text = re.sub(r":[a-z]+:`~?([^`]*)`", r"\1", text)
    return re.sub(r"``([^`]*)``", r"\1", text)


class _Paragraphs(argparse.HelpFormatter):
    """Descriptions keep their paragraphs (blank lines), each refilled to the terminal width."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(textwrap.fill(" ".join(par.split()), width, initial_indent=indent,
                                         subsequent_indent=indent)
                           for par in re.split(r"\n\s*\n", text.strip()))


def _describe(p: argparse.ArgumentParser, name: str, doc: str | None) -> None:
    """A subcommand's description (its module docstring without the leading 'fuseflow-hw NAME:'
    and markup) and option helps without markup."""
    if doc:
        text = re.sub(rf"^``fuseflow-hw {name}[^`]*``:\s*", "", doc.strip())
        if text.split(maxsplit=1)[0].strip(",.;:").isalpha():  # not a name such as sw_sim
            text = text[:1].upper() + text[1:]
        p.description = plain(text)
        p.formatter_class = _Paragraphs
    for action in p._actions:
        if action.help:
            action.help = plain(action.help)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``fuseflow-hw`` and every subcommand."""
    parser = argparse.ArgumentParser(prog="fuseflow-hw", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=_Paragraphs)
    parser.add_argument("--version", action="version", version=f"fuseflow-hw {_version()}")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an unexpected error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, mod in SUBCOMMANDS.items():
        mod.add_parser(sub)
        _describe(sub.choices[name], name, mod.__doc__)
    return parser


def _unknown_options(parser: argparse.ArgumentParser, argv: list[str]
                     ) -> tuple[argparse.ArgumentParser, list[str]] | None:
    """The subcommand's parser and the options in ``argv`` it does not know (argparse's own
    abbreviations of a long option are known), or None."""
    top = parser._option_string_actions
    choices = parser._subparsers._group_actions[0].choices
    rest = iter(argv)
    for tok in rest:
        if tok in choices:
            break
        if not tok.startswith("-"):
            return None  # an unknown command: argparse names it
    else:
        return None
    sub = choices[tok]
    known = sub._option_string_actions
    unknown = []
    for tok in rest:
        if tok == "--":
            break
        if not tok.startswith("-") or tok == "-" or re.fullmatch(r"-\d.*|-\.\d.*", tok):
            continue
        name = tok.split("=", 1)[0]
        if name in known or (not name.startswith("--") and name[:2] in known):  # -oDIR
            continue
        if name.startswith("--") and sub.allow_abbrev and [o for o in known if o.startswith(name)]:
            continue  # an abbreviation (argparse says so if it is ambiguous)
        if name not in top:
            unknown.append(name)
    return (sub, unknown) if unknown else None


def _did_you_mean(sub: argparse.ArgumentParser, flags: list[str]) -> str:
    """``unknown option --sise (did you mean --size?)`` for each flag, from the subcommand's
    own option strings."""
    options = [o for o in sub._option_string_actions if o.startswith("--")]
    parts = []
    for flag in flags:
        close = difflib.get_close_matches(flag, options, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else f" (see {sub.prog} --help)"
        parts.append(f"unknown option {flag}{hint}")
    return "; ".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line parsed; an unknown option of a subcommand is an error (exit 2) naming
    it and the subcommand's nearest options (before argparse's own checks, which would
    otherwise report a missing required option or print the top-level usage)."""
    return _parse(argv)[1]


def _parse(argv: list[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The subcommand's parser and the parsed command line (see :func:`parse_args`)."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    found = _unknown_options(parser, argv)
    if found:
        sub, flags = found
        sub.error(_did_you_mean(sub, flags))
    args = parser.parse_args(argv)
    return parser._subparsers._group_actions[0].choices[args.command], args  # noqa: SLF001


def _quiet_stdout() -> None:
    """Send what is still buffered for a closed stdout to /dev/null (no second broken pipe at
    exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file (a test's capture): nothing to silence
        pass


def _check_out_dirs(args: argparse.Namespace) -> None:
    """``-o`` of every command is a directory (made if missing): an existing file is refused."""
    for attr in ("out", "outdir"):
        path = getattr(args, attr, None)
        if isinstance(path, str) and os.path.exists(path) and not os.path.isdir(path):
            raise UserError(f"-o {path}: a file; {args.command} writes a directory there (give a new or "
                            "existing directory)")


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand.  Exit status: 0 done, 1 a check failed, 2 bad input (a message naming
    it), 3 an unexpected error (one line; ``--debug`` shows the traceback), 130 interrupted,
    141 stdout closed by its reader (``| head``: the rest is dropped without a message)."""
    try:
        sub, args = _parse(argv)  # --help may meet a closed pipe too
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    try:
        check_sources(sub, args)  # an option given with a source it does not apply to
        _check_out_dirs(args)
        if args.command != "rank":  # rank drops --par: it ranks fusion and orders
            resolve_model_par_auto(args)  # --model --par auto: the lanes chosen, as if given
        rc = int(SUBCOMMANDS[args.command].run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return rc
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    except UserError as exc:
        print(f"fuseflow-hw {args.command}: error: {cli_syntax(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # the command has stopped what it started (fuseflow.executor)
        detail = f" ({exc})" if str(exc) else ""  # what was kept, if the command says (sweep)
        print(f"fuseflow-hw {args.command}: interrupted{detail}", file=sys.stderr)
        return 130
    except OSError as exc:  # a file that cannot be read or written: name it
        if args.debug:
            raise
        where = f" {exc.filename!r}" if exc.filename else ""
        print(f"fuseflow-hw {args.command}: error:{where} {exc.strerror or exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the last line of defence: no traceback reaches a user
        if args.debug:
            raise
        print(f"fuseflow-hw {args.command}: unexpected error: {type(exc).__name__}: {exc} "
              "(run `fuseflow-hw --debug ...` for the traceback, and please report it)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
