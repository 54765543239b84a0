"""The programs of ``examples/programs/`` as modules, for tests that compile them at other
sizes: ``load_example("spmm").program(8, 4)``."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "programs"


@cache
def load_example(name: str) -> ModuleType:
    """``examples/programs/<name>.py`` loaded as a module (``program()``, ``example_data()``)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
