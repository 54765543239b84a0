"""The two worked examples of docs/architecture.md are true: adding a switchable pass touches
exactly the two files the example shows (made in a copy of the tree, then every place the pass's
option must reach is checked), and adding a primitive touches exactly the files the example
lists (read off the registries for the example's kind)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import hw.registry
import sw_sim.registry
from fuseflow.cost.rules import RULES
from fuseflow.ir.primitives import PRIMITIVES, NodeKind

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text()
PACKAGES = ("fuseflow", "fuseflow_cli", "sw_sim", "hw", "rtl_sim", "fpga")


def _block(marker: str) -> tuple[str, str]:
    """(path, code) of the doc's python block that starts with ``# <marker>: path``."""
    for block in DOC.split("```python\n")[1:]:
        code = block.split("```")[0]
        head, _, body = code.partition("\n")
        if head.startswith(f"# {marker}: "):
            return head.removeprefix(f"# {marker}: ").strip(), body
    raise AssertionError(f"docs/architecture.md has no block '# {marker}: ...'")


def _apply_edit(text: str, edit: str) -> str:
    """Each line of ``edit`` replaces the line of ``text`` it shares the longest start with."""
    lines = text.split("\n")
    for new in filter(str.strip, edit.split("\n")):
        def shared(old: str, new: str = new) -> int:
            return next((k for k, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        k = max(range(len(lines)), key=lambda i: shared(lines[i]))
        assert shared(lines[k]) >= 20, f"no line of the file starts like {new!r}"
        lines[k] = new
    return "\n".join(lines)


CHECKS = r'''
import contextlib, io, sys
from fuseflow.compiler import compile_program, pass_names, describe_pipeline
from fuseflow.compiler.pipeline import Options
from fuseflow.compiler.catalog import gcn_layer
from fuseflow.schedule import ScheduleError, schedule_from_dict
from fuseflow_cli.cli import main
from fuseflow_cli.sweep import KEYS

assert "mindepth" in pass_names() and "min_depth" in describe_pipeline()
assert Options(min_depth=4).min_depth == 4
cp = compile_program(gcn_layer(8, 4, 4), min_depth=5)
assert all(e.depth >= 5 for g in cp.graphs for e in g.edges)
assert schedule_from_dict({"min_depth": 4}).min_depth == 4
try:
    schedule_from_dict({"min_depth": 99})
    raise SystemExit("min_depth = 99 accepted")
except ScheduleError as exc:
    assert "1 to 64" in str(exc), exc
assert KEYS["min_depth"] == ("--min-depth", int)
for argv in (["compile", "--help"], ["sim", "--help"]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(argv)
    assert "--min-depth" in out.getvalue(), argv
print("ok")
'''


def test_adding_a_switchable_pass_touches_two_files(tmp_path):
    new_path, new_code = _block("new file")
    edit_path, edit = _block("edit")
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / new_path).write_text(new_code)
    target = tmp_path / edit_path
    target.write_text(_apply_edit(target.read_text(), edit))
    proc = subprocess.run([sys.executable, "-c", CHECKS], cwd=tmp_path, capture_output=True,
                          text=True, env={"PATH": "", "FUSEFLOW_SW_SIM": "python", "HOME": str(tmp_path)},
                          check=False)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


def test_adding_a_primitive_touches_the_listed_files():
    listed = re.search(r"<!-- primitive files: (\w+) -->\n(.*?)<!-- end primitive files -->", DOC, re.S)
    assert listed, "docs/architecture.md lists no primitive files"
    kind = NodeKind(listed.group(1))
    files = re.findall(r"^- `([^`]+)`", listed.group(2), re.M)
    family = PRIMITIVES[kind].family
    where = [f"fuseflow/ir/primitives/{family}.py",
             *(fn.__module__.replace(".", "/") + ".py" for fn in (
                 RULES.models()[kind], sw_sim.registry.models()[kind], hw.registry.models()[kind]))]
    assert sorted(files) == sorted(where)
    assert PRIMITIVES[kind].name in (ROOT / f"fuseflow/ir/primitives/{family}.py").read_text()
