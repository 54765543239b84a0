"""The compiled cycle model: the hot modules of sw_sim built with Cython, kept in the user cache.

The Python files of sw_sim are the one source of the cycle model.  Beside each hot module sits a
``.pxd`` file that declares its classes as C extension types with typed fields (channels, FIFO
lists, counters) and its step methods as C methods; Cython compiles the unchanged ``.py`` file
with those declarations ("augmenting .pxd", Cython's pure-Python mode).  The compiled model
makes the same decisions in the same order as the Python one — the same cycles and values —
several times faster (``bench/sim_speed.py``).

Builds live in ``cache_root()/sw_sim/<key>/sw_sim/`` (``$FUSEFLOW_CACHE`` or the user cache),
where ``key`` hashes the sources of the compiled modules, their ``.pxd`` files, the Cython and
Python versions: editing a source selects (or makes) another build, so a stale build is never
loaded.  :func:`activate`, called by ``sw_sim/__init__.py`` before any model module is
imported, puts the build first on the package's search path.  ``FUSEFLOW_SW_SIM`` chooses:

* ``auto`` (default): use the build, making it first if there is none (about a minute, once
  per source version, with a message on stderr); if Cython or a C compiler is missing or the
  build fails, say so once and run the Python modules.
* ``compiled``: as ``auto``, but a failed build is an error.
* ``python``: the Python modules (no build).

:data:`ENGINE` tells which one runs (``"compiled"`` or ``"python"``); results carry it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import platformdirs
from filelock import FileLock

__all__ = ["COMPILED", "ENGINE", "MODES", "NativeBuildError", "activate", "build_dir", "cache_root"]

# the modules with a .pxd, compiled together (engine first: the others cimport it)
COMPILED = ("engine", "staged", "join", "alu", "memory", "level", "stream", "repeat", "nonlinear",
            "accumulate", "coord")
MODES = ("auto", "compiled", "python")
HERE = Path(__file__).resolve().parent
ENGINE = "python"  # set by activate()


class NativeBuildError(RuntimeError):
    """The compiled cycle model could not be built (the message says why)."""


# where the cache was before it followed the platform's convention: still used if it exists
LEGACY_CACHE = Path.home() / ".cache" / "fuseflow-hw"


def cache_root() -> Path:
    """The user cache of fuseflow-hw builds: ``$FUSEFLOW_CACHE`` if set, else
    ``~/.cache/fuseflow-hw`` if it exists (the earlier default, so existing builds are not
    orphaned), else the platform's user cache directory (``platformdirs``: on Linux
    ``$XDG_CACHE_HOME/fuseflow-hw``, which is ``~/.cache/fuseflow-hw`` when that is unset)."""
    if env := os.environ.get("FUSEFLOW_CACHE"):
        return Path(env)
    if LEGACY_CACHE.is_dir():
        return LEGACY_CACHE
    return Path(platformdirs.user_cache_dir("fuseflow-hw", appauthor=False))


def _cython_version() -> str | None:
    try:
        import Cython
    except ImportError:
        return None
    return Cython.__version__


def source_key(cython_version: str) -> str:
    """Hash of what a build depends on: the compiled modules' ``.py`` and ``.pxd`` files, the
    Cython version and the interpreter's extension ABI."""
    h = hashlib.sha256()
    for name in COMPILED:
        for suffix in (".py", ".pxd"):
            h.update(f"{name}{suffix}\0".encode())
            h.update((HERE / f"{name}{suffix}").read_bytes())
    h.update(f"cython {cython_version}\0{sysconfig.get_config_var('EXT_SUFFIX')}".encode())
    return h.hexdigest()[:16]


def build_dir(cython_version: str) -> Path:
    return cache_root() / "sw_sim" / source_key(cython_version) / "sw_sim"


def _built(d: Path) -> bool:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return all((d / f"{name}{suffix}").is_file() for name in COMPILED)


def _compile(dest: Path) -> None:
    """Cython + the C compiler on a copy of the sources; the extension modules go to ``dest``."""
    with tempfile.TemporaryDirectory(prefix="fuseflow-sw_sim-") as tmp:
        pkg = Path(tmp) / "sw_sim"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        for name in COMPILED:
            for suffix in (".py", ".pxd"):
                shutil.copy2(HERE / f"{name}{suffix}", pkg / f"{name}{suffix}")
        files = [f"sw_sim/{name}.py" for name in COMPILED]
        cmd = [sys.executable, "-m", "Cython.Build.Cythonize", "-q", "-i", "-3", "-j", "2",
               "-X", "annotation_typing=False", *files]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not _built(pkg):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise NativeBuildError(f"building the compiled cycle model failed:\n{tail}")
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=dest.parent))
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        for name in COMPILED:
            shutil.copy2(pkg / f"{name}{suffix}", staging / f"{name}{suffix}")
        if dest.exists():  # an incomplete directory left by hand
            shutil.rmtree(dest)
        os.replace(staging, dest)  # complete builds only: the directory appears at once


def ensure_build(cython_version: str) -> Path:
    """The build directory for the current sources, compiling it first if needed (one process
    at a time: the others wait on a lock and then find it built)."""
    d = build_dir(cython_version)
    if _built(d):
        return d
    d.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(d.parent / "lock"):
        if not _built(d):
            print("sw_sim: compiling the cycle model with Cython (once per source version, about "
                  "a minute; FUSEFLOW_SW_SIM=python skips it) ...", file=sys.stderr, flush=True)
            _compile(d)
    return d


def activate(package_path: list[str]) -> str:
    """Put the compiled modules first on ``package_path`` (``sw_sim.__path__``) as
    ``FUSEFLOW_SW_SIM`` says; returns the engine that will run (``compiled`` / ``python``)."""
    global ENGINE
    mode = os.environ.get("FUSEFLOW_SW_SIM", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise SystemExit(f"error: environment variable FUSEFLOW_SW_SIM={mode!r}: expected one of "
                         f"{', '.join(MODES)}")
    if mode == "python":
        ENGINE = "python"
        return ENGINE
    try:
        version = _cython_version()
        if version is None:
            raise NativeBuildError("Cython is not installed (pip install cython)")
        d = ensure_build(version)
    except (NativeBuildError, OSError) as exc:
        if mode == "compiled":
            raise SystemExit(f"error: FUSEFLOW_SW_SIM=compiled: {exc}") from None
        print(f"sw_sim: running the Python cycle model (same results, slower): {exc}",
              file=sys.stderr, flush=True)
        ENGINE = "python"
        return ENGINE
    package_path.insert(0, str(d))
    ENGINE = "compiled"
    return ENGINE
