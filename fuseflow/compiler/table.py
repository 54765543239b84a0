"""Fusion tables (the ``table`` pass, docs/compiler.md): rows are the index variables of one output in fused order plus
``val``; columns are tensor views, inlined intermediates and the output.  A cell is a primitive
cell (it will create a SAMML node) or a reference cell (it names another cell's stream, which
may not exist yet).  :mod:`fuseflow.compiler.codegen` builds the graph by evaluating the output
column's cells and, recursively, the cells they reference.

Construction (docs/compiler.md, "Fusion table"; the named steps in :data:`_STEPS`): (1) level scanners and value loads for input views, top-down in the
fused order; (2) repeats for the index variables a view lacks, and the compute cell of every
intermediate; (3) reducer cells for reduced index variables (``Red0``: innermost reduction,
``Red1``: order-1 sparse accumulator whose coordinate output replaces the output's coordinate
cell); (4) stream merging: scanner cells of views sharing an index variable move into one
intersect (product) or union (sum) cell of that row.

Factored iteration gives a reduced intermediate its own table (``children``).  A *leading* one
(its indices are the consumer's first rows) drives those rows with its own coordinates.  A
*nested* one (:class:`Nest`; e.g. layer 1 of a fully fused GCN inside layer 2's
``i -> u0 -> u3``) is recomputed for every coordinate of the consumer's rows before its
innermost index: its table starts with those rows (``ext``), whose coordinate streams come from
the consumer, its operands are repeated over the ones they lack, and at its own indices among
them (``driven``) the consumer's joiner merges its operand levels (``drivers``, e.g.
``Intersect_u0(A, A')``) and hands their references down (``DRIVEN`` cells).  Nesting is used
where an intermediate would otherwise be inlined under an addition or a nonlinear function,
which needs a region split (:func:`_choose_factored`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.tensor import Format
from .fused import FusedOutput, Group, VAccess, VExpr, VNamed
from .program import LoweringError, Rejected
from .semantics import check_division
from .table_exprs import (
    _candidates,
    _child_output,
    _count_having,
    _driver_problem,
    _has,
    _inner_names,
    _is_row,
    _join_tree,
    _operands,
    _own,
    _reduced_under_add,
    _subst,
)
from .table_records import (
    FusionTable,
    Nest,
)
from .table_steps import (
    _add_driver_columns,
    _blocked_exact_problem,
    _check_functions_of_zero,
    _check_nested_order,
    _check_no_reduction_under_add,
    _check_outputs_iterated,
    _check_repeated_views,
    _check_row_functions,
    _Construction,
    _merge_drivers,
    _merge_streams,
    _place_child_cells,
    _place_output_cells,
    _place_reducers,
    _place_view_cells,
    _resolve_row_references,
    _start_table,
)

__all__ = [
    "LoweringError",
    "Rejected",
    "build_table",
    "table_or_rejection",
]



# The factoring search nests intermediates under outer rows of their consumers, and every
# distinct nest is a table to build: for deep chains of nonlinear functions that read their
# argument several times (a gelu of a variance, squared) the nests multiply into tens of
# thousands of tables.  Past this many tables per search no new nest is tried: such an
# intermediate is inlined instead, where a region split realises it (always correct, maybe
# slower).  No graph of the suites comes near it.
NEST_BUDGET = 2000
_BUILDS = ("tables built",)


def build_table(group: Group, out: FusedOutput, factored: bool = False, nest: Nest | None = None,
                memo: dict | None = None) -> FusionTable:
    """The fusion table of one group output.  ``factored``: reduced intermediates whose
    coordinates lead the consumer's order get their own table (factored iteration, see
    :func:`_choose_factored`); the others are inlined into one iteration space.  ``nest``: the
    output is a factored intermediate nested under rows of its consumer (:class:`Nest`).
    ``memo`` caches tables (and rejections) while factoring choices are tried.  Raises
    :class:`LoweringError` with :func:`table_or_rejection`'s reason if there is no table."""
    t = table_or_rejection(group, out, factored, nest, memo)
    if isinstance(t, Rejected):
        raise t.exception()
    return t


def table_or_rejection(group: Group, out: FusedOutput, factored: bool = False,
                       nest: Nest | None = None, memo: dict | None = None) -> FusionTable | Rejected:
    """:func:`build_table`, or the reason the output cannot be lowered (the check that the
    factoring search and the compile pipeline decide by; ``split`` set when a region split
    would realise it)."""
    if memo is None:
        memo = {}
    key = (out, nest, factored, tuple(group.order))
    if key not in memo:
        memo[_BUILDS] = memo.get(_BUILDS, 0) + 1
        memo[key] = _build_table(group, out, factored, nest, memo)
    return memo[key]


def _build_table(group: Group, out: FusedOutput, factored: bool, nest: Nest | None,
                 memo: dict) -> FusionTable | Rejected:
    if not factored:
        return _construct(group, out, factored, nest, frozenset(), {}, memo)
    ext = nest.rows if nest is not None else ()
    fac, plan, without_recompute = _choose_factored(out.body, group, ext, memo)
    t = _construct(group, out, factored, nest, fac, plan, memo)
    if isinstance(t, Rejected) and not t.split and without_recompute is not None:
        # nesting intermediates under outer rows got rid of a region split, but this table
        # cannot be built with them (e.g. a term added to one needs coordinates it drops): the
        # choice without them, which asks for the split
        return _construct(group, out, factored, nest, *without_recompute, memo)
    return t


def _construct(group: Group, out: FusedOutput, factored: bool, nest: Nest | None,
               fac: frozenset[str], plan: dict[str, Nest | None], memo: dict) -> FusionTable | Rejected:
    """The table with factoring choice ``fac``/``plan``, built by the named steps of
    :data:`_STEPS` in order, or the first step's reason why it cannot be."""
    why = (_check_functions_of_zero(out, group.views) or check_division(out, group.views)
           or _check_no_reduction_under_add(out, group, fac))
    if why is not None:
        return why
    c = _start_table(group, out, factored, nest, fac, plan, memo)
    for step in _STEPS:
        why = step(c)
        if why is not None:
            return why
    return c.t


def _build_children(c: _Construction) -> Rejected | None:
    """The tables of the factored intermediates (nested ones recorded in ``nested``)."""
    t = c.t
    for k in c.kids:
        ct = table_or_rejection(c.group, _child_output(c.group, k), c.factored, c.plan[k.tensor],
                                c.memo)
        if isinstance(ct, Rejected):
            return ct
        t.children[k.tensor] = ct
        if c.plan[k.tensor] is not None:
            t.nested[k.tensor] = c.plan[k.tensor]
    return None


# The construction of one table, in order (docs/compiler.md, "Fusion table"): each step fills
# cells and returns None, or the reason the schedule cannot be realised (the steps that always
# succeed return None).
_STEPS: tuple[Callable[[_Construction], Rejected | None], ...] = (
    _check_nested_order,
    _build_children,
    _add_driver_columns,
    _check_outputs_iterated,
    _place_child_cells,
    _place_view_cells,
    _merge_streams,
    _check_row_functions,
    _check_repeated_views,
    _blocked_exact_problem,
    _merge_drivers,
    _resolve_row_references,
    _place_reducers,
    _place_output_cells,
)


def _choose_factored(body: VExpr, group: Group, ext: tuple[str, ...] = (),
                     memo: dict | None = None
                     ) -> tuple[frozenset[str], dict[str, Nest | None],
                                tuple[frozenset[str], dict[str, Nest | None]] | None]:
    """Intermediates of this node that get their own pipeline (factored iteration), for each
    direct one how it is iterated (None: leading, else its :class:`Nest`), and the choice
    without recomputation under outer rows if that was needed (None otherwise).

    An intermediate with a reduction is factored when its output indices are the first levels
    of the consumer's order and, except at its innermost index, no other operand of the
    consumer has them: its coordinate streams then drive those levels directly and only its
    innermost level (coordinates plus values) is merged with other operands.  Inside a nested
    table (``ext``: rows an enclosing table iterates) intermediates are nested in turn.  Where
    an intermediate would otherwise be inlined with its reduction under an addition or a
    nonlinear function (which needs a region split), it may also be nested under outer rows
    of the consumer, i.e. recomputed for each of their coordinates (:class:`Nest`).  The others
    are inlined into the consumer's iteration space."""
    views = group.views
    memo = {} if memo is None else memo
    # one candidate per intermediate (a nonlinear function reads its argument several times,
    # each read a copy of the same intermediate): a trial that failed fails again
    firsts: dict[str, VNamed] = {}
    for c in _candidates(body, frozenset()):
        firsts.setdefault(c.tensor, c)
    cands = [c for c in firsts.values() if _own(c.body, views, frozenset()) - set(c.indices) or _is_row(c.body)]
    fac: set[str] = set()
    plan: dict[str, Nest | None] = {}

    def grow(recompute: bool) -> None:
        nonlocal plan
        for cand in cands:
            if cand.tensor in fac:
                continue
            trial = frozenset(fac | {cand.tensor})
            p = _plan_kids(body, group, trial, ext, recompute, memo)
            if p is not None:
                fac.add(cand.tensor)
                plan = p

    grow(False)
    if not _reduced_under_add(body, views, frozenset(fac)):
        return frozenset(fac), plan, None
    first = (frozenset(fac), dict(plan))
    grow(True)
    return frozenset(fac), plan, (first if first[0] != fac else None)


def _plan_kids(body: VExpr, group: Group, fac: frozenset[str], ext: tuple[str, ...],
               recompute: bool, memo: dict) -> dict[str, Nest | None] | None:
    """How each factored intermediate directly under ``body`` is iterated, or None if one
    cannot be (then ``fac`` is rejected)."""
    views = group.views
    own = _own(body, views, fac)
    order = [*ext, *(i for i in group.order if i in own and i not in ext)]
    kids = list({k.tensor: k for k in _candidates(body, fac) if k.tensor in fac}.values())
    plan: dict[str, Nest | None] = {}
    for k in kids:
        if any(k.tensor in _inner_names(o.body) for o in kids if o is not k):
            return None
        lead = order[: len(k.indices)]
        if not ext and sorted(lead) == sorted(k.indices) and all(
                _count_having(body, row, views, fac) <= 1
                or _all_full_at(body, row, group, fac, k, memo) for row in lead[:-1]):
            plan[k.tensor] = None
            continue
        nest = _nest_for(body, group, fac, k, order, ext, recompute, memo)
        if nest is None:
            return None
        plan[k.tensor] = nest
    # the consumer's joiners at the rows it drives nested intermediates at
    nested = {k.tensor: k for k in kids if plan[k.tensor] is not None}
    rows = {r for name in nested for r in plan[name].driven if r not in ext}  # type: ignore[union-attr]
    for r in rows:
        tree = _join_tree(body, r, views, set(), fac)
        drivers = {name: _nested_table(group, k, plan[name], memo).drivers[r]
                   for name, k in nested.items() if r in plan[name].driven}  # type: ignore[union-attr]
        if _driver_problem(_subst(tree, drivers), r, views) is not None:
            return None
    return plan


def _nest_for(body: VExpr, group: Group, fac: frozenset[str], k: VNamed, order: list[str],
              ext: tuple[str, ...], recompute: bool, memo: dict) -> Nest | None:
    """The :class:`Nest` of intermediate ``k`` under the consumer ``body`` iterated in
    ``order``, or None.  ``recompute``: it may be nested under rows of the consumer itself (not
    only under rows an enclosing table iterates), i.e. recomputed for each of their
    coordinates."""
    k_rows = [r for r in order if r in k.indices]
    if not k_rows:
        return None  # a 0-d intermediate is not nested (its one value is repeated)
    pre = order[:order.index(k_rows[-1])]
    driven = [r for r in pre if r in k.indices]
    new_outer = [r for r in pre if r not in k.indices and r not in ext]
    if not recompute and (new_outer or not set(pre) & set(ext)):
        # only where the intermediate would otherwise be inlined under an addition (a region
        # split); leading rows are normally iterated by the intermediate itself
        return None
    nest = Nest(tuple(pre), frozenset(driven))
    if memo.get(_BUILDS, 0) > NEST_BUDGET and (_child_output(group, k), nest, True, tuple(group.order)) not in memo:
        return None
    if isinstance(table_or_rejection(group, _child_output(group, k), True, nest, memo), Rejected):
        return None
    return nest


def _nested_table(group: Group, k: VNamed, nest: Nest | None, memo: dict) -> FusionTable:
    """The table of nested intermediate ``k``, which :func:`_nest_for` has checked."""
    t = table_or_rejection(group, _child_output(group, k), True, nest, memo)
    assert not isinstance(t, Rejected), t
    return t


def _all_full_at(body: VExpr, row: str, group: Group, fac: frozenset[str], kid: VNamed,
                 memo: dict | None = None) -> bool:
    """Whether every operand having ``row`` enumerates the whole dimension there, so the factored
    intermediate ``kid`` can drive the row without a merge: the other operands are views with
    dense levels down to ``row`` and ``kid``'s coordinates for ``row`` are full."""
    others = [e for e in _operands(body, fac) if e is not kid and _has(e, row, group.views, fac)]
    for e in others:
        if not isinstance(e, VAccess):
            return False
        v = group.views[e.view]
        levels = v.level_indices()
        if any(f is not Format.DENSE for f in v.fmt.levels[: levels.index(row) + 1]):
            return False
    ct = table_or_rejection(group, _child_output(group, kid), factored=True, memo=memo)
    if isinstance(ct, Rejected):
        return False
    return ct.crd_source[row] == row and ct.full[row]
