"""What each command-line option applies to, declared where the option is added, and the one
check of it, run before any work starts.

A command works on one source (:class:`fuseflow.options.Source`): a built-in kernel
(``--kernel``), a graph file, an Einsum program (``PROGRAM.py``) or a model (``--model``, or the
``model.json`` manifest of ``build --model``).  An option whose declaration names the sources it
applies to, and that the user gives with another source, would be ignored: :func:`check_sources`
refuses it, naming the option, the value as written and the source.  The compiler passes'
options carry their sources from their own declarations (:meth:`fuseflow.options.Option.
add_argument`); a command's own options are declared with :func:`declare` next to where the
command adds them.  An option declared nowhere applies to every source of its command.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from fuseflow.ir.json_file import read_json
from fuseflow.options import SOURCES_ATTR, Source

from .errors import UserError

__all__ = ["check_sources", "declare", "declared_sources", "source_of", "source_text"]


def declare(p: argparse.ArgumentParser | argparse._ArgumentGroup, sources: Source,
            *flags: str) -> None:
    """Options ``flags`` of parser (or group) ``p`` apply to ``sources`` only."""
    table = p._option_string_actions  # noqa: SLF001 - argparse's own flag table (shared by groups)
    for flag in flags:
        if flag not in table:
            raise KeyError(f"declare: the parser has no option {flag}")
        setattr(table[flag], SOURCES_ATTR, sources)


def declared_sources(action: argparse.Action) -> Source | None:
    """The sources ``action`` was declared to apply to (None: every source)."""
    return getattr(action, SOURCES_ATTR, None)


def _manifest(path: str) -> bool:
    """``path`` is a ``build --model`` manifest (its model and steps)."""
    p = Path(path)
    if p.suffix != ".json" or not p.is_file():
        return False
    try:
        m = read_json(p)
    except (OSError, ValueError, RecursionError):
        return False  # the graph loader says why
    return isinstance(m, dict) and "steps" in m and "model" in m


def source_of(args: argparse.Namespace) -> tuple[Source, str] | None:
    """The source the command line names and how to say it (None: none named yet, or several:
    the command says so)."""
    model, kernel = getattr(args, "model", None), getattr(args, "kernel", None)
    graph = getattr(args, "graph", None) or getattr(args, "program", None)
    if sum(map(bool, (model, kernel, graph))) != 1:
        return None
    if model:
        return Source.MODEL, f"--model {model} (a model)"
    if kernel:
        return Source.KERNEL, f"--kernel {kernel} (a built-in kernel)"
    if str(graph).endswith(".py"):
        return Source.PROGRAM, f"{graph} (an Einsum program)"
    if _manifest(str(graph)):
        return Source.MODEL, f"{graph} (a model manifest)"
    return Source.GRAPH, f"{graph} (a graph file)"


def source_text(sources: Source) -> str:
    return " and ".join(sources.text().rsplit(", ", 1))


def _given(action: argparse.Action, args: argparse.Namespace) -> bool:
    value = getattr(args, action.dest, action.default)
    return value is not None and value != action.default and value != []


def _written(action: argparse.Action, args: argparse.Namespace) -> str:
    flag = max(action.option_strings, key=len)
    value = getattr(args, action.dest)
    if action.nargs == 0 or isinstance(value, bool):
        return flag
    if isinstance(value, list):
        return " ".join(f"{flag} {v}" for v in value)
    return f"{flag} {value}"


def check_sources(p: argparse.ArgumentParser, args: argparse.Namespace,
                  actions: Iterable[argparse.Action] | None = None) -> None:
    """A ``UserError`` naming every option given that does not apply to the command's source."""
    found = source_of(args)
    if found is None:
        return
    source, what = found
    wrong = [a for a in (p._actions if actions is None else actions)  # noqa: SLF001
             if a.option_strings and (declared_sources(a) is not None)
             and not declared_sources(a) & source and _given(a, args)]
    if not wrong:
        return
    if len(wrong) == 1:
        a = wrong[0]
        raise UserError(f"{_written(a, args)} applies to {source_text(declared_sources(a))} only, not to "
                        f"{what}: it would be ignored; drop it")
    parts = ", ".join(f"{_written(a, args)} ({source_text(declared_sources(a))})" for a in wrong)
    raise UserError(f"{parts} do not apply to {what}: they would be ignored; drop them")
