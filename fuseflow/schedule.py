"""Schedules: one object for how a program or model is compiled.

A :class:`Schedule` holds the fusion granularity, the dataflow order of statements, the
parallelization factors per index (``par``), the compiler switches (locate, skip) and the
memory system: the off-chip memory model (``memory``, a preset name or a table of fields; see
:mod:`fuseflow.ir.memory`) and the tensors kept on chip (``onchip``).  It is
built in Python, read from a small TOML or JSON file, or named: the presets ``unfused``,
``partial`` and ``full`` are the fusion granularities with nothing else set.  Example file::

    # attention.toml
    name = "attention-par"
    fusion = "full"
    par = { i = 4, j = 4 }   # or par = { auto = 16 }: the factors the estimate picks within 16 lanes
    block = { j = 16 }   # sparsity blocking: j's dimension in blocks of 16, vectors of 16 lanes
    [orders]
    S = "ijk"

Every field is optional; a field that is not set leaves the command's default.  Unknown keys,
wrong types and bad values are errors naming the file and the key.  The keys are ``name``,
``memory`` and ``onchip`` (:data:`OWN`) and the compiler passes' options that declare
themselves schedule keys (:func:`fuseflow.compiler.pipeline.pass_options`): a new pass option is
a schedule key without a change here.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .compiler.passes.par import DEFAULT_PAR_BUDGET
from .compiler.pipeline import pass_options
from .ir.memory import MemoryError, MemoryModel, is_tensor_name, parse_memory
from .ir.primitives.parallel import MAX_LANES
from .options import Kind, Option, OptionError, Source

__all__ = ["AUTO", "DEFAULT_PAR_BUDGET", "FUSIONS", "OWN", "PRESETS", "SCHEDULE_OPTIONS", "Schedule",
           "ScheduleError", "check_par_budget", "load_schedule", "par_budget", "parse_block", "parse_par"]

FUSIONS = ("unfused", "partial", "full")

# the schedule's own keys (not options of a pass)
OWN = (Option("name", Kind.ANY, "default", "the schedule's name (default: the file's stem)",
              sources=Source.ALL, cli=False, sweep=False),
       Option("memory", Kind.ANY, None, "off-chip memory model: a preset name or a table of its "
              "fields (docs/memory.md)", sources=Source.ALL, cli=False, sweep=False),
       Option("onchip", Kind.ANY, None, "tensors kept in on-chip block RAM", sources=Source.ALL,
              cli=False, sweep=False))
# the pass options a schedule sets: {name: declaration}
SCHEDULE_OPTIONS: dict[str, Option] = {o.name: o for o in pass_options() if o.schedule}
_MAPS = (Kind.INDEX_MAP, Kind.TEXT_MAP)


class ScheduleError(ValueError):
    """A schedule file or option that is not valid (names the file / option and the key)."""


@dataclass(frozen=True)
class Schedule:
    """A schedule: its name, memory system, and the pass options it sets (``passes``; read
    them as attributes: ``schedule.par``, ``schedule.locate``; unset: ``None``, or ``{}`` for a
    map)."""

    name: str = "default"
    memory: MemoryModel | None = None
    onchip: tuple[str, ...] | None = None
    passes: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, key: str) -> Any:
        opt = SCHEDULE_OPTIONS.get(key) if not key.startswith("_") and key != "passes" else None
        if opt is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")
        return self.passes.get(key, {} if opt.kind in _MAPS else None)

    def with_par(self, par: Mapping[str, int]) -> Schedule:
        """This schedule with ``par`` added (its factors replace the schedule's for the same
        index)."""
        if not par:
            return self
        name = self.name if self.name != "default" else "custom"
        return replace(self, name=name, passes={**self.passes, "par": {**self.par, **par}})

    def to_json(self) -> dict[str, Any]:
        """Stable field names: name, the pass options (in pipeline order), memory (the model's
        fields), onchip (null: not set)."""
        out: dict[str, Any] = {"name": self.name}
        for key, opt in SCHEDULE_OPTIONS.items():
            value = getattr(self, key)
            out[key] = getattr(value, "value", dict(value) if opt.kind in _MAPS else value)
        out["memory"] = self.memory.to_json() if self.memory else None
        out["onchip"] = list(self.onchip) if self.onchip is not None else None
        return out

    def describe(self) -> str:
        parts = [f"schedule {self.name}"]
        for key, opt in SCHEDULE_OPTIONS.items():
            text = _describe(key, opt, getattr(self, key), self)
            if text:
                parts.append(text)
        if self.memory is not None:
            parts.append(f"memory {self.memory.name}")
        if self.onchip:
            parts.append("on chip " + ", ".join(self.onchip))
        return "; ".join(parts)


def _describe(key: str, opt: Option, value: Any, sched: Schedule) -> str:
    if key == "lanes":  # written with block
        return ""
    if key == "par":  # always said
        return "par " + (", ".join(f"{i}={f}" for i, f in value.items()) or "none")
    if not value and opt.kind in _MAPS or value is None:
        return ""
    if key == "block":
        return ("block " + ", ".join(f"{i}={b}" for i, b in value.items())
                + (f" lanes {sched.lanes}" if sched.lanes else ""))
    if opt.kind in _MAPS:
        return f"{key} " + ", ".join(f"{t}={o}" for t, o in value.items())
    if opt.kind is Kind.FLAG:
        return f"{key} {'on' if value else 'off'}"
    return f"{key} {value}"


PRESETS = {f: Schedule(f, passes={"fusion": f}) for f in FUSIONS}

_TYPES = {Kind.FLAG: bool, Kind.INT: int, Kind.CHOICE: str, Kind.INDEX_MAP: dict, Kind.TEXT_MAP: dict,
          Kind.ANY: object}
_KEYS = {"name": str, **{k: _TYPES[o.kind] for k, o in SCHEDULE_OPTIONS.items()},
         "memory": (str, dict), "onchip": list}


def load_schedule(text: str) -> Schedule:
    """A preset name (``unfused``, ``partial``, ``full``) or a ``.toml`` / ``.json`` file."""
    if text in PRESETS:
        return PRESETS[text]
    path = Path(text)
    if not path.exists():
        raise ScheduleError(f"schedule {text!r}: no such file, and not a preset "
                            f"({', '.join(PRESETS)})")
    try:
        raw = path.read_text()
        data = (json.loads(raw, object_pairs_hook=_unique_keys) if path.suffix == ".json"
                else tomllib.loads(raw))
    except _DuplicateKey as exc:
        raise ScheduleError(f"schedule {text!r}: key {exc.args[0]!r} is given twice") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScheduleError(f"schedule {text!r}: cannot read it: {exc}") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise ScheduleError(f"schedule {text!r}: not valid {kind}: {exc}") from None
    except RecursionError:
        raise ScheduleError(f"schedule {text!r}: nested too deeply to be a schedule") from None
    return schedule_from_dict(data, source=f"schedule {text!r}", default_name=path.stem)


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's keys as a dict (:class:`_DuplicateKey` for a key given twice)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _type_problems(data: dict) -> list[str]:
    problems = []
    for key, value in data.items():
        if key not in _KEYS:
            problems.append(f"unknown key {key!r} (keys: {', '.join(_KEYS)})")
        elif not isinstance(value, _KEYS[key]):
            kinds = _KEYS[key] if isinstance(_KEYS[key], tuple) else (_KEYS[key],)
            problems.append(f"{key} = {value!r} must be {' or '.join(k.__name__ for k in kinds)}")
    return problems


def _pass_value(key: str, value: Any, source: str) -> Any:
    """A schedule's value of pass option ``key``, checked by its declaration."""
    opt = SCHEDULE_OPTIONS[key]
    if key == "fusion" and value not in FUSIONS:
        raise ScheduleError(f"{source}: fusion = {value!r} must be one of {', '.join(FUSIONS)}")
    if key == "orders":
        for tensor, order in value.items():
            if not isinstance(order, str) or not order:
                raise ScheduleError(f"{source}: orders.{tensor} = {order!r} must be index letters")
    try:
        if opt.kind is Kind.INDEX_MAP:
            return {str(i): opt.check_entry(n, f"{source}: {key}.{i}") for i, n in value.items()}
        opt.check(value, f"{source}: {key}")
    except OptionError as exc:
        raise ScheduleError(str(exc)) from None
    return dict(value) if opt.kind in _MAPS else value


def schedule_from_dict(data: Any, *, source: str = "schedule", default_name: str = "custom") -> Schedule:
    if not isinstance(data, dict):
        raise ScheduleError(f"{source}: expected a table of keys ({', '.join(_KEYS)})")
    problems = _type_problems(data)
    if problems:
        raise ScheduleError(f"{source}: " + "; ".join(problems))
    passes = {k: _pass_value(k, v, source) for k, v in data.items() if k in SCHEDULE_OPTIONS}
    par_budget(passes.get("par"), f"{source}: par")
    memory = None
    if "memory" in data:
        try:
            memory = parse_memory(data["memory"], where=f"{source}: memory")
        except MemoryError as exc:
            raise ScheduleError(str(exc)) from None
    onchip = data.get("onchip")
    if onchip is not None:
        bad = [t for t in onchip if not is_tensor_name(t)]
        if bad:
            raise ScheduleError(f"{source}: onchip = {onchip!r} must be a list of tensor names")
        onchip = tuple(onchip)
    return Schedule(data.get("name", default_name), memory, onchip, passes)


def parse_index_map(opt: Option, items: list[str] | None, example: str,
                    form: str | None = None) -> dict[str, int]:
    """``--FLAG INDEX=N`` items of an INDEX_MAP option as ``{INDEX: N}`` (each checked by the
    declaration; :class:`ScheduleError` if malformed)."""
    out: dict[str, int] = {}
    for item in items or []:
        index, sep, value = item.partition("=")
        index = index.strip()
        if not sep or not index or not value.strip().lstrip("-").isdigit():
            raise ScheduleError(f"{opt.cli_flag} {item!r}: expected {form or opt.metavar}, e.g. {example}")
        if index in out:
            raise ScheduleError(f"{opt.cli_flag} {item}: index {index} is given twice "
                                f"({opt.cli_flag} {index}={out[index]} too); give it once")
        try:
            out[index] = opt.check_entry(int(value), f"{opt.cli_flag} {index}")
        except OptionError as exc:
            raise ScheduleError(str(exc)) from None
    return out


def parse_block(items: list[str] | None) -> dict[str, int]:
    """``--block j=16`` as ``{"j": 16}`` (:class:`ScheduleError` if malformed)."""
    return parse_index_map(SCHEDULE_OPTIONS["block"], items, "j=16")


def parse_par(items: list[str] | None) -> dict[str, int]:
    """``--par i=4 --par j=2`` as ``{"i": 4, "j": 2}``; ``--par auto=L`` (``--par auto``: the
    default budget) as ``{"auto": L}`` (:class:`ScheduleError` if malformed, for a budget that
    is not a power of two within the lane maximum, and for auto next to explicit factors)."""
    auto = [x for x in items or [] if x.partition("=")[0].strip() == AUTO]
    out = parse_index_map(SCHEDULE_OPTIONS["par"], [x for x in items or [] if x not in auto], "i=4",
                          "INDEX=FACTOR or auto[=LANES]")
    if len(auto) > 1:
        raise ScheduleError(f"--par {auto[0]} and --par {auto[1]}: give auto once")
    if not auto:
        return out
    text = auto[0].strip()
    value = text.partition("=")[2].strip() if "=" in text else str(DEFAULT_PAR_BUDGET)
    if not value.lstrip("-").isdigit():
        raise ScheduleError(f"--par {text!r}: expected auto or auto=LANES, a power of two such as "
                            f"auto={DEFAULT_PAR_BUDGET}")
    budget = check_par_budget(int(value), "--par auto")
    if out:
        first = next(iter(out))
        raise ScheduleError(f"--par {text} and --par {first}={out[first]}: auto chooses every factor within "
                            "the lane budget; give either auto or INDEX=N factors")
    return {AUTO: budget}


AUTO = "auto"  # the key of par that asks for the estimate's factors (fuseflow.cost.par_search)


def check_par_budget(budget: object, where: str = "--par auto") -> int:
    """``budget`` as a lane budget: a power of two from 1 to the lane maximum
    (:class:`ScheduleError` naming ``where`` otherwise)."""
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise ScheduleError(f"{where}={budget!r}: the lane budget must be a whole number (a power of two)")
    if budget < 1:
        raise ScheduleError(f"{where}={budget}: the lane budget must be at least 1 (a power of two such as "
                            f"{DEFAULT_PAR_BUDGET})")
    if budget > MAX_LANES:
        raise ScheduleError(f"{where}={budget}: at most {MAX_LANES} lanes (the largest parallel region)")
    if budget & (budget - 1):
        lo = 1 << (budget.bit_length() - 1)
        raise ScheduleError(f"{where}={budget}: the lane budget must be a power of two (e.g. {lo} or {lo * 2})")
    return budget


def par_budget(par: Mapping[str, int] | None, where: str = "par") -> int | None:
    """The lane budget of ``par`` (a schedule's, the command line's added) when it asks for
    ``auto``, else None; auto next to explicit factors is a :class:`ScheduleError`."""
    if not par or AUTO not in par:
        return None
    budget = check_par_budget(par[AUTO], f"{where} auto")
    others = {i: f for i, f in par.items() if i != AUTO}
    if others:
        given = ", ".join(f"{i}={f}" for i, f in others.items())
        raise ScheduleError(f"{where} auto={budget} and {given}: auto chooses every factor within the lane "
                            "budget; give either auto or INDEX=N factors (in the schedule file or on the "
                            "command line)")
    return budget
