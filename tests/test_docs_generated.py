"""The docs stay true to the code and to themselves.

* every generated block (the README's command table, docs/cli.md's reference, docs/primitives.md's
  declarations, docs/models.md's supported ops) equals what ``tools/gen_docs.py`` generates now;
* every relative link of README.md and docs/*.md points to an existing file, and an anchor to a
  heading of its page;
* docs/README.md lists every page of docs/; the README stays a front door (at most 300 lines,
  the two commands of "Quick start", the test command that .ci/run runs);
* the ``--json`` fields the code defines are the ones docs/cli.md and docs/sweeps.md name.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

INSTALL = 'pip install -e ".[dev,fpga,torch]" && fuseflow-hw demo'
TEST_COMMAND = "python -m pytest -q -n 2"


def _gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen_docs = _gen_docs()


# ---------------------------------------------------------------- generated blocks

def test_generated_docs_are_current():
    stale = []
    for path, (old, new) in gen_docs.generated(ROOT).items():
        if old != new:
            diff = "".join(list(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                     f"{path} (committed)", f"{path} (generated)", n=1))[:40])
            stale.append(f"{path}:\n{diff}")
    assert not stale, ("generated docs are out of date; run `python tools/gen_docs.py` and commit the result\n"
                       + "\n".join(stale))


def test_regenerate_refuses_a_missing_or_unknown_block():
    produced = {"x": "body\n"}
    begin, end = gen_docs.BEGIN.format(name="x"), gen_docs.END
    assert gen_docs.regenerate("f.md", f"a\n{begin}\nold\n{end}\nb\n", produced) == f"a\n{begin}\nbody\n{end}\nb\n"
    with pytest.raises(ValueError, match="no generated block 'x'"):
        gen_docs.regenerate("f.md", "no markers\n", produced)
    with pytest.raises(ValueError, match="unknown generated block 'y'"):
        gen_docs.regenerate("f.md", f"{gen_docs.BEGIN.format(name='y')}\n{end}\n{begin}\n{end}\n", produced)


# ---------------------------------------------------------------- links

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans (links there are not links)."""
    return _CODE.sub("", _FENCE.sub("", text))


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``path`` (a repeated heading gets -1, -2, ...)
    and the explicit ``<a id=...>`` / ``name=...`` ones."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in _HEADING.findall(text):
        base = gen_docs.slug(heading.replace("`", ""))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out |= set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return out


def _links(path: Path) -> list[str]:
    return _LINK.findall(_prose(path.read_text(encoding="utf-8")))


def test_relative_links_point_to_existing_files_and_headings():
    broken = []
    anchors: dict[Path, set[str]] = {}
    for page in PAGES:
        for target in _links(page):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not dest.exists():
                broken.append(f"{where}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
                continue
            if anchor and dest.suffix == ".md":
                if dest not in anchors:
                    anchors[dest] = _anchors(dest)
                if anchor not in anchors[dest]:
                    broken.append(f"{where}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_slug_follows_github():
    assert gen_docs.slug("fuseflow-hw sim") == "fuseflow-hw-sim"
    assert gen_docs.slug("sim --json") == "sim---json"
    assert gen_docs.slug("Notes: sim") == "notes-sim"
    assert gen_docs.slug("sw_sim ⇄ RTL correlation") == "sw_sim--rtl-correlation"
    assert gen_docs.slug("Kernels (sw_sim, 64×64, 90 % sparse; bench/kernels.py)") == \
        "kernels-sw_sim-6464-90--sparse-benchkernelspy"


# ---------------------------------------------------------------- the index and the front door

def test_docs_index_lists_every_page():
    linked = {t.partition("#")[0] for t in _links(DOCS / "README.md")}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.name != "README.md" and p.name not in linked]
    assert not missing, f"docs/README.md does not list {missing}: add each page to its table"


def test_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.count("\n")
    assert lines <= 300, (f"README.md has {lines} lines (at most 300): move tables and reference to docs/ "
                          "and link them (docs/README.md, 'Adding to the docs')")
    assert INSTALL in readme
    assert TEST_COMMAND in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in ci.splitlines(), ".ci/run runs the README's test command"


# ---------------------------------------------------------------- the --json fields

def _section(path: Path, heading: str) -> str:
    """The text of ``path`` under ``heading`` up to the next heading."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    nxt = re.search(r"\n#{1,6} ", text[start + len(heading) + 2:])
    return text[start:start + len(heading) + 2 + (nxt.start() if nxt else len(text))]


def _missing(fields, text: str) -> list[str]:
    return [f for f in fields if f"`{f}`" not in text]


def test_cli_doc_names_the_rtl_json_fields():
    from fuseflow_cli.cmd_rtl import JSON_FIELDS

    assert not _missing(JSON_FIELDS, _section(DOCS / "cli.md", "### `rtl --json`"))


def test_cli_doc_names_the_synth_json_fields():
    from fpga.synth import SynthReport

    fields = [f.name for f in dataclasses.fields(SynthReport)] + ["fmax_goal_mhz", "runs_on_board"]
    assert not _missing(fields, _section(DOCS / "cli.md", "### `synth --json`"))


def test_cli_doc_names_the_primitives_json_fields():
    from fuseflow.ir.primitives import PRIMITIVES
    from fuseflow_cli.cmd_primitives import _record

    rec = _record(next(iter(PRIMITIVES.values())))
    fields = [*rec, *(rec["parameters"][0] if rec["parameters"] else {})]
    assert not _missing(fields, _section(DOCS / "cli.md", "### `primitives --json`"))


def test_sweeps_doc_names_the_result_columns():
    from fuseflow_cli.sweep_report import ROW_FIELDS

    assert not _missing(ROW_FIELDS, _section(DOCS / "sweeps.md", "## Outputs"))
