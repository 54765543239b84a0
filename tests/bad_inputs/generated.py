"""Bad-input cases generated from the command line's own declarations: for every option of every
command whose value is checked (an integer range, a density, a positive number, a fixed set of
choices), the values just outside what it declares and values of the wrong kind.  A new option
declared with one of these types is covered without writing a case."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from fuseflow_cli.argtypes import fraction, positive_float
from fuseflow_cli.cli import build_parser

from .corpus import Case


def _bad_values(action: argparse.Action) -> list[str]:
    """Values the option's declaration refuses."""
    t = action.type
    if action.choices is not None and not isinstance(action.choices, range):
        return ["zz-not-a-choice"]
    if t is fraction:  # (a percentage is a common slip for a fraction)
        return ["0", "1.5", "nan", "x", "50%"]
    if t is positive_float:
        return ["0", "-1", "inf", "x"]
    if hasattr(t, "lo"):  # fuseflow.options.int_range (1e3: scientific notation for a count)
        out = [str(t.lo - 1), "x", "1.5", "1e3"]
        return out + ([str(t.hi + 1)] if t.hi is not None else [])
    if t in (int, float):
        return ["x"]
    return []


def _commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    yield from sub.choices.items()


def declared_option_cases() -> tuple[list[Case], set[str]]:
    """A case per (command, checked option, bad value), and the ids of the reduced form (the
    first bad value of each option: the README's test command runs those, ``-m slow`` all)."""
    cases: list[Case] = []
    first: set[str] = set()
    for name, p in _commands():
        for action in p._actions:  # noqa: SLF001 - argparse keeps its declarations here
            if not action.option_strings or action.nargs == 0:
                continue
            flag = max(action.option_strings, key=len)
            for k, value in enumerate(_bad_values(action)):
                case = Case(f"declared:{name}:{flag}={value}", (flag.lstrip("-"),), argv=(name, flag, value))
                cases.append(case)
                if k == 0:
                    first.add(case.id)
    return cases, first


DECLARED, REDUCED = declared_option_cases()
