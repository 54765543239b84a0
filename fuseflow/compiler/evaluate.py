"""One walk over a program's statements for every evaluation that follows the documented
semantics: the numpy reference (:func:`fuseflow.compiler.reference_all`) and the error
enclosures of the numerics checker (:mod:`fuseflow.compiler.bounds`) are this walk with
different arithmetic.

Alongside the values the walk tracks which coordinates the iteration visits (the stored entries
of sparse inputs; products visit the intersection, sums the union, a reduction every coordinate
some term reaches), which only softmax reads: it normalises over the visited coordinates of
each fibre (a masked softmax, entries outside count as ``-inf``).  Layernorm runs over every
coordinate of the fibre, implicit zeros included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from ..ir.tensor import TensorData
from .program import Access, BinOp, Op, Program, Sum, Unary, UnOp

__all__ = ["Arithmetic", "evaluate", "expand_axes", "visited"]


class Arithmetic(Protocol):
    """What the walk asks of the values it carries (numpy arrays, enclosures, …)."""

    def leaf(self, name: str, value: Any) -> Any: ...

    def pattern(self, value: Any) -> Any: ...

    def unary(self, e: Unary, a: Any) -> Any: ...

    def row(self, e: Unary, a: Any, axis: int, visited: np.ndarray | None) -> Any: ...

    def reduce(self, op: Op, a: Any, ids: list[str], keep: list[str]) -> Any: ...

    def contract(self, a: Any, ia: list[str], b: Any, ib: list[str], keep: list[str]) -> Any: ...

    def binop(self, e: BinOp, a: Any, b: Any) -> Any: ...

    def expand(self, a: Any, ids: list[str], target: list[str]) -> Any: ...

    def store(self, a: Any, shape: tuple[int, ...]) -> Any: ...


def evaluate(program: Program, data: Mapping[str, Any], arith: Arithmetic,
             observe: Callable[[str, Any], Any] | None = None) -> dict[str, Any]:
    """Every input and computed tensor of ``program`` by name, in ``arith``'s values; ``data``
    holds dense arrays, scipy sparse matrices or :class:`TensorData` (their visited coordinates
    are their stored entries), or values ``arith`` takes (``arith.pattern`` gives what the
    visited coordinates are read from).  ``observe(name, value)``, when given, sees every
    computed tensor and returns the value the walk goes on with."""
    env = {n: arith.leaf(n, v) for n, v in data.items()}
    seen: dict[str, np.ndarray | None] = {n: visited(program, n, arith.pattern(v)) for n, v in data.items()}

    def ev(e) -> tuple[Any, list[str], np.ndarray | None]:
        if isinstance(e, Access):
            return env[e.tensor], list(e.indices), seen.get(e.tensor)
        if isinstance(e, Unary):
            a, ia, ma = ev(e.arg)
            if e.op is UnOp.LAYERNORM:  # over the whole fibre: every coordinate visited
                return arith.row(e, a, ia.index(e.index), None), ia, None
            if e.op.row:
                return arith.row(e, a, ia.index(e.index), ma), ia, ma
            return arith.unary(e, a), ia, ma
        if isinstance(e, Sum):
            if e.op is Op.ADD and isinstance(e.body, BinOp) and e.body.op is Op.MUL:
                # a product summed: one contraction, without the product's full index space
                a, ia, ma = ev(e.body.lhs)
                b, ib, mb = ev(e.body.rhs)
                ids = list(dict.fromkeys(ia + ib))
                keep = [i for i in ids if i not in e.indices]
                m = _combine(Op.MUL, ma, ia, mb, ib, ids)
                return arith.contract(a, ia, b, ib, keep), keep, _reduce_visited(m, ids, e.indices)
            arr, ids, m = ev(e.body)
            keep = [i for i in ids if i not in e.indices]
            return arith.reduce(e.op, arr, ids, keep), keep, _reduce_visited(m, ids, e.indices)
        assert isinstance(e, BinOp)
        a, ia, ma = ev(e.lhs)
        b, ib, mb = ev(e.rhs)
        ids = list(dict.fromkeys(ia + ib))
        return (arith.binop(e, arith.expand(a, ia, ids), arith.expand(b, ib, ids)), ids,
                _combine(e.op, ma, ia, mb, ib, ids))

    for s in program.statements:
        arr, ids, m = ev(s.rhs)
        shape = program.decls[s.out].shape
        env[s.out] = arith.store(arith.expand(arr, ids, list(s.indices)), shape)
        if observe is not None:
            env[s.out] = observe(s.out, env[s.out])
        seen[s.out] = None if m is None else np.broadcast_to(expand_axes(m, ids, list(s.indices)), shape)
    return env


def dense_of(v) -> np.ndarray:
    """A dense float64 array of an input (duplicates of a COO tensor summed, as scipy does)."""
    if isinstance(v, TensorData):
        return np.asarray(v.to_dense())
    return np.asarray(v.toarray() if sp.issparse(v) else v)


def visited(program: Program, name: str, value) -> np.ndarray | None:
    """The coordinates an input's iteration visits (None: all of them, a dense tensor)."""
    decl = program.decls.get(name)
    td = value if isinstance(value, TensorData) else None
    if td is None:
        if decl is None or decl.fmt is None or all(f.value == "dense" for f in decl.fmt.levels):
            return None
        td = TensorData.from_array(value if sp.issparse(value) else np.asarray(value), decl.fmt)
    prefix, _ = td._stored_coords()
    stored = np.zeros(tuple(td.shape[m] for m in td.fmt.mode_order), dtype=bool)
    stored[tuple(prefix.T)] = True
    return np.transpose(stored, np.argsort(td.fmt.mode_order))


def _reduce_visited(m: np.ndarray | None, ids: list[str], reduced: tuple[str, ...]) -> np.ndarray | None:
    if m is None:
        return None
    return np.any(m, axis=tuple(k for k, i in enumerate(ids) if i in reduced))


def _combine(op: Op, ma, ia: list[str], mb, ib: list[str], ids: list[str]) -> np.ndarray | None:
    if op in (Op.MUL, Op.DIV):  # an intersection: what both visit
        if ma is None or mb is None:
            return None if ma is None and mb is None else expand_axes(ma if mb is None else mb,
                                                                       ia if mb is None else ib, ids)
        return expand_axes(ma, ia, ids) & expand_axes(mb, ib, ids)
    if ma is None or mb is None:  # a union: what either visits
        return None
    return expand_axes(ma, ia, ids) | expand_axes(mb, ib, ids)


def expand_axes(a: np.ndarray, ids: list[str], target: list[str]) -> np.ndarray:
    """Transpose ``a`` (axes named ``ids``) to ``target`` order, with size-1 axes for missing."""
    perm = [ids.index(i) for i in target if i in ids]
    a = np.transpose(a, perm) if perm else a
    present = [i for i in target if i in ids]
    return a.reshape([a.shape[present.index(i)] if i in ids else 1 for i in target])
