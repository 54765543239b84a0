"""Terminal output of the command line: rich tables and a spinner for long steps."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

__all__ = ["phases", "print_table", "spinner", "table_text"]


def _stdout(file=None) -> Console:
    """A console on stdout (or ``file``); not a terminal (a pipe, a file, a test): no wrapping
    and no colour, so every row stays one greppable line."""
    console = Console(file=file, highlight=False)
    if not console.is_terminal:
        console = Console(file=file, highlight=False, width=1 << 12, no_color=True)
    return console


def _is_number(cell: object) -> bool:
    if isinstance(cell, int | float):
        return True
    try:
        float(str(cell).removesuffix("%"))
    except ValueError:
        return str(cell) == "-"
    return True


def _table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for i, name in enumerate(header):
        right = bool(rows) and all(_is_number(r[i]) for r in rows)
        table.add_column(Text(str(name)), justify="right" if right else "left")
    for r in rows:
        table.add_row(*(Text(str(c)) for c in r))  # Text: brackets in a cell are not markup
    return table


def print_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> None:
    """``rows`` under ``header`` as a rich table on stdout (numeric columns right-aligned)."""
    _stdout().print(_table(rows, header))


def table_text(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """The text :func:`print_table` prints (for output built up as a string)."""
    console = _stdout(io.StringIO())
    console.print(_table(rows, header))
    return console.file.getvalue().rstrip("\n")


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


@contextmanager
def load_progress(text: str, enabled: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr (terminals only) while a load runs; yields ``update(done,
    total)`` (words loaded of the total)."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda done, total: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(text, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
