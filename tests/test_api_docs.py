"""``python tools/api_docs.py OUT`` writes the API reference from the docstrings (pdoc)."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hw.primitives import Intersect

pytest.importorskip("pdoc", reason="the API reference needs pdoc (the dev extra)")

ROOT = Path(__file__).resolve().parent.parent


def _squeezed(text: str) -> str:
    """``text`` without whitespace (rendering adds or drops some around links and code)."""
    return "".join(text.split())


def test_api_docs_has_the_primitives_page(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "api_docs.py"), str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "index.html").is_file()
    page = tmp_path / "hw" / "primitives.html"
    assert page.is_file()
    # the page's visible text: tags dropped, entities decoded
    text = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
    # the first line of Intersect's docstring, its reST ``code`` marks rendered away
    first = Intersect.__doc__.strip().splitlines()[0].replace("``", "")
    assert first.strip()
    assert _squeezed(first) in _squeezed(text)
