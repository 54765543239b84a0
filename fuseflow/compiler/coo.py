"""COO operands (docs/compiler.md, "COO operands").

A COO tensor stores one non-unique compressed level (every stored entry is a position of its
own, so a coordinate repeats once per entry below it) followed by singleton levels (one
coordinate per parent position).  A scanner walks such levels like compressed ones, but the
coordinates of a non-unique fibre only never decrease, while intersections, unions and level
writers rely on strictly increasing coordinates, and a coordinate stored twice (a duplicate
entry) must be summed.

The compiler therefore reads every access ``A[i, j]`` of a COO tensor as
``Σ_d A[i, j] · _iter1[d]``: a reduction over a fresh index ``d`` of size 1, iterated by a
one-mode dense iteration tensor (:mod:`.densify`'s ``_iter1``, never loaded: the product takes
``A``'s value), and placed by the partial order graph directly above ``A``'s non-unique level
(below the levels above it, if any).  Every output coordinate below ``d`` then comes from the
sparse accumulator that reduces ``d`` (``spacc1`` / ``spacc2``), which sums duplicates and emits
each coordinate once, in order; values are unchanged.  Reductions under additions and
nonlinear functions are hoisted as usual (factored iteration, or a region split), so a COO
operand of an addition is deduplicated in a pipeline of its own first.

What is left to check (:func:`nonunique_join_problem`, after the ``locate`` pass): at the row
of a non-unique level, the only other operands may be dense levels that are *located* (random
access, ``p * dim + c``, is right for any coordinate sequence); an intersection or union with a
scanned level would merge a non-decreasing stream as if it were increasing.  A COO tensor read
twice in one product (``A ⊙ A``) is refused too: each stored entry would be multiplied by itself,
where duplicates must be summed first.  Singleton levels hold one coordinate per fibre, which
is trivially increasing, so they join like compressed levels.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..tensor import Format
from .densify import is_iteration_tensor, iteration_tensor
from .program import Access, BinOp, IExpr, Op, Program, Sum, Unary

if TYPE_CHECKING:  # the fusion module imports this one
    from .fusion import VExpr, View

__all__ = ["COO_PREFIX", "coo_edges", "coo_origin", "lift_coo", "nonunique_join_problem"]

COO_PREFIX = "_coo"  # the duplicate-summing indices (renamed u0, u1, ... by the fuse pass)


def _coo(program: Program, tensor: str) -> bool:
    decl = program.decls.get(tensor)
    return decl is not None and decl.fmt is not None and decl.fmt.coo


def lift_coo(program: Program, rhs: IExpr) -> IExpr:
    """``rhs`` with every access of a COO tensor ``A[idx]`` replaced by
    ``Σ_d A[idx] · _iter1[d]`` (``d`` a fresh index named after ``A``)."""
    counter = itertools.count()

    def walk(e: IExpr) -> IExpr:
        if isinstance(e, Access):
            if not _coo(program, e.tensor):
                return e
            d = f"{COO_PREFIX}{next(counter)}.{e.tensor}"
            return Sum((d,), BinOp(Op.MUL, e, Access(iteration_tensor(1), (d,))))
        if isinstance(e, BinOp):
            return BinOp(e.op, walk(e.lhs), walk(e.rhs))
        if isinstance(e, Sum):
            return Sum(e.indices, walk(e.body), e.op)
        if isinstance(e, Unary):
            return Unary(e.op, walk(e.arg), e.scalar, e.index)
        return e

    return walk(rhs)


def coo_origin(index: str, text: str) -> str | None:
    """What a duplicate-summing index is, for messages (None for any other index)."""
    if not index.startswith(COO_PREFIX):
        return None
    return f"the index that sums the duplicates of COO tensor {index.split('.', 1)[1]} in '{text}'"


def _pairs(e: VExpr, views: Mapping[str, View], out: list[tuple[str, str]]) -> None:
    """(COO view, its duplicate-summing index) for every lifted access under ``e``."""
    from .fusion import VAccess, VBin, VNamed, VUn

    if isinstance(e, VBin):
        if (e.op is Op.MUL and isinstance(e.lhs, VAccess) and isinstance(e.rhs, VAccess)
                and views[e.lhs.view].fmt.coo and is_iteration_tensor(views[e.rhs.view].tensor)):
            out.append((e.lhs.view, views[e.rhs.view].indices[0]))
            return
        _pairs(e.lhs, views, out)
        _pairs(e.rhs, views, out)
    elif isinstance(e, VNamed):
        _pairs(e.body, views, out)
    elif isinstance(e, VUn):
        _pairs(e.arg, views, out)


def coo_edges(bodies: list[tuple[str, VExpr]], views: Mapping[str, View]
              ) -> tuple[list[tuple[str, str, str]], str | None]:
    """The ordering constraints of the COO views under the output ``bodies`` (``(output,
    body)``): each one's duplicate-summing index ``d`` directly above its non-unique level
    (``level above -> d -> non-unique level``), as ``(a, b, reason)``; and why the group cannot
    be compiled (a COO view read twice in one output), or None."""
    edges: list[tuple[str, str, str]] = []
    for out, body in bodies:
        pairs: list[tuple[str, str]] = []
        _pairs(body, views, pairs)
        seen: dict[str, str] = {}
        for name, d in pairs:
            v = views[name]
            if name in seen:
                return [], (f"output {out}: the COO tensor {v.tensor} is read twice as {v} in one "
                            "product, which would multiply each stored entry by itself, but "
                            "duplicate entries must be summed first; read it once, or from a "
                            "CSR / DCSR copy (TensorData.convert)")
            seen[name] = d
            li = v.level_indices()
            nu = v.fmt.levels.index(Format.COMPRESSED_NONUNIQUE)
            why = f"duplicates of COO tensor {v} are summed over {d} above its non-unique level"
            if nu:
                edges.append((li[nu - 1], d, why))
            edges.append((d, li[nu], why))
    return edges, None


def nonunique_join_problem(t, located: bool) -> str | None:
    """None, or why a fusion table (and its intermediates' tables) merges a non-unique level
    with a level that is not located (see the module docstring); ``located``: the locate pass
    ran."""
    from .table import CellKind, Join, JoinKind  # the table module imports fusion, as this one

    for ct in t.children.values():
        why = nonunique_join_problem(ct, located)
        if why:
            return why
    trees = [*t.joins.items(), *((r, j) for r, j in t.drivers.items() if isinstance(j, Join))]
    for row, tree in trees:
        members = tree.members()
        for m in members:
            cell = t.cells.get((row, m))
            v = t.views.get(m)
            if v is None or cell is None or cell.kind is not CellKind.SCAN or cell.level < 0:
                continue
            if v.fmt.levels[cell.level] is not Format.COMPRESSED_NONUNIQUE:
                continue
            others = [o for o in members if o != m]
            scanned = [o for o in others if t.cells.get((row, o)) is None
                       or t.cells[(row, o)].kind is not CellKind.LOCATE]
            nested = any(isinstance(c, Join) for c in tree.children)
            if tree.kind is JoinKind.INTERSECT and not scanned and not nested:
                continue
            how = "a union" if tree.kind is JoinKind.UNION or nested else "an intersection"
            with_ = ", ".join(_describe(t, o, row) for o in (scanned or others))
            hint = ("" if located else " (the locate pass is off: compile without --no-locate)")
            return (f"output {t.output.tensor}: level {cell.level} of COO tensor {v.tensor} "
                    f"({v}, index {row}) has non-unique coordinates, and {how} at {row} merges it "
                    f"with {with_}: merging needs strictly increasing coordinates; a non-unique "
                    f"level may only meet dense levels that are located{hint}.  Store the other "
                    f"operand dense at {row}, or convert {v.tensor} to CSR / DCSR "
                    "(TensorData.convert)")
    return None


def _describe(t, view: str, row: str) -> str:
    v = t.views.get(view)
    cell = t.cells.get((row, view))
    if v is None or cell is None or cell.level < 0:
        return f"{view}"
    return f"{v} (its {v.fmt.levels[cell.level].value} level {cell.level})"
