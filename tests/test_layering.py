"""The packages form layers that only point down:

    fuseflow (core: IR, tokens, tensors, numerics, compiler, models)
      <- sw_sim, hw  (neither imports the other)
      <- rtl_sim
      <- fpga
      <- fuseflow_cli (nothing imports it)

Every ``import`` in every project file counts, also inside functions.  Also checked: no import
cycle between packages, and no ``try: import <project module> except ImportError``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> the packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "fuseflow": set(),
    "sw_sim": {"fuseflow"},
    "hw": {"fuseflow"},
    "rtl_sim": {"fuseflow", "sw_sim", "hw"},
    "fpga": {"fuseflow", "sw_sim", "hw", "rtl_sim"},
    "fuseflow_cli": {"fuseflow", "sw_sim", "hw", "rtl_sim", "fpga"},
}
PACKAGES = tuple(ALLOWED)
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def project_imports(tree: ast.AST) -> list[tuple[str, int]]:
    """(top-level project package, line) of every absolute import in ``tree`` (relative imports
    stay inside their own package)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        out += [(n.split(".")[0], node.lineno) for n in names if n.split(".")[0] in PACKAGES]
    return out


def guarded_imports(tree: ast.AST) -> list[int]:
    """Lines of ``try:`` blocks that import a project module and catch ImportError."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = set()
        for h in node.handlers:
            types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
            caught |= {t.id for t in types if isinstance(t, ast.Name)}
        body = ast.Module(body=node.body, type_ignores=[])
        relative = any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(body))
        if caught & _IMPORT_ERRORS and (project_imports(body) or relative):
            lines.append(node.lineno)
    return lines


def violations(package: str, path: str, source: str) -> list[str]:
    """What is wrong with the imports of one file of ``package``."""
    tree = ast.parse(source, filename=path)
    bad = [f"{path}:{line}: {package} imports {target} (a layer above it or beside it)"
           for target, line in project_imports(tree)
           if target != package and target not in ALLOWED[package]]
    bad += [f"{path}:{line}: try/except ImportError around a project import"
            for line in guarded_imports(tree)]
    return bad


def project_files() -> list[tuple[str, Path]]:
    return [(pkg, f) for pkg in PACKAGES for f in sorted((ROOT / pkg).rglob("*.py"))]


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {pkg: set() for pkg in PACKAGES}
    for pkg, f in project_files():
        graph[pkg] |= {t for t, _ in project_imports(ast.parse(f.read_text())) if t != pkg}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state and (cycle := visit(m)):
                return cycle
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (cycle := visit(n)):
            return cycle
    return None


def test_every_package_exists():
    for pkg in PACKAGES:
        assert (ROOT / pkg / "__init__.py").is_file(), pkg


def test_imports_point_down_and_are_not_guarded():
    bad = [v for pkg, f in project_files()
           for v in violations(pkg, str(f.relative_to(ROOT)), f.read_text())]
    assert not bad, "layering violations:\n" + "\n".join(bad)


def test_no_import_cycle_between_packages():
    assert find_cycle(package_graph()) is None


def test_importing_the_core_loads_no_other_package():
    """The AST check, observed: with every core module imported, no other package is loaded."""
    core = sorted(".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for f in (ROOT / "fuseflow").rglob("*.py")
                  if f.name != "zoo.py")  # the model zoo needs torch, an optional extra
    others = set(PACKAGES) - {"fuseflow"}
    code = ("import importlib, sys\n"
            f"for m in {core!r}:\n    importlib.import_module(m)\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {others!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("package", "source", "what"),
    [
        ("fuseflow", "def f():\n    from sw_sim import run_graph\n", "fuseflow imports sw_sim"),
        ("hw", "import sw_sim.run\n", "hw imports sw_sim"),
        ("rtl_sim", "from fpga.host import BoardLink\n", "rtl_sim imports fpga"),
        ("fpga", "import fuseflow_cli\n", "fpga imports fuseflow_cli"),
        ("rtl_sim", "try:\n    from fuseflow.suites import suite\nexcept ImportError:\n    pass\n",
         "try/except ImportError"),
        ("fpga", ("try:\n    from . import board_sim\nexcept (ValueError, ModuleNotFoundError):\n"
         "    pass\n"), "try/except ImportError"),
    ],
)
def test_the_check_catches_violations(package, source, what):
    [v] = violations(package, "x.py", source)
    assert what in v


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_optional_dependencies_may_be_guarded():
    assert violations("fpga", "x.py", "try:\n    import serial\nexcept ImportError:\n    pass\n") == []
