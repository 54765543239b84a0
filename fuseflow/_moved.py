"""Old import paths, kept for one release after the package was laid out by concept.

Each old module is a small shim that calls :func:`moved`: it warns (``DeprecationWarning``, naming
the new path) and puts the module at its new path in its place, so both paths name one module
object.  An old package path brings its submodules along.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from types import ModuleType

__all__ = ["moved"]


def moved(old: str, new: str) -> ModuleType:
    """Make ``old`` an alias of module ``new`` (and of its submodules, for a package)."""
    warnings.warn(f"{old} moved to {new}: import it from there (the old path goes away in the "
                  "next release)", DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    sys.modules[old] = module
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        sys.modules[f"{old}.{info.name}"] = importlib.import_module(f"{new}.{info.name}")
    return module
