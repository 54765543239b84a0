"""Declared options: what a compiler pass or a command takes, written once.

An :class:`Option` names one option and says its kind, default, range, units, help text and the
sources it applies to (:class:`Source`: built-in kernels, graph files, Einsum programs, models).
The compiler's passes declare theirs (:class:`fuseflow.compiler.passes.base.Pass`); from those
declarations come the compile options (:class:`fuseflow.compiler.pipeline.Options`), the keys of
schedule files, the command-line flags, ``--list-passes`` and the keys of sweep files.  A
command's own options (not a pass's) are declared the same way.  :meth:`Option.check` is the one
check of a value, wherever it came from.
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SOURCES_ATTR", "Kind", "Option", "OptionError", "Source", "int_range"]

SOURCES_ATTR = "fuseflow_sources"  # an argparse action's declared sources (fuseflow_cli.applies)


def int_range(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An integer in ``[lo, hi]`` (``hi`` None: no upper bound)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < lo or (hi is not None and v > hi):
            span = f"at least {lo}" if hi is None else f"from {lo} to {hi}"
            raise argparse.ArgumentTypeError(f"{v} is out of range: use {span}")
        return v
    parse.__name__ = "integer"
    parse.lo, parse.hi = lo, hi  # the declared range (the bad-input corpus generates its edges)
    return parse


class OptionError(ValueError):
    """A value an option does not take (the message names where it came from)."""


class Source(enum.Flag):
    """What a command compiles or runs: an option applies to some of these."""

    KERNEL = enum.auto()
    GRAPH = enum.auto()
    PROGRAM = enum.auto()
    MODEL = enum.auto()
    ALL = KERNEL | GRAPH | PROGRAM | MODEL

    def text(self) -> str:
        names = {Source.KERNEL: "kernels", Source.GRAPH: "graph files", Source.PROGRAM: "programs",
                 Source.MODEL: "models"}
        return ", ".join(t for s, t in names.items() if s in self)


class Kind(enum.Enum):
    """The type of an option's value (and the shape of its command-line flag)."""

    FLAG = "on/off"  # bool; a flag that turns it on, or (default on) one that turns it off
    INT = "whole number"
    CHOICE = "one of"  # one of ``choices``
    INDEX_MAP = "INDEX=N map"  # {index: whole number}; the flag is repeatable
    TEXT_MAP = "KEY=TEXT map"  # {key: text}
    ANY = "value"  # checked by its owner (e.g. a fused order per graph)


@dataclass(frozen=True)
class Option:
    """One declared option.

    ``low``/``high``: the range of a whole number (of every value of an INDEX_MAP);
    ``power_of_two``: the number must be a power of two; ``units``: what the number counts.
    ``flag``: the command-line flag (default ``--name`` with ``-`` for ``_``; for a FLAG that is
    on by default, the flag that turns it off); ``""`` with ``cli=False``: no derived flag (the
    command writes its own).  ``schedule``: a key of schedule files.  ``sweep``: a key of sweep
    files (they run ``fuseflow-hw sim``, so only options of kernels, graph files and models)."""

    name: str
    kind: Kind
    default: Any
    help: str
    sources: Source = Source.PROGRAM | Source.MODEL
    low: int | None = None
    high: int | None = None
    power_of_two: bool = False
    units: str = ""
    choices: tuple[Any, ...] = ()
    flag: str = ""
    metavar: str | None = None
    example: str = ""  # a value as the command line writes it (for messages)
    cli: bool = True
    schedule: bool = True
    sweep: bool = True

    @property
    def cli_flag(self) -> str:
        if self.flag:
            return self.flag
        base = self.name.replace("_", "-")
        return f"--no-{base}" if self.kind is Kind.FLAG and self.default else f"--{base}"

    def check(self, value: Any, where: str) -> Any:
        """``value`` if the option takes it, else :class:`OptionError` naming ``where``."""
        if value is None:
            return None
        if self.kind is Kind.FLAG:
            if not isinstance(value, bool):
                raise OptionError(f"{where} = {value!r} must be bool")
        elif self.kind is Kind.INT:
            self.check_entry(value, where)
        elif self.kind is Kind.CHOICE:
            if getattr(value, "value", value) not in self.choices:
                raise OptionError(f"{where}={value}: must be "
                                  + " or ".join(str(c) for c in self.choices))
        elif self.kind is Kind.INDEX_MAP:
            if not isinstance(value, Mapping):
                raise OptionError(f"{where} = {value!r} must be dict")
            for index, n in value.items():
                self.check_entry(n, f"{where}.{index}")
        elif self.kind is Kind.TEXT_MAP and not isinstance(value, Mapping):
            raise OptionError(f"{where} = {value!r} must be dict")
        return value

    def check_entry(self, value: Any, where: str) -> Any:
        """One whole number of an INT option or of an INDEX_MAP (its range, units, powers of two)."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise OptionError(f"{where} = {value!r} must be a whole number"
                              + (f" of {self.units}" if self.units else ""))
        low, high = self.low, self.high
        if self.power_of_two and (value < (low or 1) or value & (value - 1)
                                  or (high is not None and value > high)):
            raise OptionError(f"{where} = {value} must be a power of two from {low or 1} to {high}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise OptionError(f"{where} = {value} must be {low} to {high}")
        return value

    def describe(self) -> str:
        """One line: name, kind, range and units, default, flag, sources, help."""
        kind = self.kind.value
        if self.kind is Kind.CHOICE:
            kind += " " + "/".join(map(str, self.choices))
        if self.low is not None or self.high is not None:
            kind += f" {self.low if self.low is not None else ''}..{self.high if self.high is not None else ''}"
        if self.power_of_two:
            kind += " (powers of two)"
        if self.units:
            kind += f" {self.units}"
        flag = f"; {self.cli_flag}" if self.cli else ""
        default = getattr(self.default, "value", self.default)
        return (f"{self.name}: {kind}, default {default!r}{flag}; for {self.sources.text()} - "
                f"{self.help}")

    def add_argument(self, parser: Any, **overrides: Any) -> None:
        """Add the option's flag to an ``argparse`` parser or group (destination ``name``)."""
        kw: dict[str, Any] = {"dest": self.name, "help": self.help}
        if self.kind is Kind.FLAG:
            kw.update(action="store_false" if self.default else "store_true")
        elif self.kind is Kind.INDEX_MAP:
            kw.update(action="append", default=[], metavar=self.metavar or "INDEX=N")
        elif self.kind is Kind.CHOICE:
            kw.update(type=type(self.choices[0]), choices=self.choices, default=self.default)
        elif self.kind is Kind.INT:
            kw.update(type=int_range(self.low if self.low is not None else -(1 << 63), self.high),
                      metavar=self.metavar, default=self.default)
        kw.update(overrides)
        action = parser.add_argument(self.cli_flag, **kw)
        setattr(action, SOURCES_ATTR, self.sources)  # the command line's source check reads it
