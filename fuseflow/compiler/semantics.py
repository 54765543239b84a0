"""Checks and rewrites for the operators whose meaning on sparse operands needs care
(docs/compiler.md, "Expressions"): division (a denominator must have no implicit zeros),
``max`` / ``min`` (implicit zeros take part, as in numpy) and the host-side check of
denominator data.

Division ``x / y`` intersects coordinates like a product (it is 0 where ``x`` is), so it is
only defined where ``y`` has a value at every coordinate the iteration may visit: every tensor
under a denominator must be stored with dense levels only, and the compiler rejects anything
else naming the denominator and the tensor.  A stored 0 in a denominator is an error of the
input data (:func:`check_denominators`, called by the runner before simulating); a computed
denominator that becomes 0 is divided by the ALU's rule (``docs/numerics.md``: ``0/0 = 0``,
otherwise the saturation bound), which sw_sim counts as an overflow of that node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..ir.tensor import Format, TensorData
from .densify import is_iteration_tensor
from .fused import FusedOutput, VAccess, VBin, VExpr, View, VNamed, VUn, render_vexpr
from .program import (
    Access,
    BinOp,
    IExpr,
    LoweringError,
    Op,
    Program,
    ProgramError,
    Rejected,
    Sum,
    Unary,
    UnOp,
)

__all__ = ["check_denominators", "check_division", "denominator_inputs", "densified", "densified_notes",
           "iteration_only", "value_indices", "visits_every"]


def iteration_only(e: VExpr, views: Mapping[str, View]) -> bool:
    """``e`` is a product of dense iteration tensors (:mod:`.densify`): it only makes the
    iteration visit every coordinate; its value is 0 and is never loaded."""
    if isinstance(e, VAccess):
        return is_iteration_tensor(views[e.view].tensor)
    return isinstance(e, VBin) and e.op is Op.MUL and iteration_only(e.lhs, views) and \
        iteration_only(e.rhs, views)


def densified(e: VExpr, views: Mapping[str, View]) -> bool:
    """``e`` is an operand in union with iteration tensors (every coordinate visited)."""
    return isinstance(e, VBin) and e.op is Op.ADD and iteration_only(e.rhs, views)


def visits_every(e: VExpr, views: Mapping[str, View]) -> bool:
    """The iteration of ``e`` visits every coordinate of its value indices without densified
    iteration of ``e`` itself: at each index some operand of a sum, or every operand of a
    product, having the index enumerates it (``A + X`` with X dense; ``(A + _iter_i) + b_j``)."""
    return all(_full_at(e, x, views) for x in value_indices(e, views))


def _full_at(e: VExpr, x: str, views: Mapping[str, View]) -> bool:
    """``e`` enumerates every coordinate of index ``x`` under any coordinates above: a view
    stored dense down to ``x`` (its references there are never N), a sum with an operand that
    does, a product whose operands having ``x`` all do, an inlined intermediate that reduces
    nothing and does."""
    if isinstance(e, VAccess):
        v = views[e.view]
        levels = v.level_indices()
        return x in levels and all(f is Format.DENSE for f in v.fmt.levels[: levels.index(x) + 1])
    if isinstance(e, VUn):
        return _full_at(e.arg, x, views)
    if isinstance(e, VNamed):
        return value_indices(e.body, views) == set(e.indices) and _full_at(e.body, x, views)
    having = [y for y in (e.lhs, e.rhs) if x in value_indices(y, views)]
    full = [_full_at(y, x, views) for y in having]
    return bool(full) and (all(full) if e.op.product else any(full))


def densified_notes(outputs: Sequence[FusedOutput], views: Mapping[str, View]) -> list[str]:
    """What :mod:`.densify` added to ``outputs`` and why, for ``--explain`` (one line each)."""
    notes: list[str] = []

    def why(e: VBin, parent: VExpr | None, out: FusedOutput) -> str:
        if isinstance(parent, VUn) and parent.op is UnOp.LAYERNORM:
            return "layernorm takes every coordinate of the fibre"
        if isinstance(parent, VUn) and not parent.op.zero_preserving:
            fn = VUn(parent.op, e.lhs, parent.scalar, parent.index)
            return (f"{render_vexpr(fn, views)} is not 0 where its operand is 0 (f(0) != 0), so "
                    "every coordinate is computed (the result is dense)")
        if isinstance(parent, VBin) and not parent.op.product:
            other = parent.rhs if parent.lhs is e else parent.lhs
            return (f"{render_vexpr(other, views)} is broadcast over indices it lacks and reaches "
                    f"the coordinates where {render_vexpr(e.lhs, views)} has no entry")
        if out.reduce is not Op.ADD:
            return f"a {out.reduce.value} reduction takes every coordinate, implicit zeros included"
        return f"output {out.tensor} is stored dense there"

    def walk(e: VExpr, parent: VExpr | None, out: FusedOutput) -> None:
        if isinstance(e, VBin):
            if densified(e, views):
                idx = ", ".join(dict.fromkeys(views[v].indices[0] for v in views_under(e.rhs)))
                notes.append(f"densified iteration over {idx} ({render_vexpr(e.rhs, views)}): "
                             + why(e, parent, out))
            walk(e.lhs, e, out)
            walk(e.rhs, e, out)
        elif isinstance(e, VUn):
            walk(e.arg, e, out)
        elif isinstance(e, VNamed):
            walk(e.body, e, out)

    for o in outputs:
        walk(o.body, None, o)
    return list(dict.fromkeys(notes))


def views_under(e: VExpr) -> list[str]:
    if isinstance(e, VAccess):
        return [e.view]
    if isinstance(e, VBin):
        return views_under(e.lhs) + views_under(e.rhs)
    if isinstance(e, VUn):
        return views_under(e.arg)
    return views_under(e.body)


def sparse_view_under(e: VExpr, views: Mapping[str, View]) -> View | None:
    """The first view under ``e`` stored with a level that is not dense (its implicit zeros
    are not visited), or None."""
    for name in views_under(e):
        v = views[name]
        if any(f is not Format.DENSE for f in v.fmt.levels):
            return v
    return None


def value_indices(e: VExpr, views: Mapping[str, View]) -> set[str]:
    """The indices ``e``'s value varies over (an inlined intermediate's own indices, not the
    ones it reduces); none: ``e`` is one value (a full reduction), never an implicit zero."""
    if isinstance(e, VAccess):
        return set(views[e.view].indices)
    if isinstance(e, VNamed):
        return set(e.indices)
    if isinstance(e, VUn):
        return value_indices(e.arg, views)
    return value_indices(e.lhs, views) | value_indices(e.rhs, views)


def _divisions(e: VExpr) -> list[VBin]:
    if isinstance(e, VBin):
        own = [e] if e.op is Op.DIV else []
        return own + _divisions(e.lhs) + _divisions(e.rhs)
    if isinstance(e, VUn):
        return _divisions(e.arg)
    if isinstance(e, VNamed):
        return _divisions(e.body)
    return []


def check_division(out: FusedOutput, views: Mapping[str, View]) -> Rejected | None:
    """A denominator must have a value at every coordinate: every tensor under it stored with
    dense levels only (a compressed level's missing entries would be divisions by 0)."""
    for d in _divisions(out.body):
        if not value_indices(d.rhs, views):
            continue  # one value (a full reduction): no implicit zero
        if (v := sparse_view_under(d.rhs, views)) is not None:
            return Rejected(
                f"output {out.tensor}: the denominator {render_vexpr(d.rhs, views)} of "
                f"{render_vexpr(d, views)} reads {v.tensor}, which is stored {v.fmt}: its "
                "implicit zeros would be divisions by zero; store it dense (every level "
                "dense) or divide by a dense tensor", LoweringError)
    return None


def _denominator_accesses(e: IExpr, under: bool, out: dict[str, bool]) -> None:
    if isinstance(e, Access):
        out[e.tensor] = out.get(e.tensor, False) or under
    elif isinstance(e, BinOp):
        _denominator_accesses(e.lhs, under, out)
        _denominator_accesses(e.rhs, under or e.op is Op.DIV, out)
    elif isinstance(e, Sum):
        _denominator_accesses(e.body, under, out)
    elif isinstance(e, Unary):
        _denominator_accesses(e.arg, under, out)


def denominator_inputs(program: Program) -> dict[str, str]:
    """Input tensors read under a denominator: name -> the statement that divides by it."""
    inputs = set(program.inputs())
    out: dict[str, str] = {}
    for s in program.statements:
        seen: dict[str, bool] = {}
        _denominator_accesses(s.rhs, False, seen)
        for t, under in seen.items():
            if under and t in inputs:
                out.setdefault(t, s.text)
    return out


def check_denominators(program: Program, tensors: Mapping[str, TensorData]) -> None:
    """:class:`ProgramError` if an input read under a denominator has a 0 (division by zero),
    naming the tensor, the coordinate and the statement."""
    for name, stmt in denominator_inputs(program).items():
        if name not in tensors:
            continue
        dense = tensors[name].to_dense()
        zeros = np.argwhere(dense == 0)
        if zeros.size or dense.size == 0:
            at = tuple(int(x) for x in zeros[0]) if zeros.size else ()
            raise ProgramError(f"division by zero: input {name!r} is 0 at {at} and "
                               f"'{stmt}' divides by it ({len(zeros)} zero entries)")
