"""Code-health limits the architecture promises: no function above McCabe complexity 15, and
project modules imported inside a function only to defer an optional heavy dependency (torch),
with a comment saying so."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fuseflow", "sw_sim", "hw", "rtl_sim", "fpga", "fuseflow_cli")


def test_no_function_above_complexity_15():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "C901", "--config",
                           "lint.mccabe.max-complexity=15", "--output-format", "concise",
                           *PACKAGES, "tests", "bench", "examples"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _function_level_project_imports(path: Path) -> list[tuple[int, str]]:
    lines = path.read_text().splitlines()
    out = []
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.ImportFrom):
                mod, relative = n.module or "", bool(n.level)
            elif isinstance(n, ast.Import):
                mod, relative = n.names[0].name, False
            else:
                continue
            if relative or mod.split(".")[0] in PACKAGES:
                # the reason must be written on the lines just above the import
                above = " ".join(lines[max(0, n.lineno - 4):n.lineno - 1]).lower()
                out.append((n.lineno, above))
    return out


def test_function_level_project_imports_only_defer_torch():
    bad = []
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            for line, above in _function_level_project_imports(f):
                if "torch" not in above:
                    bad.append(f"{f.relative_to(ROOT)}:{line}")
    assert not bad, f"imports of project modules inside functions without a reason: {bad}"
