"""The SAMML primitive declarations: one :class:`PrimitiveSpec` per kind, grouped by family.

Each module of this package (``level``, ``join``, ``repeat``, ``coord``, ``memory``, ``alu``,
``accumulate``, ``mask``, ``stream``, ``parallel``) declares its kinds in a ``DECLARATIONS``
tuple; this package collects them, builds the :class:`NodeKind` enum from their names and the
:data:`PRIMITIVES` table.  sw_sim and hw keep one model per kind in files of the same family
name and register it by kind.  Adding a kind means one declaration here, one sw_sim model and
one RTL model (docs/architecture.md walks through an example).
"""

from __future__ import annotations

import enum
import importlib
import pkgutil

from . import base
from .base import *
from .base import PrimitiveSpec

__all__ = [*base.__all__, "FAMILIES", "PRIMITIVES", "NodeKind", "primitives_table"]  # noqa: PLE0604


def _declarations() -> list[PrimitiveSpec]:
    specs: list[PrimitiveSpec] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in ("base", "registry"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        specs += list(module.DECLARATIONS)
    names = [s.name for s in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RuntimeError(f"primitive kinds declared twice: {twice}")
    return specs


_SPECS = _declarations()

NodeKind = enum.Enum("NodeKind", [(s.name.upper(), s.name) for s in _SPECS],
                     module=__name__, qualname="NodeKind")
NodeKind.__doc__ = "Every declared primitive kind (built from the declarations)."

PRIMITIVES: dict[NodeKind, PrimitiveSpec] = {}
for _spec in _SPECS:
    object.__setattr__(_spec, "kind", NodeKind(_spec.name))
    PRIMITIVES[_spec.kind] = _spec

FAMILIES: dict[str, tuple[NodeKind, ...]] = {}
for _spec in _SPECS:
    FAMILIES[_spec.family] = (*FAMILIES.get(_spec.family, ()), _spec.kind)


def _ports_text(ports) -> str:
    return ", ".join(f"{p}:{k}" for p, k in ports.items()) or "-"


def _latency_text(spec: PrimitiveSpec) -> str:
    return spec.latency_doc if callable(spec.latency) else str(spec.latency)


def primitives_table(markdown: bool = True) -> str:
    """The table of every primitive (family, kind, ports with default parameters, parameters,
    latency, II, summary): the docs table and the CLI's listing."""
    rows = []
    for spec in PRIMITIVES.values():
        example = {k: _example_value(spec, k) for k in spec.required}
        ins, outs = spec.port_types(example)  # kinds, and lanes where they are more than one
        rows.append((spec.family, spec.name, _ports_text(ins), _ports_text(outs), spec.param_text(),
                     _latency_text(spec), str(spec.ii), spec.summary))
    head = ("family", "kind", "inputs", "outputs", "parameters", "latency", "II", "summary")
    if markdown:
        return _markdown(head, rows) + "\n" + _markdown(("kind", "parameter", "meaning"), [
            (spec.name, f.name, f.metadata.get("doc", "")) for spec in PRIMITIVES.values()
            for f in spec.fields()])
    return "\n".join(f"{r[1]:<11} [{r[0]}] in({r[2]}) out({r[3]}) params({r[4]}) latency {r[5]}: {r[7]}"
                     for r in rows) + "\n"


def _markdown(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _example_value(spec: PrimitiveSpec, key: str):
    """A stand-in for a required parameter when the ports are listed (n=2, first enum member)."""
    t = spec.hints()[key]
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return next(iter(t))
    return 2 if t is int else ""
