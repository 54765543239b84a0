"""Reading a JSON file a user gave: every way it can be wrong is one ``JsonFileError`` naming the
file (missing, a directory, not text, not JSON, nested too deeply for the parser), never a
traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["JsonFileError", "read_json"]


class JsonFileError(ValueError):
    """A JSON file that cannot be read; the message names it (``what``) and says why."""


def read_json(path: str | Path, what: str = "file") -> Any:
    """The parsed contents of ``path``; ``what`` names the file in messages (e.g. "graph file")."""
    p = Path(path)
    name = f"{what} {str(p)!r}"
    if p.is_dir():
        raise JsonFileError(f"{name} is a directory, not a JSON file")
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise JsonFileError(f"{name} does not exist") from None
    except UnicodeDecodeError:
        raise JsonFileError(f"{name} is not text (JSON)") from None
    except OSError as exc:
        raise JsonFileError(f"{name} cannot be read: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"{name} is not valid JSON: {exc}") from None
    except RecursionError:
        raise JsonFileError(f"{name} is nested too deeply to be a {what}") from None
