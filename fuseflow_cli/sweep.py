"""Design-space sweeps: a TOML file of grids expands into ``sim`` configurations that run on an
executor (:mod:`fuseflow.executor`), with a content-addressed result cache.

A sweep file::

    name = "fusion"                  # optional
    [defaults]                       # sim options every configuration shares (scalars)
    hidden = 16
    [[grid]]                         # each grid: the product of its list-valued keys
    model = ["gcn", "graphsage"]
    dataset = "karate"
    fusion = ["unfused", "partial", "full"]
    memory = ["ideal", "hbm2"]

Keys are ``fuseflow-hw sim`` options (:data:`KEYS`); a list is always an axis.  Every
configuration is the argument list of one ``sim`` run, parsed by the ``sim`` parser itself, so a
sweep measures exactly what ``fuseflow-hw sim ... --json`` prints.

The cache key of a configuration is the digest of its argument list, the contents of the files
it names and the sources of the code that computes the result; results are stored one JSON file
per key under the cache directory as they finish, so a killed sweep resumes where it stopped and
never runs a finished configuration again.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import socket
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuseflow.compiler.pipeline import pass_options
from fuseflow.executor import Executor
from fuseflow.ir.memory import MemoryError, parse_memory
from fuseflow.options import Kind, Option, Source

from . import cmd_sim
from .applies import check_sources
from .errors import UserError
from .models import ZOO, simulate_model_args

__all__ = ["KEYS", "Config", "Sweep", "SweepRun", "config_key", "load_sweep", "run_config", "run_sweep"]

# sweep key -> (sim option, type); "flag" options take no value (true sets them)
_SWEPT = Source.KERNEL | Source.GRAPH | Source.MODEL  # what ``sim`` runs
_PASS_KINDS = {Kind.INT: int, Kind.CHOICE: str, Kind.INDEX_MAP: "par"}


def _pass_key(opt: Option) -> tuple[str, type | str]:
    """The sweep key of a compiler pass option (from its declaration)."""
    if opt.kind is Kind.FLAG:
        return opt.cli_flag, "noflag" if opt.default else "flag"
    return opt.cli_flag, _PASS_KINDS.get(opt.kind, str)


KEYS: dict[str, tuple[str, type | str]] = {
    "model": ("--model", str), "dataset": ("--dataset", str), "fusion": ("--fusion", str), "assoc": ("--assoc", str),
    "hidden": ("--hidden", int), "features": ("--features", int), "nodes": ("--nodes", int),
    "feature_density": ("--feature-density", float), "seq": ("--seq", int), "dmodel": ("--dmodel", int), "heads": ("--heads", int),
    "blocks": ("--blocks", int), "numerics": ("--numerics", str),
    "kernel": ("--kernel", str), "graph": ("", "path"), "size": ("--size", int),
    "block": ("--block", int), "lanes": ("--lanes", int),  # the bspmm kernel's (not the block pass's)
    "density": ("--density", float), "seed": ("--seed", int), "data": ("--data", "path"),
    "schedule": ("--schedule", "schedule"),
    "memory": ("--memory", str), "onchip": ("--onchip", str),
    **{o.name: _pass_key(o) for o in pass_options() if o.sweep and o.cli and o.sources & _SWEPT},
}
_SCHEDULE_PRESETS = ("unfused", "partial", "full")


class _Parser(argparse.ArgumentParser):
    """The ``sim`` parser, raising :class:`UserError` instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(message)


def _sim_parser() -> argparse.ArgumentParser:
    root = _Parser(prog="fuseflow-hw")
    cmd_sim.add_parser(root.add_subparsers(dest="command", parser_class=_Parser))
    return root


@dataclass(frozen=True)
class Config:
    """One configuration: its sweep keys (for the results table) and its ``sim`` arguments."""

    keys: dict[str, Any]
    argv: tuple[str, ...]
    files: tuple[str, ...] = ()  # files it reads (their contents are part of the cache key)

    def label(self) -> str:
        return " ".join(f"{k}={_text(v)}" for k, v in self.keys.items())


@dataclass
class Sweep:
    name: str
    path: Path
    configs: list[Config]
    duplicates: int = 0  # configurations given twice (run once)
    axes: list[str] = field(default_factory=list)  # keys in the order first given


def _text(v: Any) -> str:
    if isinstance(v, Mapping):
        return ",".join(f"{i}={f}" for i, f in v.items()) or "none"
    return str(v)


def _check_value(where: str, key: str, value: Any) -> None:
    kind = KEYS[key][1]
    if kind in ("flag", "noflag"):
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif kind == "par":
        ok = isinstance(value, str | Mapping)
        if ok:
            _check_par(where, key, value)
    else:
        ok = isinstance(value, str)
    if ok and key == "memory":
        _check_memory(where, value)
    if not ok:
        want = {"flag": "true or false", "noflag": "true or false", int: "an integer", float: "a number",
                "par": "a string like \"i=2,j=2\" or a table like {i = 2}"}.get(kind, "a string")
        raise UserError(f"{where}: {key} = {value!r} must be {want} (or a list of them, one per axis point)")


def _check_memory(where: str, value: str) -> None:
    """A grid's memory system is named before any worker starts."""
    try:
        parse_memory(value, where=f"{where}: memory")
    except MemoryError as exc:
        raise UserError(str(exc)) from None


def _check_par(where: str, key: str, value: str | Mapping) -> None:
    """Each entry of a ``par`` value is INDEX = a whole number of lanes (1 to 64)."""
    items = list(value.items()) if isinstance(value, Mapping) else [
        tuple(x.split("=", 1)) if "=" in x else (x, None) for x in value.split(",") if x.strip()]
    for index, factor in items:
        text = str(factor).strip() if factor is not None else ""
        if isinstance(factor, bool) or not str(index).strip() or not text.isdigit() or not 1 <= int(text) <= 64:
            got = "has no factor" if factor is None else f"= {factor!r}"
            raise UserError(f"{where}: {key} \"{_text(value)}\": index {str(index).strip() or '(none)'} {got}; "
                            "each entry is INDEX=N, N a whole number of lanes from 1 to 64")


def _resolve_path(base: Path, text: str) -> str:
    p = Path(text)
    return str(p if p.is_absolute() else (base / p))


def _is_data_path(base: Path, text: str) -> bool:
    """A ``dataset`` value naming a file or a Planetoid / OGB directory, not a built-in name."""
    return Path(text).suffix in (".mtx", ".npz") or Path(_resolve_path(base, text)).is_dir()


def _argv(keys: Mapping[str, Any], base: Path) -> tuple[list[str], list[str]]:
    """The ``sim`` arguments of one configuration and the files it reads."""
    argv, files = ["sim"], []
    for key, value in keys.items():
        flag, kind = KEYS[key]
        if kind == "flag":
            argv += [flag] if value else []
        elif kind == "noflag":
            argv += [] if value else [flag]
        elif kind == "par":
            items = value.items() if isinstance(value, Mapping) else (
                x.split("=", 1) for x in value.split(",") if x.strip())
            for index, factor in items:
                argv += [flag, f"{str(index).strip()}={str(factor).strip()}"]
        elif kind in ("path", "schedule") or (key == "dataset" and _is_data_path(base, str(value))):
            if kind == "schedule" and value in _SCHEDULE_PRESETS:
                argv += [flag, value]
                continue
            path = _resolve_path(base, value)
            files.append(path)
            argv += [flag, path] if flag else [path]
        else:
            argv += [flag, str(value)]
    return argv + ["--json"], files


def _expand(where: str, grid: Mapping[str, Any], defaults: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for key, value in grid.items():
        if key not in KEYS:
            raise UserError(f"{where}: unknown key {key!r}; the keys are the sim options {', '.join(KEYS)}")
        for v in value if isinstance(value, list) else [value]:
            _check_value(where, key, v)
        if isinstance(value, list) and not value:
            raise UserError(f"{where}: {key} = [] has no values")
    merged = {**defaults, **grid}
    axes = [(k, v if isinstance(v, list) else [v]) for k, v in merged.items()]
    for combo in itertools.product(*(vals for _, vals in axes)):
        yield dict(zip((k for k, _ in axes), combo))


def _check_model(where: str, model: Any) -> None:
    """A grid's model is a zoo model or FILE.py[:NAME]: named before any worker starts."""
    if model is None or model in ZOO or str(model).split(":")[0].endswith(".py"):
        return
    raise UserError(f"{where}: model {model!r} is neither a zoo model ({', '.join(ZOO)}) nor FILE.py[:NAME]")


def load_sweep(path: str | Path) -> Sweep:
    """Read and expand a sweep file; every configuration is checked by the ``sim`` parser."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"sweep file {str(path)!r} does not exist")
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    unknown = set(doc) - {"name", "description", "defaults", "grid"}
    if unknown:
        raise UserError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))}; a sweep file has name, "
                        f"description, [defaults] and [[grid]] tables")
    defaults = doc.get("defaults", {})
    grids = doc.get("grid", [])
    if not isinstance(defaults, dict) or any(isinstance(v, list) for v in defaults.values()):
        raise UserError(f"{path}: [defaults] holds single values (put axes in a [[grid]])")
    if not isinstance(grids, list) or not grids:
        raise UserError(f"{path}: no [[grid]] table: nothing to sweep")
    list(_expand(f"{path} [defaults]", defaults, {}))  # checks the keys and values
    parser = _sim_parser()
    configs: list[Config] = []
    seen: set[tuple[str, ...]] = set()
    axes: list[str] = []
    duplicates = 0
    for gi, grid in enumerate(grids, 1):
        where = f"{path} grid {gi}"
        for keys in _expand(where, grid, defaults):
            given = sorted({"model", "kernel", "graph"} & set(keys))
            if not given:
                raise UserError(f"{where}: a configuration needs model, kernel or graph")
            if len(given) > 1:
                raise UserError(f"{where}: a configuration takes one of model, kernel and graph, "
                                f"not {' and '.join(given)}")
            _check_model(where, keys.get("model"))
            argv, files = _argv(keys, path.parent)
            try:  # the sim command line's own checks, and the options' sources (not ignored)
                sub = parser._subparsers._group_actions[0].choices["sim"]  # noqa: SLF001
                check_sources(sub, parser.parse_args(argv))
            except UserError as exc:
                raise UserError(f"{where} ({Config(keys, ()).label()}): {exc}") from None
            axes += [k for k in keys if k not in axes]
            if tuple(argv) in seen:
                duplicates += 1
                continue
            seen.add(tuple(argv))
            configs.append(Config(keys, tuple(argv), tuple(files)))
    return Sweep(str(doc.get("name", path.stem)), path, configs, duplicates, axes)


_CODE_DIGEST: str | None = None


def code_digest() -> str:
    """Digest of the sources that compute a configuration's result (compiler, cycle model, CLI)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256()
        for pkg in ("fuseflow", "sw_sim", "fuseflow_cli"):
            for f in sorted((root / pkg).rglob("*.p[yx]*")):
                if f.suffix in (".py", ".pxd"):
                    h.update(str(f.relative_to(root)).encode())
                    h.update(f.read_bytes())
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


def config_key(cfg: Config) -> str:
    """The content address of ``cfg``'s result: its arguments, its files' bytes, the code."""
    h = hashlib.sha256(json.dumps([list(cfg.argv), code_digest()]).encode())
    for f in cfg.files:
        p = Path(f)
        for part in sorted(p.rglob("*")) if p.is_dir() else [p]:  # a dataset directory: every file
            if part.is_file():
                h.update(str(part.relative_to(p.parent)).encode())
                h.update(part.read_bytes())
            elif not p.exists():
                h.update(f"missing:{f}".encode())
    return h.hexdigest()[:20]


def _summary_row(record: Mapping[str, Any]) -> dict[str, Any]:
    c = record.get("counters") or {}
    return {"cycles": record["cycles"], "check": record.get("ok"), "rel_error": record.get("error"),
            "wall_seconds": record.get("wall_seconds"), "flops": c.get("flops_total"),
            "bytes_read": c.get("bytes_read"), "bytes_written": c.get("bytes_written"),
            "bytes_offchip": c.get("bytes_offchip"), "intensity": c.get("intensity"),
            "graphs": len(record.get("graphs", [])) or 1, "engine": record.get("engine"),
            "source": record.get("source")}


def run_config(argv: tuple[str, ...]) -> dict[str, Any]:
    """Run one configuration (a worker job): the result row without the sweep's keys.  Bad input
    is a row with status ``error`` and the message; the sweep goes on."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {"status": "ok", "message": ""}
    try:
        args = _sim_parser().parse_args(list(argv))
        record = simulate_model_args(args)[0] if args.model else cmd_sim.simulate_graph(args)[0]
        row.update(_summary_row(record))
    except UserError as exc:
        row.update(status="error", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - one failing configuration must not stop the sweep; reported
        row.update(status="error", message=f"{type(exc).__name__}: {exc}")
    row["worker"] = f"{socket.gethostname()}:{os.getpid()}"
    row["run_seconds"] = round(time.perf_counter() - t0, 3)
    row["finished"] = time.time()
    return row


@dataclass
class SweepRun:
    rows: list[dict[str, Any]]  # one per configuration, in the sweep's order
    ran: int  # configurations run now
    cached: int  # configurations taken from the cache
    wall_seconds: float
    executor: str


def _write_atomic(path: Path, text: str) -> None:
    """``path`` holds ``text`` or what it held before, never a part of it (a sweep stopped by
    Ctrl-C or a kill in the middle of the write): written beside it, then renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:  # an interrupt or a full disk: no stray temporary file either
        tmp.unlink(missing_ok=True)
        raise


def _cached_row(path: Path) -> dict[str, Any] | None:
    """The row cached in ``path``; None when there is none or it is damaged (not a JSON row):
    the configuration runs again instead of the sweep stopping on it."""
    try:
        row = json.loads(path.read_text())
    except (FileNotFoundError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return row if isinstance(row, dict) and "status" in row else None


def run_sweep(sweep: Sweep, cache_dir: Path, executor: Executor, *,
              progress: Callable[[int, int, dict[str, Any]], None] | None = None,
              rerun_errors: bool = False) -> SweepRun:
    """Run every configuration of ``sweep`` not already in ``cache_dir``; results are written to
    the cache as they arrive (and each run is appended to ``cache_dir/runs.log``).  On Ctrl-C
    the KeyboardInterrupt's message says how many configurations the cache holds."""
    t0 = time.perf_counter()
    cache_dir.mkdir(parents=True, exist_ok=True)
    keys = [config_key(c) for c in sweep.configs]
    rows: list[dict[str, Any] | None] = [None] * len(keys)
    for i, k in enumerate(keys):
        row = _cached_row(cache_dir / f"{k}.json")
        if row is not None and (row.get("status") == "ok" or not rerun_errors):
            rows[i] = {**row, "cached": True}
    todo = [i for i, r in enumerate(rows) if r is None]
    cached = len(keys) - len(todo)
    done = cached
    if progress:
        progress(done, len(keys), {})
    with open(cache_dir / "runs.log", "a") as log:
        try:
            for j, row in executor.map_unordered(run_config, [(sweep.configs[i].argv,) for i in todo]):
                i = todo[j]
                row = {"key": keys[i], **row}
                _write_atomic(cache_dir / f"{keys[i]}.json", json.dumps(row) + "\n")
                log.write(json.dumps({"key": keys[i], "worker": row["worker"], "finished": row["finished"]}) + "\n")
                log.flush()
                rows[i] = {**row, "cached": False}
                done += 1
                if progress:
                    progress(done, len(keys), rows[i])
        except KeyboardInterrupt:
            # Ctrl-C: what finished is in the cache (each entry written whole); say so
            saved = sum((cache_dir / f"{k}.json").is_file() for k in keys)
            raise KeyboardInterrupt(f"{saved} of {len(keys)} configurations are in the cache {cache_dir}; "
                                    f"the same command runs the rest") from None
    out = [{"config": i, **_axes(sweep, cfg), **row} for i, (cfg, row) in enumerate(zip(sweep.configs, rows))]
    return SweepRun(out, len(todo), cached, time.perf_counter() - t0, executor.describe())


def _axes(sweep: Sweep, cfg: Config) -> dict[str, Any]:
    """The configuration's sweep keys as table cells (``None`` where it does not set one), plus
    ``lanes`` (the product of its par factors) when the sweep varies par."""
    cells: dict[str, Any] = {a: None for a in sweep.axes}
    for k, v in cfg.keys.items():
        cells[k] = _text(v) if isinstance(v, Mapping) else v
    if "par" in sweep.axes:
        lanes = 1
        for arg, nxt in zip(cfg.argv, cfg.argv[1:]):
            if arg == "--par":
                lanes *= int(nxt.split("=", 1)[1])
        cells["lanes"] = lanes
    return cells
