"""``fuseflow-hw primitives``: the SAMML primitive kinds, from their declarations (ports,
parameters with types and defaults, latency, II, summary)."""

from __future__ import annotations

import argparse
import json

from fuseflow.ir.primitives import PRIMITIVES, primitives_table

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("primitives", help="list the SAMML primitive kinds and their parameters",
                              description=__doc__)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="the docs tables (Markdown)")
    fmt.add_argument("--json", action="store_true", help="machine-readable: one record per kind")


def _record(spec) -> dict:
    return {"kind": spec.name, "family": spec.family, "summary": spec.summary,
            "latency": None if callable(spec.latency) else spec.latency, "ii": spec.ii,
            "tensor": spec.tensor.name.lower() if spec.tensor else None,
            "parameters": [{"name": f.name, "type": spec.param_type(f.name),
                            "default": spec.defaults.get(f.name), "required": f.name in spec.required,
                            "doc": f.metadata.get("doc", "")} for f in spec.fields()]}


def run(args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps([_record(s) for s in PRIMITIVES.values()], indent=1, default=_jsonable))
    else:
        print(primitives_table(markdown=args.markdown), end="")
    return 0


def _jsonable(v):
    return getattr(v, "value", list(v) if isinstance(v, tuple) else str(v))
