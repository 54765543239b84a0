"""Regenerate the generated parts of the docs from the code they describe.

    python tools/gen_docs.py          # rewrite every generated block that is out of date
    python tools/gen_docs.py --check  # only report (exit 1 when a committed doc differs)

A generated block sits between two marker lines in a Markdown file::

    <!-- generated: NAME (python tools/gen_docs.py; do not edit by hand) -->
    ...
    <!-- end generated -->

and everything between them is replaced; the text around the markers is written by hand.
:data:`BLOCKS` lists the blocks, the file each is in and what produces it:

* ``README.md`` *command table*: one row per ``fuseflow-hw`` subcommand (its ``--help`` line),
  linking to its section of ``docs/cli.md``;
* ``docs/cli.md`` *cli reference*: every command and every option, from the argparse parsers
  (``fuseflow_cli.cli.build_parser()``);
* ``docs/primitives.md`` *primitive table*: ``fuseflow.ir.primitives.primitives_table()`` (the
  output of ``fuseflow-hw primitives --markdown``), from the primitive declarations;
* ``docs/models.md`` *supported ops*: ``fuseflow.models.aten_ops.SUPPORTED``.

``tests/test_docs_generated.py`` regenerates every block in memory and fails when a committed
doc differs.  The output depends on the code only (no terminal width, no Python version's
argparse formatting, no machine-dependent defaults).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BEGIN = "<!-- generated: {name} (python tools/gen_docs.py; do not edit by hand) -->"
END = "<!-- end generated -->"
_BLOCK = re.compile(r"<!-- generated: (?P<name>[^(>]+?) \(python tools/gen_docs\.py; do not edit by hand\) -->\n"
                    r"(?P<body>.*?)" + re.escape(END), re.DOTALL)


# ---------------------------------------------------------------- Markdown helpers

def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (hyphens and
    underscores kept), spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _escape(text: str) -> str:
    """Plain text made safe for Markdown (and for a table cell): ``*`` would start emphasis,
    ``<`` an HTML tag, ``|`` a cell; a backslash stays a backslash."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("<", "\\<").replace("|", "\\|")


def _rest_to_markdown(text: str) -> str:
    """reST inline markup of a docstring as Markdown: ``x`` and :role:`x` become `x`; the text
    between code spans is escaped."""
    text = re.sub(r":[a-z]+:`~?([^`]*)`", r"``\1``", text)
    parts = re.split(r"(``[^`]*``)", text)
    return "".join(f"`{p[2:-2]}`" if p.startswith("``") and p.endswith("``") and len(p) >= 4 else _escape(p)
                   for p in parts)


def _paragraphs(text: str) -> str:
    """Paragraphs of a docstring, each joined onto one line."""
    return "\n\n".join(" ".join(par.split()) for par in re.split(r"\n\s*\n", text.strip()))


# ---------------------------------------------------------------- the command line

# the measuring commands' ``--json`` output is described by hand in docs/cli.md, under
# "Machine-readable output", one heading per command: "### `NAME --json`"
def _json_heading(name: str) -> str:
    return f"`{name} --json`"


def _notes_heading(name: str) -> str:
    return f"Notes: `{name}`"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _short_helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's one-line help (the line of ``fuseflow-hw --help``)."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.help or "" for a in action._choices_actions}


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        mv = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        mv = "{" + ",".join(map(str, action.choices)) + "}"
    elif action.option_strings:
        mv = action.dest.upper()
    else:
        mv = action.dest
    return mv


def _invocation(action: argparse.Action) -> str:
    """``-o DIR, --out DIR``, ``--skip``, ``graph`` (positional): written out here rather than
    by argparse, whose layout differs between Python versions."""
    if action.nargs == 0:  # store_true / store_const / count / version
        return ", ".join(action.option_strings)
    mv = _metavar(action)
    nargs = action.nargs
    if nargs == "?":
        arg = f"[{mv}]"
    elif nargs == "*":
        arg = f"[{mv} ...]"
    elif nargs == "+":
        arg = f"{mv} [{mv} ...]"
    elif isinstance(nargs, int) and nargs > 1:
        arg = " ".join([mv] * nargs)
    else:
        arg = mv
    if not action.option_strings:
        return arg
    return ", ".join(f"{o} {arg}" for o in action.option_strings)


def _help(action: argparse.Action, prog: str) -> str:
    """An option's help with argparse's ``%(name)s`` fields filled in."""
    text = action.help or ""
    if "%" in text:
        params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        params["prog"] = prog
        if action.choices is not None:
            params["choices"] = ", ".join(map(str, action.choices))
        text = text % params
    return " ".join(text.split())


def _usage(name: str, sp: argparse.ArgumentParser) -> str:
    positionals = []
    for a in sp._actions:
        if a.option_strings or a.help == argparse.SUPPRESS:
            continue
        inv = _invocation(a)
        positionals.append(inv if a.nargs in ("?", "*") or a.required else f"[{inv}]")
    return " ".join(["fuseflow-hw", name, "[OPTIONS]", *positionals])


def _options(sp: argparse.ArgumentParser, prog: str) -> list[str]:
    """One bullet per option, grouped as ``--help`` groups them (-h / --help left out)."""
    out: list[str] = []
    for group in sp._action_groups:
        actions = [a for a in group._group_actions
                   if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        title = group.title or "options"
        title = {"positional arguments": "Arguments", "options": "Options"}.get(title, title)
        out += [f"**{_escape(title[:1].upper() + title[1:])}**", ""]
        for a in actions:
            helptext = _help(a, prog)
            out.append(f"- `{_invocation(a)}`" + (f": {_escape(helptext)}" if helptext else ""))
        out.append("")
    return out


def _description(name: str, mod) -> str:
    """A subcommand module's docstring as Markdown, without its leading ``fuseflow-hw NAME:``."""
    doc = inspect.cleandoc(mod.__doc__ or "")
    doc = re.sub(rf"^``fuseflow-hw {name}[^`]*``:\s*", "", doc)
    if doc and doc.split(maxsplit=1)[0].strip(",.;:").isalpha():
        doc = doc[:1].upper() + doc[1:]
    return _rest_to_markdown(_paragraphs(doc))


def cli_reference() -> str:
    """docs/cli.md's generated block: the global options and one section per command."""
    from fuseflow_cli import cli

    parser = cli.build_parser()
    subs = _subparsers(parser)
    short = _short_helps(parser)
    lines = ["## fuseflow-hw", "", _escape(cli.DESCRIPTION), "", "```text",
             "fuseflow-hw [--version] [--debug] COMMAND [OPTIONS] ...", "```", ""]
    lines += ["**Options**", ""]
    for a in parser._actions:
        if a.option_strings and not isinstance(a, argparse._HelpAction):
            lines.append(f"- `{_invocation(a)}`: {_escape(_help(a, 'fuseflow-hw'))}")
    lines += ["", _escape(cli.EPILOG), "", "| command | what it does |", "|---|---|"]
    for name in cli.SUBCOMMANDS:
        lines.append(f"| [`{name}`](#{slug('fuseflow-hw ' + name)}) | {_escape(short[name])} |")
    lines.append("")
    for name, mod in cli.SUBCOMMANDS.items():
        sp = subs[name]
        lines += [f"## fuseflow-hw {name}", "", f"*{_escape(short[name])}*", "",
                  _description(name, mod), "", "```text", _usage(name, sp), "```", ""]
        lines += _options(sp, sp.prog)
        more = [f"[notes](#{slug(_notes_heading(name))})"]
        if any("--json" in a.option_strings for a in sp._actions):
            more.append(f"[`--json` fields](#{slug(_json_heading(name))})")
        lines += ["More: " + ", ".join(more) + ".", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def command_table() -> str:
    """README.md's command table: one row per command, linking to docs/cli.md."""
    from fuseflow_cli import cli

    short = _short_helps(cli.build_parser())
    rows = ["| command | what it does |", "|---|---|"]
    rows += [f"| [`fuseflow-hw {name}`](docs/cli.md#{slug('fuseflow-hw ' + name)}) | {_escape(short[name])} |"
             for name in cli.SUBCOMMANDS]
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------- primitives and ATen ops

def primitive_table() -> str:
    """docs/primitives.md's generated block: ``fuseflow-hw primitives --markdown``."""
    from fuseflow.ir.primitives import primitives_table

    return primitives_table(markdown=True)


_IDENT = re.compile(r"_?[A-Za-z][\w]*(?:\.[A-Za-z]\w*)*(?:\[\d+\])?(?:\([^()]*\))?")


def _split_top(text: str) -> list[str]:
    """``text`` cut at the separators ``", "`` and ``" / "`` outside parentheses, separators kept."""
    parts, depth, i, cur = [], 0, 0, ""
    while i < len(text):
        sep = next((s for s in (", ", " / ") if depth == 0 and text.startswith(s, i)), None)
        if sep:
            parts += [cur, sep]
            cur, i = "", i + len(sep)
            continue
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        cur += text[i]
        i += 1
    return [*parts, cur]


def _op_names(key: str) -> str:
    """A ``SUPPORTED`` key as Markdown: each op name in a code span, the words after it and the
    notes in parentheses as text (``dropout / native_dropout (eval)``)."""
    out = []
    for k, part in enumerate(_split_top(key)):
        m = _IDENT.match(part) if k % 2 == 0 else None
        out.append(f"`{m.group(0)}`{_escape(part[m.end():])}" if m else _escape(part))
    return "".join(out)


def _supported() -> dict[str, str]:
    """``fuseflow.models.aten_ops.SUPPORTED``, read from the source while it is one literal
    that nothing changes afterwards (no torch import, which costs seconds), else imported."""
    tree = ast.parse((ROOT / "fuseflow" / "models" / "aten_ops.py").read_text(encoding="utf-8"))
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "SUPPORTED"]
    assigns = [n for n in tree.body if isinstance(n, ast.Assign) and any(t in uses for t in n.targets)]
    if len(uses) == 1 and len(assigns) == 1:  # assigned once, never touched again
        try:
            return ast.literal_eval(assigns[0].value)
        except ValueError:
            pass
    from fuseflow.models.aten_ops import SUPPORTED

    return SUPPORTED


def supported_ops() -> str:
    """docs/models.md's generated block: the ATen ops the frontend lowers, and what each becomes."""
    rows = ["| ATen op | becomes |", "|---|---|"]
    rows += [f"| {_op_names(k)} | {_escape(v)} |" for k, v in _supported().items()]
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------- the blocks

# (file, block name) -> what produces its text
BLOCKS: dict[tuple[str, str], Callable[[], str]] = {
    ("README.md", "command table"): command_table,
    ("docs/cli.md", "cli reference"): cli_reference,
    ("docs/primitives.md", "primitive table"): primitive_table,
    ("docs/models.md", "supported ops"): supported_ops,
}


def regenerate(path: str, text: str, produced: dict[str, str]) -> str:
    """``text`` (the file ``path``) with each generated block's body replaced by ``produced``;
    an error when a block is missing, unknown or duplicated."""
    seen: list[str] = []

    def body(m: re.Match) -> str:
        name = m.group("name")
        if name not in produced:
            raise ValueError(f"{path}: unknown generated block {name!r} (known: {', '.join(produced)})")
        seen.append(name)
        return BEGIN.format(name=name) + "\n" + produced[name] + END

    new = _BLOCK.sub(body, text)
    missing = sorted(set(produced) - set(seen))
    if missing:
        raise ValueError(f"{path}: no generated block {', '.join(map(repr, missing))} "
                         f"(add the lines {BEGIN.format(name=missing[0])!r} and {END!r})")
    if len(seen) != len(set(seen)):
        raise ValueError(f"{path}: a generated block appears twice: {seen}")
    return new


def generated(root: Path = ROOT) -> dict[str, tuple[str, str]]:
    """Every file with generated blocks: path -> (its text now, its text regenerated)."""
    sys.path.insert(0, str(root))
    by_file: dict[str, dict[str, str]] = {}
    for (path, name), produce in BLOCKS.items():
        by_file.setdefault(path, {})[name] = produce()
    out = {}
    for path, produced in by_file.items():
        old = (root / path).read_text(encoding="utf-8")
        out[path] = (old, regenerate(path, old, produced))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when a generated block is out of date")
    args = ap.parse_args(argv)
    stale = []
    for path, (old, new) in generated().items():
        if old != new:
            stale.append(path)
            if not args.check:
                (ROOT / path).write_text(new, encoding="utf-8")
    verb = "out of date" if args.check else "regenerated"
    print(f"{verb}: {', '.join(stale)}" if stale else "generated docs are up to date")
    return 1 if (stale and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
