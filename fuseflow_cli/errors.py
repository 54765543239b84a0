"""The command line's error for bad input, and its wording in command-line syntax."""

from __future__ import annotations

import ast
import re

__all__ = ["UserError", "cli_syntax"]


class UserError(Exception):
    """An error in what the user asked for; the CLI prints it without a traceback."""


# a Python API keyword in a library message (``formats={'mask': 'csr'}``, ``par={'i': 2}``) and
# the command-line flag that says the same
_API_KEYWORDS = {"formats": "--formats", "par": "--par"}
_DICT_ARG = re.compile(r"\b(" + "|".join(_API_KEYWORDS) + r")=(\{[^{}]*\})")


def _as_flag(match: re.Match) -> str:
    try:
        value = ast.literal_eval(match.group(2))
    except (ValueError, SyntaxError):
        return match.group(0)
    if not isinstance(value, dict) or not value:
        return match.group(0)
    return f"{_API_KEYWORDS[match.group(1)]} " + ",".join(f"{k}={v}" for k, v in value.items())


def cli_syntax(text: str) -> str:
    """``text`` (a library's message) with Python keyword arguments that have a command-line
    flag written as that flag: ``formats={'mask': 'csr'}`` becomes ``--formats mask=csr``."""
    return _DICT_ARG.sub(_as_flag, text)
