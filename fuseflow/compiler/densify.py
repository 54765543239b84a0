"""Densified iteration (docs/compiler.md, "Densified iteration"): where a value is needed at
every coordinate of some indices, though the operands store only some of them, the statement is
rewritten so that the iteration also visits every coordinate of those indices.

A level scanner of a dense level enumerates its whole dimension, so the compiler adds, as a
union member, a product of one-mode dense *iteration tensors* ``_iter<n>`` (one per index, ``n``
its size; the runner supplies them, they hold no values that are ever read): ``x`` becomes
``x + _iter7_{j}`` for index ``j``.  The union visits every ``j``; where ``x`` has no entry its
reference is ``N`` and its value 0, and the iteration term itself is never loaded (its value is
0).  Four places need it:

* an elementwise function with ``f(0) != 0`` (``exp``, ``sigmoid``, ``rsqrt``, a scalar shift)
  of an operand with compressed levels: the operand's indices are densified, so ``exp(A)`` is 1
  where ``A`` has no entry;
* an output level declared dense whose coordinates would come from compressed levels (a sparse
  to dense copy ``Y = A`` with ``Y`` dense): the output's dense indices are densified;
* a sum (``+ - max min``) broadcasting an operand over indices it lacks (``A_ij + b_j``, a bias
  added to a sparse result whose rows may be empty): the other operand's indices that the
  broadcast operand lacks are densified, so ``b_j`` reaches the empty rows of ``A``;
* a ``max`` / ``min`` reduction over an operand with compressed levels: numpy's maximum over a
  fibre includes its implicit zeros, so the reduced indices are densified, and so are the
  output indices (an order may visit an output index below a reduced one: every output
  coordinate must then be visited under every coordinate of the reduced index).

Work is then proportional to the densified dimensions, as a dense operand's would be.  An index
is not densified where the operand's coordinates for it come from dense levels already (an
access dense down to that level, a product of such, a sum with one) — except, under a softmax,
dense levels down to the softmax's own index (such an operand is read through a copy that keeps
its compressed levels, see :meth:`_Densifier.enumerated`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np

from ..ir.tensor import Format, TensorData, TensorFormat
from .program import RESERVED_PREFIX, Access, BinOp, IExpr, Op, Program, Sum, Unary, UnOp, accesses

__all__ = ["densify_statement", "is_iteration_tensor", "iteration_data", "iteration_tensor"]


def iteration_tensor(dim: int) -> str:
    """The name of the dense iteration tensor of size ``dim``."""
    return f"{RESERVED_PREFIX}{dim}"


def is_iteration_tensor(name: str) -> bool:
    return name.startswith(RESERVED_PREFIX)


def iteration_data(name: str) -> TensorData:
    """The data of iteration tensor ``name``: one dense level (its values are never loaded)."""
    dim = int(name[len(RESERVED_PREFIX):])
    return TensorData.from_dense(np.zeros(dim, dtype=np.int64), TensorFormat((Format.DENSE,)))


def free_in_order(e: IExpr) -> list[str]:
    """The indices of ``e`` not summed, in first-appearance order (an access's as written)."""
    if isinstance(e, Access):
        return list(e.indices)
    if isinstance(e, BinOp):
        return list(dict.fromkeys(free_in_order(e.lhs) + free_in_order(e.rhs)))
    if isinstance(e, Sum):
        return [i for i in free_in_order(e.body) if i not in e.indices]
    if isinstance(e, Unary):
        return free_in_order(e.arg)
    return []


class _Densifier:
    def __init__(self, program: Program, sizes: Mapping[str, int],
                 edges: Sequence[tuple[str, str]] = ()) -> None:
        self.program, self.sizes = program, sizes
        self.pog = nx.DiGraph(list(edges))  # the statement's own ordering constraints
        self.memo: dict[tuple[str, int, str], bool] = {}  # (computed tensor, mode, sums) -> enumerated

    def above(self, a: str, b: str) -> bool:
        """Every dataflow order of the statement visits ``a`` before ``b``."""
        return a in self.pog and b in self.pog and nx.has_path(self.pog, a, b)

    def edges(self, rhs: IExpr, indices: tuple[str, ...], fmt: TensorFormat | None,
              order: Sequence[str]) -> None:
        """The statement's ordering constraints: its operands' and its output's mode orders
        and its dataflow order."""
        chains = [list(order)]
        for a in accesses(rhs):
            f = self.fmt(a.tensor)
            if f is not None:
                chains.append([a.indices[m] for m in f.mode_order])
        if fmt is not None:
            chains.append([indices[m] for m in fmt.mode_order])
        for c in chains:
            self.pog.add_edges_from(itertools.pairwise(c))

    def fmt(self, tensor: str) -> TensorFormat | None:
        decl = self.program.decls.get(tensor)
        return decl.fmt if decl is not None else None  # None: computed, format not declared

    def sparse(self, e: IExpr) -> bool:
        """Some tensor under ``e`` may leave coordinates out (a compressed level, or a computed
        tensor whose format the compiler chooses)."""
        for a in accesses(e):
            if is_iteration_tensor(a.tensor):
                continue
            f = self.fmt(a.tensor)
            if f is None or any(lv is not Format.DENSE for lv in f.levels):
                return True
        return False

    def enumerated(self, e: IExpr, index: str, rows: tuple[str, ...] = ()) -> bool:
        """``e``'s coordinates for ``index`` come from dense levels only: an access dense down
        to that level; a product whose operands having ``index`` all enumerate it; a sum (or
        max, min) with one that does.  (Reduced indices above it in the dataflow order may
        still leave it to an accumulator: the table then rejects a declared dense level.)

        ``rows``: the indices of the softmaxes above ``e``.  A softmax reads its operand's
        visited coordinates, so an operand read there through a permuted copy keeps its own
        levels (:func:`.pog._visits_read_views`), not dense ones: an access whose dense
        levels down to ``index`` include a softmax's row index (a CSC operand of a softmax
        along its column: always read row-major, from a copy whose column level is
        compressed) does not enumerate ``index`` under that softmax."""
        if isinstance(e, Access):
            f = self.fmt(e.tensor)
            if index not in e.indices:
                return False
            if is_iteration_tensor(e.tensor):
                return self.producer_view  # a producer's densified iteration (below)
            if f is None:
                return self.produced_enumerating(e, index, rows)
            levels = [e.indices[m] for m in f.mode_order]
            level = levels.index(index)
            if any(r in levels[: level + 1] for r in rows):
                return False
            return all(lv is Format.DENSE for lv in f.levels[: level + 1])
        if isinstance(e, Unary):
            return self.enumerated(e.arg, index, (*rows, e.index) if e.op is UnOp.SOFTMAX else rows)
        if isinstance(e, Sum):
            # below a reduced index the coordinates are an accumulator's; a function with
            # f(0) != 0 of a reduction is applied to its own (factored) pipeline's output,
            # whose coordinates the table does not take as every coordinate: densified
            if self.sums == "never":
                return False
            return (index not in e.indices and self.enumerated(e.body, index, rows)
                    and (self.sums == "body" or all(self.above(index, k) for k in e.indices)))
        if isinstance(e, BinOp):
            having = [x for x in (e.lhs, e.rhs) if index in free_in_order(x)]
            got = [self.enumerated(x, index, rows) for x in having]
            return bool(got) and (all(got) if e.op.product else any(got))
        return False

    def produced_enumerating(self, e: Access, index: str, rows: tuple[str, ...]) -> bool:
        """Under a broadcast sum only (:attr:`sums` ``"body"``): a computed tensor whose format
        the compiler chooses enumerates ``index`` where its producer's (densified) right-hand
        side does (the compiler stores a level dense where its coordinates enumerate the
        dimension).  Only a hint, which the fusion table checks row by row (it refuses a sum
        whose rows are not iterated fully); elsewhere nothing checks it (an index enumerated
        only below a compressed one would be visited only under that one's stored
        coordinates), so a computed operand enumerates nothing there."""
        st = self.program.producer(e.tensor)
        if st is None or rows or self.visits_read or self.sums != "body":
            # a softmax reads the visited coordinates: the operand may be read through a
            # permuted copy that keeps its compressed levels (see enumerated)
            return False
        key = (e.tensor, e.indices.index(index), self.sums)
        if key not in self.memo:  # shared with the producers' walks: each asked once
            decl = self.program.decls.get(e.tensor)
            sizes = {i: n for a in accesses(st.rhs)
                     for i, n in zip(a.indices, self.program.decls[a.tensor].shape)}
            sub = _Densifier(self.program, sizes)
            sub.producer_view, sub.sums, sub.memo = True, self.sums, self.memo
            sub.edges(st.rhs, st.indices, decl.fmt if decl is not None else None, st.order)
            rhs = sub.walk(st.rhs)
            self.memo[key] = sub.enumerated(rhs, st.indices[key[1]])
        return self.memo[key]

    def union_all(self, e: IExpr, indices: list[str], sums: str = "order") -> IExpr:
        """``e`` plus the product of the iteration tensors of ``indices`` (those ``e`` does not
        enumerate already, with reductions judged by ``sums``, see :attr:`sums`)."""
        saved, self.sums = self.sums, sums
        need = [i for i in dict.fromkeys(indices) if not self.enumerated(e, i)]
        self.sums = saved
        if not need:
            return e
        term: IExpr | None = None
        for i in need:
            acc = Access(iteration_tensor(self.sizes[i]), (i,))
            term = acc if term is None else BinOp(Op.MUL, term, acc)
        assert term is not None
        return BinOp(Op.ADD, e, term)

    visits_read = False  # a softmax reads the visited coordinates of the expression walked
    producer_view = False  # walking a computed operand's producer: its iteration tensors count
    # when a reduction's output enumerates an index its body enumerates: "order" where every
    # order visits the index above the reduced ones; "never" (under a function with f(0) != 0:
    # the table takes a reduction's own pipeline's output as sparse); "body" (a broadcast sum:
    # the table checks the chosen order, and refuses what it does not iterate fully)
    sums = "order"

    def walk(self, e: IExpr) -> IExpr:
        if isinstance(e, Unary):
            saved = self.visits_read
            self.visits_read = e.op is UnOp.SOFTMAX or (saved and e.op is not UnOp.LAYERNORM)
            arg = self.walk(e.arg)
            self.visits_read = saved
            # softmax runs over the visited coordinates by definition (a masked softmax);
            # layernorm's statistics take every coordinate of the fibre, implicit zeros included;
            # it visits every coordinate, which matters where a softmax reads them (a row with
            # nothing stored is normalised too, to 0): every free index is densified there
            if e.op is UnOp.LAYERNORM and self.sparse(arg):
                rows = [i for i in free_in_order(arg) if i != e.index] if self.visits_read else []
                arg = self.union_all(arg, [e.index, *rows])
            elif not e.op.zero_preserving and not e.op.row and self.sparse(arg):
                arg = self.union_all(arg, free_in_order(arg), sums="never")
            return Unary(e.op, arg, e.scalar, e.index)
        if isinstance(e, BinOp):
            lhs, rhs = self.walk(e.lhs), self.walk(e.rhs)
            if not e.op.product:
                lhs, rhs = self.broadcast(lhs, rhs), self.broadcast(rhs, lhs)
            return BinOp(e.op, lhs, rhs)
        if isinstance(e, Sum):
            body = self.walk(e.body)
            if e.op is not Op.ADD and self.sparse(body):
                body = self.union_all(body, self.max_indices(e, body))
            return Sum(e.indices, body, e.op)
        return e

    def broadcast(self, x: IExpr, other: IExpr) -> IExpr:
        """``x`` under a sum (``+ - max min``) with ``other``, which lacks some of ``x``'s
        indices: numpy broadcasts ``other`` over them, so the result is ``other``'s value
        wherever ``x`` has no entry (a bias added to a sparse result with an empty row) and
        ``x`` must visit every coordinate of those indices."""
        theirs = set(free_in_order(other))
        lacked = [i for i in free_in_order(x) if i not in theirs]
        if not lacked or not self.sparse(x):
            return x
        return self.union_all(x, lacked, sums="body")

    def max_indices(self, e: Sum, body: IExpr) -> list[str]:
        """A max / min reduction visits every coordinate of its reduced indices and, since an
        order may visit an output index below a reduced one, of its output indices too."""
        return [*e.indices, *(i for i in free_in_order(body) if i not in e.indices)]


def densify_statement(program: Program, rhs: IExpr, indices: tuple[str, ...],
                      fmt: TensorFormat | None, sizes: Mapping[str, int],
                      order: Sequence[str] = (), visits_read: bool = False) -> IExpr:
    """``rhs`` of ``out[indices] = rhs`` with densified iteration where its values are needed
    at coordinates its operands leave out (see the module docstring); ``fmt`` is the output's
    declared format (None: the compiler's choice, which is never dense where coordinates are
    missing); ``sizes`` the size of every index; ``order`` the statement's dataflow order;
    ``visits_read``: a softmax reads the output's visited coordinates."""
    d = _Densifier(program, sizes)
    d.visits_read = visits_read
    d.edges(rhs, indices, fmt, order)
    rhs = d.walk(rhs)
    if fmt is None:
        return rhs
    dense = [indices[m] for lv, m in zip(fmt.levels, fmt.mode_order) if lv is Format.DENSE]
    if not dense:
        return rhs
    if isinstance(rhs, Sum) and rhs.op is not Op.ADD:
        # a max / min over all coordinates is 0 where nothing is stored: iterating the output
        # index inside the reduction adds only zeros to it
        return Sum(rhs.indices, d.union_all(rhs.body, dense), rhs.op)
    return d.union_all(rhs, dense)
