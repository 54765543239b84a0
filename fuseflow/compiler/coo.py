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

The ordering constraint is added by the ``fuse`` pass (``pog._coo_edges``).  What is left
to check (``locate.nonunique_join_problem``, after the ``locate`` pass): at the row
of a non-unique level, the only other operands may be dense levels that are *located* (random
access, ``p * dim + c``, is right for any coordinate sequence); an intersection or union with a
scanned level would merge a non-decreasing stream as if it were increasing.  A COO tensor read
twice in one product (``A ⊙ A``) is refused too: each stored entry would be multiplied by itself,
where duplicates must be summed first.  Singleton levels hold one coordinate per fibre, which
is trivially increasing, so they join like compressed levels.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection

from .densify import iteration_tensor
from .program import Access, BinOp, IExpr, Op, Program, Sum, Unary

__all__ = ["COO_PREFIX", "coo_origin", "lift_coo"]

COO_PREFIX = "_coo"  # the duplicate-summing indices (renamed u0, u1, ... by the fuse pass)


def _coo(program: Program, tensor: str) -> bool:
    decl = program.decls.get(tensor)
    return decl is not None and decl.fmt is not None and decl.fmt.coo


def lift_coo(program: Program, rhs: IExpr, copied: Collection[str] = ()) -> IExpr:
    """``rhs`` with every access of a COO tensor ``A[idx]`` replaced by
    ``Σ_d A[idx] · _iter1[d]`` (``d`` a fresh index named after ``A``); a tensor in ``copied``
    is read from a copy in another format (not lifted)."""
    counter = itertools.count()

    def walk(e: IExpr) -> IExpr:
        if isinstance(e, Access):
            if not _coo(program, e.tensor) or e.tensor in copied:
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
