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
    par = { i = 4, j = 4 }
    block = { j = 16 }   # sparsity blocking: j's dimension in blocks of 16, vectors of 16 lanes
    [orders]
    S = "ijk"

Every field is optional; a field that is not set leaves the command's default.  Unknown keys,
wrong types and bad values are errors naming the file and the key.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .ir.memory import MemoryError, MemoryModel, parse_memory
from .ir.primitives.parallel import MAX_LANES

__all__ = ["FUSIONS", "PRESETS", "Schedule", "ScheduleError", "load_schedule", "parse_block", "parse_par"]

FUSIONS = ("unfused", "partial", "full")


class ScheduleError(ValueError):
    """A schedule file or option that is not valid (names the file / option and the key)."""


@dataclass(frozen=True)
class Schedule:
    name: str = "default"
    fusion: str | None = None
    orders: Mapping[str, str] = field(default_factory=dict)
    par: Mapping[str, int] = field(default_factory=dict)
    locate: bool | None = None
    skip: bool | None = None
    memory: MemoryModel | None = None
    onchip: tuple[str, ...] | None = None
    block: Mapping[str, int] = field(default_factory=dict)  # {index: block size}: sparsity blocking
    lanes: int | None = None  # vector lanes of the blocked dimension (default: the block size)

    def with_par(self, par: Mapping[str, int]) -> Schedule:
        """This schedule with ``par`` added (its factors replace the schedule's for the same
        index)."""
        if not par:
            return self
        name = self.name if self.name != "default" else "custom"
        return replace(self, name=name, par={**self.par, **par})

    def to_json(self) -> dict[str, Any]:
        """Stable field names: name, fusion, orders, par, locate, skip, memory (the model's
        fields), onchip (null: not set), block, lanes."""
        return {"name": self.name, "fusion": self.fusion, "orders": dict(self.orders),
                "par": dict(self.par), "locate": self.locate, "skip": self.skip,
                "memory": self.memory.to_json() if self.memory else None,
                "onchip": list(self.onchip) if self.onchip is not None else None,
                "block": dict(self.block), "lanes": self.lanes}

    def describe(self) -> str:
        parts = [f"schedule {self.name}"]
        if self.fusion:
            parts.append(f"fusion {self.fusion}")
        if self.orders:
            parts.append("orders " + ", ".join(f"{t}={o}" for t, o in self.orders.items()))
        parts.append("par " + (", ".join(f"{i}={f}" for i, f in self.par.items()) or "none"))
        for key in ("locate", "skip"):
            if getattr(self, key) is not None:
                parts.append(f"{key} {'on' if getattr(self, key) else 'off'}")
        if self.memory is not None:
            parts.append(f"memory {self.memory.name}")
        if self.onchip:
            parts.append("on chip " + ", ".join(self.onchip))
        if self.block:
            parts.append("block " + ", ".join(f"{i}={b}" for i, b in self.block.items())
                         + (f" lanes {self.lanes}" if self.lanes else ""))
        return "; ".join(parts)


PRESETS = {f: Schedule(f, fusion=f) for f in FUSIONS}

_KEYS = {"name": str, "fusion": str, "orders": dict, "par": dict, "locate": bool, "skip": bool,
         "memory": (str, dict), "onchip": list, "block": dict, "lanes": int}


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
        data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw)
    except (OSError, UnicodeDecodeError) as exc:
        raise ScheduleError(f"schedule {text!r}: cannot read it: {exc}") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise ScheduleError(f"schedule {text!r}: not valid {kind}: {exc}") from None
    return schedule_from_dict(data, source=f"schedule {text!r}", default_name=path.stem)


def schedule_from_dict(data: Any, *, source: str = "schedule", default_name: str = "custom") -> Schedule:
    if not isinstance(data, dict):
        raise ScheduleError(f"{source}: expected a table of keys ({', '.join(_KEYS)})")
    problems = []
    for key, value in data.items():
        if key not in _KEYS:
            problems.append(f"unknown key {key!r} (keys: {', '.join(_KEYS)})")
        elif not isinstance(value, _KEYS[key]):
            kinds = _KEYS[key] if isinstance(_KEYS[key], tuple) else (_KEYS[key],)
            problems.append(f"{key} = {value!r} must be {' or '.join(k.__name__ for k in kinds)}")
    if problems:
        raise ScheduleError(f"{source}: " + "; ".join(problems))
    fusion = data.get("fusion")
    if fusion is not None and fusion not in FUSIONS:
        raise ScheduleError(f"{source}: fusion = {fusion!r} must be one of {', '.join(FUSIONS)}")
    orders = data.get("orders", {})
    for tensor, order in orders.items():
        if not isinstance(order, str) or not order:
            raise ScheduleError(f"{source}: orders.{tensor} = {order!r} must be index letters")
    par = {str(i): _factor(f, f"{source}: par.{i}") for i, f in data.get("par", {}).items()}
    memory = None
    if "memory" in data:
        try:
            memory = parse_memory(data["memory"], where=f"{source}: memory")
        except MemoryError as exc:
            raise ScheduleError(str(exc)) from None
    onchip = data.get("onchip")
    if onchip is not None:
        bad = [t for t in onchip if not isinstance(t, str) or not t]
        if bad:
            raise ScheduleError(f"{source}: onchip = {onchip!r} must be a list of tensor names")
        onchip = tuple(onchip)
    block = {str(i): _block_size(b, f"{source}: block.{i}") for i, b in data.get("block", {}).items()}
    lanes = data.get("lanes")
    if lanes is not None:
        lanes = _block_size(lanes, f"{source}: lanes")
    return Schedule(data.get("name", default_name), fusion, dict(orders), par,
                    data.get("locate"), data.get("skip"), memory, onchip, block, lanes)


def _block_size(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleError(f"{where} = {value!r} must be a whole number")
    if value < 1 or value & (value - 1) or value > MAX_LANES:
        raise ScheduleError(f"{where} = {value} must be a power of two from 1 to {MAX_LANES}")
    return value


def parse_block(items: list[str] | None) -> dict[str, int]:
    """``--block j=16`` as ``{"j": 16}`` (:class:`ScheduleError` if malformed)."""
    out: dict[str, int] = {}
    for item in items or []:
        index, sep, value = item.partition("=")
        index = index.strip()
        if not sep or not index or not value.strip().isdigit():
            raise ScheduleError(f"--block {item!r}: expected INDEX=SIZE, e.g. j=16")
        out[index] = _block_size(int(value), f"--block {index}")
    return out


def _factor(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleError(f"{where} = {value!r} must be a whole number of lanes")
    if not 1 <= value <= MAX_LANES:
        raise ScheduleError(f"{where} = {value} must be 1 to {MAX_LANES}")
    return value


def parse_par(items: list[str] | None) -> dict[str, int]:
    """``--par i=4 --par j=2`` as ``{"i": 4, "j": 2}`` (:class:`ScheduleError` if malformed)."""
    out: dict[str, int] = {}
    for item in items or []:
        index, sep, value = item.partition("=")
        index = index.strip()
        if not sep or not index or not value.strip().lstrip("-").isdigit():
            raise ScheduleError(f"--par {item!r}: expected INDEX=FACTOR, e.g. i=4")
        out[index] = _factor(int(value), f"--par {index}")
    return out
