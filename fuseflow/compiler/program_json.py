"""A graph's own Einsum, kept in its JSON: the statements the graph computes, so that a run of the
graph file on anyone's data is checked against numpy (:func:`fuseflow.compiler.bounds.check_program`).

The record (``Graph.reference``) is plain JSON::

    {"tensors": {"A": {"shape": [4, 5], "format": {...} | null}, ...},
     "statements": [{"out": "T", "indices": ["i", "j"], "rhs": EXPR, "text": "T = A @ B"}],
     "outputs": ["T"], "aliases": {"A": "A_csc"}}

``EXPR`` is the index-level IR as nested objects: ``{"access": "A", "indices": [...]}``,
``{"unary": "relu", "arg": EXPR, "scalar": 0, "index": ""}``, ``{"binop": "*", "lhs": EXPR,
"rhs": EXPR}``, ``{"sum": [...indices], "op": "+", "body": EXPR}``.  ``aliases`` maps a tensor
the statements read to the graph tensor that holds it (a permuted copy: the same values stored
in another order).  Graphs of blocked (vector) programs carry no record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..ir.tensor import TensorFormat
from .program import (
    Access,
    BinOp,
    IExpr,
    Op,
    Program,
    ProgramError,
    Statement,
    Sum,
    TensorDecl,
    Unary,
    UnOp,
    accesses,
)

__all__ = ["expr_from_json", "expr_to_json", "group_reference", "program_from_reference"]


def expr_to_json(e: IExpr) -> dict[str, Any]:
    if isinstance(e, Access):
        return {"access": e.tensor, "indices": list(e.indices)}
    if isinstance(e, Unary):
        return {"unary": e.op.value, "arg": expr_to_json(e.arg), "scalar": e.scalar, "index": e.index}
    if isinstance(e, BinOp):
        return {"binop": e.op.value, "lhs": expr_to_json(e.lhs), "rhs": expr_to_json(e.rhs)}
    if isinstance(e, Sum):
        return {"sum": list(e.indices), "op": e.op.value, "body": expr_to_json(e.body)}
    raise TypeError(f"not an expression node: {type(e).__name__}")  # the compiler's own IR only


def expr_from_json(d: Any, where: str) -> IExpr:
    """The expression of a graph's reference record; a malformed one is a ``ProgramError``
    naming ``where``."""
    try:
        if "access" in d:
            return Access(str(d["access"]), tuple(str(i) for i in d["indices"]))
        if "unary" in d:
            return Unary(UnOp(d["unary"]), expr_from_json(d["arg"], where), d.get("scalar", 0), str(d.get("index", "")))
        if "binop" in d:
            return BinOp(Op(d["binop"]), expr_from_json(d["lhs"], where), expr_from_json(d["rhs"], where))
        if "sum" in d:
            return Sum(tuple(str(i) for i in d["sum"]), expr_from_json(d["body"], where), Op(d.get("op", "+")))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProgramError(f"{where}: malformed expression {str(d)[:80]}: {exc}") from None
    raise ProgramError(f"{where}: malformed expression {str(d)[:80]}: expected access, unary, binop or sum")


def group_reference(program: Program, statements: list[Statement], outputs: list[str],
                    aliases: Mapping[str, str]) -> dict[str, Any] | None:
    """The record of the ``statements`` a graph computes (None for a blocked program, whose
    values are vectors)."""
    names = {a.tensor for s in statements for a in accesses(s.rhs)} | {s.out for s in statements}
    decls = {n: program.decls[n] for n in sorted(names)}
    if any(d.vector is not None for d in decls.values()):
        return None
    return {
        "tensors": {n: {"shape": list(d.shape), "format": d.fmt.to_json() if d.fmt is not None else None}
                    for n, d in decls.items()},
        "statements": [{"out": s.out, "indices": list(s.indices), "rhs": expr_to_json(s.rhs), "text": s.text}
                       for s in statements],
        "outputs": list(outputs),
        "aliases": dict(aliases),
    }


def program_from_reference(d: Mapping[str, Any], where: str) -> Program:
    """The program of a graph's reference record (its outputs are the graph's outputs)."""
    p = Program(where)
    try:
        for name, t in d["tensors"].items():
            fmt = TensorFormat.from_json(t["format"]) if t.get("format") is not None else None
            p.decls[name] = TensorDecl(name, tuple(int(s) for s in t["shape"]), fmt)
        for k, s in enumerate(d["statements"]):
            rhs = expr_from_json(s["rhs"], f"{where}: statement {k}")
            st = Statement(k, str(s["out"]), tuple(str(i) for i in s["indices"]), rhs, str(s.get("text", "")))
            p.statements.append(st)
            p._assigned[st.out] = k
        p.outputs = [str(o) for o in d["outputs"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProgramError(f"{where}: malformed reference record: {exc}") from None
    unknown = [a.tensor for s in p.statements for a in accesses(s.rhs) if a.tensor not in p.decls]
    unknown += [o for o in p.outputs if o not in p._assigned]
    if unknown:
        raise ProgramError(f"{where}: the reference record names undeclared tensor(s) {', '.join(sorted(set(unknown)))}")
    return p
