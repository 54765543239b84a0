"""Terminal output of the command line: rich tables and a spinner for long steps."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich import box
from rich.console import Console
from rich.table import Table

__all__ = ["phases", "print_table", "spinner"]


def _stdout() -> Console:
    # not a terminal (a pipe, a file, a test): no wrapping, no colour, so lines stay greppable
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=1 << 12, no_color=True)
    return console


def print_table(rows: Sequence[Sequence[object]], header: Sequence[str], title: str | None = None) -> None:
    """``rows`` under ``header`` as a rich table on stdout (numbers right-aligned)."""
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    numeric = [all(isinstance(r[i], int | float) for r in rows) and bool(rows) for i in range(len(header))]
    for name, right in zip(header, numeric):
        table.add_column(str(name), justify="right" if right else "left")
    for r in rows:
        table.add_row(*(str(c) for c in r))
    _stdout().print(table)


@contextmanager
def spinner(text: str, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr (terminals only) while the block runs; yields ``update(text)``."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda _text: None
        return
    with console.status(text) as status:
        yield lambda new: status.update(new)


@contextmanager
def phases(what: str, enabled: bool = True, quiet: tuple[str, ...] = ("yosys",)
           ) -> Iterator[Callable[[str, str], None]]:
    """For a long run of external tools: yields ``progress(tool, step)``.  Each step is one line
    on stderr ("  12.3 s  nextpnr-ice40: placing"), except that the tools in ``quiet`` (yosys,
    with its hundreds of passes) get a line when they start only; on a terminal a spinner shows
    the current step and the time so far."""
    console = Console(stderr=True, highlight=False)
    t0 = time.perf_counter()
    last: list[tuple[str, str]] = []

    def line(tool: str, step: str) -> None:
        if enabled and (not last or last[-1][0] != tool or tool not in quiet):
            console.print(f"  {time.perf_counter() - t0:6.1f} s  {tool}: {step}")
        last.append((tool, step))

    if not enabled or not console.is_terminal:
        yield line
        return
    with console.status(what) as status:
        def progress(tool: str, step: str) -> None:
            line(tool, step)
            status.update(f"{what}: {tool}: {step}  ({time.perf_counter() - t0:.0f} s)")
        yield progress
