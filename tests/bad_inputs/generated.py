"""Bad-input cases generated from the command line's own declarations: for every option of every
command whose value is checked (an integer range, a density, a positive number, a fixed set of
choices), the values just outside what it declares and values of the wrong kind.  A new option
declared with one of these types is covered without writing a case."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from fuseflow.options import Source
from fuseflow_cli.applies import declared_sources
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


# a source as a command line names it (a graph file or program need not exist: the sources are
# checked before anything is read), and what some commands need besides
_SELECT = {Source.MODEL: ("--model", "gcn"), Source.KERNEL: ("--kernel", "spmv"),
           Source.GRAPH: ("g.json",), Source.PROGRAM: ("prog.py",)}
_NEEDS = {"build": ("-o", "{d}/out"), "synth": ("--board", "ulx3s-85f", "-o", "{d}/out"),
          "run": ("--board", "ulx3s-85f", "--sim")}


def _sources_of(p: argparse.ArgumentParser) -> Source:
    """The sources command ``p`` takes: --model, --kernel, a graph file, a program."""
    flags, dests = p._option_string_actions, {a.dest for a in p._actions}  # noqa: SLF001
    out = Source(0)
    out |= Source.MODEL if "--model" in flags else Source(0)
    out |= Source.KERNEL if "--kernel" in flags else Source(0)
    out |= Source.GRAPH if "graph" in dests else Source(0)
    return out | (Source.PROGRAM if "program" in dests else Source(0))


def _good_value(action: argparse.Action) -> tuple[str, ...]:
    """A value the option takes, other than its default (the flag alone for a switch)."""
    t = action.type
    if action.nargs == 0:
        return ()
    if action.choices is not None:
        return (str(next(c for c in action.choices if c != action.default)),)
    if hasattr(t, "lo"):
        v = t.lo if t.lo != action.default else t.lo + 1
        return (str(v),)
    if t is fraction:
        return ("0.5",)
    if t is positive_float or t in (int, float):
        return ("2",)
    return ("i=2",) if action.dest in ("par", "rate", "max_nnz", "order") else ("x",)


def source_cases() -> list[Case]:
    """For every option declared to apply to some sources only, and every other source its
    command takes: the option with a good value and that source, which must be refused as
    ignored (before any work starts) rather than run without it."""
    cases: list[Case] = []
    for name, p in _commands():
        takes = _sources_of(p)
        for action in p._actions:  # noqa: SLF001
            declared = declared_sources(action)
            if declared is None or not action.option_strings:
                continue
            flag = max(action.option_strings, key=len)
            for source in (s for s in _SELECT if s & takes and not s & declared):
                argv = (name, *_SELECT[source], *_NEEDS.get(name, ()), flag, *_good_value(action))
                cases.append(Case(f"sources:{name}:{flag}:{source.name.lower()}", (flag, "would be ignored"),
                                  argv=argv))
    return cases


DECLARED, REDUCED = declared_option_cases()
SOURCES = source_cases()
