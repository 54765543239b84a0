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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..ir.tensor import Format, TensorFormat
from .fusion import FusedOutput, Group, VAccess, VBin, VExpr, View, VNamed, VUn
from .program import LoweringError, Op, Rejected, UnOp, binop_text, unary_text
from .semantics import check_division, densified, iteration_only, value_indices, views_under
from .table_records import (
    OUTER,
    ROOT,
    VAL,
    Cell,
    CellKind,
    CellRef,
    FusionTable,
    Join,
    JoinKind,
    Nest,
    Reducer,
)

__all__ = [
    "OUTER",
    "ROOT",
    "VAL",
    "Cell",
    "CellKind",
    "CellRef",
    "FusionTable",
    "Join",
    "JoinKind",
    "LoweringError",
    "Nest",
    "Reducer",
    "Rejected",
    "build_table",
    "table_or_rejection",
]

def _view_order(e: VExpr, out: list[str], named: list[VNamed], fac: frozenset[str] = frozenset(),
                kids: list[VNamed] | None = None) -> None:
    if isinstance(e, VAccess):
        if e.view not in out:
            out.append(e.view)
    elif isinstance(e, VUn):
        _view_order(e.arg, out, named, fac, kids)
    elif isinstance(e, VBin):
        _view_order(e.lhs, out, named, fac, kids)
        _view_order(e.rhs, out, named, fac, kids)
    elif e.tensor in fac:
        assert kids is not None
        if e not in kids:
            kids.append(e)
    else:
        _view_order(e.body, out, named, fac, kids)
        named.append(e)


def _join_tree(e: VExpr, row: str, views: dict[str, View], seen: set[str],
               fac: frozenset[str] = frozenset()) -> str | Join | None:
    """The merge structure at ``row``: products intersect, sums unite; repeated views once."""
    if isinstance(e, VNamed) and e.tensor in fac:
        if row in e.indices and e.tensor not in seen:
            seen.add(e.tensor)
            return e.tensor
        return None
    if isinstance(e, VAccess):
        if row in views[e.view].indices and e.view not in seen:
            seen.add(e.view)
            return e.view
        return None
    if isinstance(e, VUn):  # elementwise: the operand's coordinates
        return _join_tree(e.arg, row, views, seen, fac)
    if isinstance(e, VNamed):
        return _join_tree(e.body, row, views, seen, fac)
    kids = [k for k in (_join_tree(e.lhs, row, views, seen, fac),
                        _join_tree(e.rhs, row, views, seen, fac)) if k]
    if not kids:
        return None
    if len(kids) == 1:
        return kids[0]
    kind = JoinKind.INTERSECT if e.op.product else JoinKind.UNION
    flat: list[str | Join] = []
    for k in kids:  # flatten nested joins of the same kind into one n-ary cell
        flat += list(k.children) if isinstance(k, Join) and k.kind is kind else [k]
    return Join(kind, tuple(flat))


def _join_formula(e: VExpr, row: str, views: dict[str, View], fac: frozenset[str]):
    """The coordinates at ``row`` some term reaches, as a formula over the members (``_join_tree``
    without merging repeated views): a name, ``("and" | "or", lhs, rhs)`` or None."""
    if isinstance(e, VNamed) and e.tensor in fac:
        return e.tensor if row in e.indices else None
    if isinstance(e, VAccess):
        return e.view if row in views[e.view].indices else None
    if isinstance(e, VUn):
        return _join_formula(e.arg, row, views, fac)
    if isinstance(e, VNamed):
        return _join_formula(e.body, row, views, fac)
    kids = [k for k in (_join_formula(e.lhs, row, views, fac), _join_formula(e.rhs, row, views, fac)) if k]
    if len(kids) < 2:
        return kids[0] if kids else None
    return ("and" if e.op.product else "or", kids[0], kids[1])


def _eval_formula(f, on: frozenset[str]) -> bool:
    if isinstance(f, str):
        return f in on
    if isinstance(f, Join):
        got = [_eval_formula(k, on) for k in f.children]
        return all(got) if f.kind is JoinKind.INTERSECT else any(got)
    got = [_eval_formula(k, on) for k in f[1:]]
    return all(got) if f[0] == "and" else any(got)


def _formula_names(f) -> set[str]:
    if isinstance(f, str):
        return {f}
    kids = f.children if isinstance(f, Join) else f[1:]
    return set().union(*(_formula_names(k) for k in kids))


def _check_repeated_views(c: _Construction) -> Rejected | None:
    """A table has one column per view, so ``_join_tree`` merges a view read in several places
    at a row into its first place.  That is only right where the merged join visits the same
    coordinates as the expression (``x * x``, ``x + x``), or visits more of them (explicit
    zeros) where no softmax reads the visits; elsewhere (``(s + x) * (s + y)`` with ``s`` read
    twice) it would drop coordinates some term reaches: refused."""
    for row in c.order:
        full = _join_formula(c.out.body, row, c.views, c.fac)
        if full is None or isinstance(full, str):
            continue
        names = sorted(_formula_names(full))
        if len(names) > 12:
            continue
        merged = _join_tree(c.out.body, row, c.views, set(), c.fac)
        for bits in range(1 << len(names)):
            on = frozenset(n for k, n in enumerate(names) if bits >> k & 1)
            want, got = _eval_formula(full, on), merged is not None and _eval_formula(merged, on)
            # an extra coordinate holds an explicit 0 (harmless unless a softmax reads the
            # visits); a missing one drops a term's value
            if want != got and (want or c.out.tensor in c.group.exact):
                again = sorted(n for n in names if _count_reads(c.out.body, n, row, c.views, c.fac) > 1)
                return c.reject(
                    f"at {row}, {', '.join(again)} {'is' if len(again) == 1 else 'are'} read in several "
                    f"places of {_describe(c.out.body, c.views)} whose coordinates differ (one stream per "
                    "view: merging them would drop coordinates some term reaches)")
    return None


def _count_reads(e: VExpr, name: str, row: str, views: dict[str, View], fac: frozenset[str]) -> int:
    f = _join_formula(e, row, views, fac)

    def count(x) -> int:
        if isinstance(x, str):
            return int(x == name)
        return sum(count(k) for k in x[1:]) if x is not None else 0
    return count(f)


def _lacking_in_sum(e: VExpr, row: str, views: dict[str, View],
                    fac: frozenset[str] = frozenset()) -> list[tuple[str, VExpr]]:
    """Terms that lack ``row`` but are added to terms that have it, each with the term that has
    it: ``(description, other term)``.  The sum is right only where the other term's ``row``
    coordinates enumerate the whole dimension (the lacking term is repeated at every one)."""
    if isinstance(e, VNamed):
        return [] if e.tensor in fac else _lacking_in_sum(e.body, row, views, fac)
    if isinstance(e, VUn):
        return _lacking_in_sum(e.arg, row, views, fac)
    if not isinstance(e, VBin):
        return []
    out = _lacking_in_sum(e.lhs, row, views, fac) + _lacking_in_sum(e.rhs, row, views, fac)
    if not e.op.product:
        has = [_has(e.lhs, row, views, fac), _has(e.rhs, row, views, fac)]
        if has[0] != has[1]:
            side, other = (e.rhs, e.lhs) if has[0] else (e.lhs, e.rhs)
            if not iteration_only(side, views):  # it only adds coordinates of its own indices
                out.append((_describe(side, views), other))
    return out


def _has(e: VExpr, row: str, views: dict[str, View], fac: frozenset[str] = frozenset()) -> bool:
    if isinstance(e, VAccess):
        return row in views[e.view].indices
    if isinstance(e, VUn):
        return _has(e.arg, row, views, fac)
    if isinstance(e, VNamed):
        return row in e.indices if e.tensor in fac else _has(e.body, row, views, fac)
    return _has(e.lhs, row, views, fac) or _has(e.rhs, row, views, fac)


def _describe(e: VExpr, views: dict[str, View]) -> str:
    if isinstance(e, VAccess):
        return str(views[e.view])
    if isinstance(e, VNamed):
        return f"{e.tensor}_{{{','.join(e.indices)}}}"
    if isinstance(e, VUn):
        return unary_text(e.op, _describe(e.arg, views), e.scalar, e.index)
    return binop_text(e.op, _describe(e.lhs, views), _describe(e.rhs, views))


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


# The factoring search nests intermediates under outer rows of their consumers, and every
# distinct nest is a table to build: for deep chains of nonlinear functions that read their
# argument several times (a gelu of a variance, squared) the nests multiply into tens of
# thousands of tables.  Past this many tables per search no new nest is tried: such an
# intermediate is inlined instead, where a region split realises it (always correct, maybe
# slower).  No graph of the suites comes near it.
NEST_BUDGET = 2000
_BUILDS = ("tables built",)


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


@dataclass
class _Construction:
    """A fusion table under construction and what its steps share."""

    group: Group
    out: FusedOutput
    factored: bool
    fac: frozenset[str]  # intermediates with their own tables (factored iteration)
    plan: dict[str, Nest | None]  # how each direct one is iterated
    memo: dict
    t: FusionTable
    order: list[str]  # the rows but val
    ext: tuple[str, ...]  # rows an enclosing table iterates
    named: list[VNamed]  # inlined intermediates
    kids: list[VNamed]  # factored intermediates directly under the output
    driver_last: dict[str, int] = field(default_factory=dict)  # driver view -> last merged row
    nref: set[str] = field(default_factory=set)  # views whose references may be N

    @property
    def views(self) -> dict[str, View]:
        return self.t.views

    @property
    def outer(self) -> set[str]:
        """Rows iterated only for the enclosing tables (neither output nor reduced rows)."""
        return set(self.ext) - set(self.out.indices)

    def reject(self, reason: str, split: bool = False) -> Rejected:
        return Rejected(f"output {self.out.tensor}: {reason}", LoweringError, split)


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


def _check_no_reduction_under_add(out: FusedOutput, group: Group, fac: frozenset[str]) -> Rejected | None:
    """An inlined reduction under an addition needs a region split (the sum of products form)."""
    bad = _reduced_under_add(out.body, group.views, fac)
    if bad:
        return Rejected(f"output {out.tensor}: the reduction inside {bad} is added to other terms "
                        "but cannot be lowered as a factored intermediate", LoweringError, split=True)
    return None


def _start_table(group: Group, out: FusedOutput, factored: bool, nest: Nest | None,
                 fac: frozenset[str], plan: dict[str, Nest | None], memo: dict) -> _Construction:
    """Rows (the fused order restricted to what the output iterates), input views, inlined and
    factored intermediates, in first-use order."""
    ext = nest.rows if nest is not None else ()
    own = _own(out.body, group.views, fac)
    order = [*ext, *(i for i in group.order if i in own and i not in ext)]
    cols: list[str] = []
    named: list[VNamed] = []
    kids: list[VNamed] = []
    _view_order(out.body, cols, named, fac, kids)
    for k in kids:
        if k.tensor not in plan:
            raise AssertionError(f"no factoring plan for {k.tensor}")
    t = FusionTable(out, [*order, VAL], cols, {c: group.views[c] for c in cols})
    t.ext, t.driven = ext, nest.driven if nest is not None else frozenset()
    t.named = {n.tensor: n for n in named}
    return _Construction(group, out, factored, fac, plan, memo, t, order, ext, named, kids)


def _check_nested_order(c: _Construction) -> Rejected | None:
    """A nested table iterates the enclosing rows first (``ext``), then its own in the group's
    order: an index of its own that the POG puts before one of those rows (a COO tensor's
    duplicate-summing index above its non-unique level, a mode order, a dataflow order) would
    be iterated below it, so the table cannot be nested there."""
    if not c.ext:
        return None
    pos = {r: k for k, r in enumerate(c.order)}
    for a, b, d in c.group.pog.edges(data=True):
        if a in pos and b in pos and pos[a] > pos[b]:
            return c.reject(f"cannot be nested under {' -> '.join(c.ext)}: {a} must come before {b} "
                            f"({'; '.join(d['reasons'])})" + c.group.where([a, b]))
    return None


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


def _add_driver_columns(c: _Construction) -> None:
    """Operand levels of nested children that this table's joiners merge (their "drivers"),
    scanned here down to the last row they are merged at; then the column list."""
    t = c.t
    for name, n in t.nested.items():
        for r in n.driven:
            if r in c.ext:
                continue  # merged by an enclosing table (it holds this table's drivers)
            for m in _members(t.children[name].drivers[r]):
                if m not in t.views:
                    c.driver_last[m] = max(c.driver_last.get(m, -1), c.order.index(r))
    for m in c.driver_last:
        t.views[m] = c.group.views[m]
    t.columns = [*t.columns, *c.driver_last, *[k.tensor for k in c.kids],
                 *[n.tensor for n in c.named], c.out.tensor]


def _check_outputs_iterated(c: _Construction) -> Rejected | None:
    """Every output index must be an index of some operand."""
    for i in c.out.indices:
        if not any(i in v.indices for v in c.views.values()) and not any(
                i in k.indices for k in c.kids):
            return c.reject(f"index {i} is not an index of any operand, so nothing iterates it")
    return None


def _place_child_cells(c: _Construction) -> None:
    """Factored intermediates: coordinates at their rows, value (repeated) after the
    innermost; a nested one's rows but the innermost are merged by this table's joiners."""
    t, order = c.t, c.order
    for k in c.kids:
        ct = t.children[k.tensor]
        # a 0-d intermediate (a full reduction) has no rows: its value is repeated over all
        last = next((r for r in reversed(order) if r in k.indices), None)
        for row in order:
            if row in k.indices:
                t.cells[(row, k.tensor)] = _child_row_cell(t, ct, k.tensor, row, last)
            elif last is None or order.index(row) > order.index(last):
                above = CellRef(k.tensor, _prev(order, row)) if order.index(row) else CellRef(k.tensor, VAL)
                t.cells[(row, k.tensor)] = Cell(CellKind.REPEAT, (above, CellRef("?", row)))
        val_src = ct.reducers[-1].name + "[val]" if ct.reducers else f"<{k.tensor}_val>"
        text = val_src if not order or order[-1] == last else str(CellRef(k.tensor, order[-1]))
        t.cells[(VAL, k.tensor)] = Cell(CellKind.CHILD, text=text)


def _child_row_cell(t: FusionTable, ct: FusionTable, name: str, row: str, last: str) -> Cell:
    if name in t.nested and row != last:
        return Cell(CellKind.REF, (CellRef(_members(ct.drivers[row])[0], row),))
    src = ct.crd_source[row]
    return Cell(CellKind.CHILD, text=f"{src}[crd]" if src != row else f"<{name}_{row}>")


def _place_view_cells(c: _Construction) -> Rejected | None:
    """Steps (1) and (2): scanners, repeats and value loads of the input views, top down;
    levels at rows an enclosing table iterates are handed down by its joiner (driven cells)."""
    t = c.t
    for col, v in t.views.items():
        levels = v.level_indices()
        parent = CellRef(ROOT, "")
        scanned = 0
        stop = c.driver_last.get(col)
        for pos, row in enumerate(c.order):
            if stop is not None and pos > stop:
                break
            if row in v.indices:
                if levels[scanned] != row:
                    if c.ext or stop is not None:
                        return c.reject(f"{v} is stored with {levels[scanned]} before {row}, but a "
                                        f"nested iteration visits {'->'.join(c.order)}")
                    raise AssertionError(f"view {v} is discordant with order {c.order}")
                if row in c.ext:
                    t.cells[(row, col)] = Cell(CellKind.DRIVEN, (CellRef(col, row),))
                else:
                    t.cells[(row, col)] = Cell(CellKind.SCAN, (parent,), level=scanned)
                scanned += 1
            else:
                t.cells[(row, col)] = Cell(CellKind.REPEAT, (parent, CellRef("?", row)))
            parent = CellRef(col, row)
        if stop is None:
            t.cells[(VAL, col)] = Cell(CellKind.LOAD, (parent,))
    return None


def _merge_streams(c: _Construction) -> Rejected | None:
    """Step (4): scanners of views sharing a row move into one intersect (product) or union
    (sum) cell; record which rows enumerate their whole dimension."""
    t = c.t
    for row in c.order:
        t.n_parents[row] = frozenset(c.nref)
        tree = None if row in c.ext else _row_join(c, row)  # an enclosing table merges ext rows
        if isinstance(tree, Join):
            t.joins[row] = tree
        t.full[row] = _full(tree, row, c.views, c.nref, t.children)
        why = _check_sum_iterates(c, row)
        if why is not None:
            return why
        if isinstance(tree, Join) and (tree.kind is JoinKind.UNION
                                       or any(isinstance(k, Join) for k in tree.children)):
            c.nref.update(_gapped(tree, row, c.views, c.nref, t.children))
    return None


def _gapped(tree: Join, row: str, views: dict[str, View], nref: set[str],
            children: dict[str, FusionTable] | None) -> set[str]:
    """The members of a row's join whose references can be empty (``N``) at a coordinate the
    join emits: a member that does not enumerate the dimension itself, and every member under
    a union operand that does not (``T1`` in ``Union(Intersect(T1, T2), B)`` with ``T2``
    compressed has no fibre where only ``B`` has the coordinate, dense as ``T1`` is)."""
    out: set[str] = set()

    def walk(node: str | Join, gap: bool) -> None:
        if isinstance(node, str):
            if gap or not _leaf_full(node, row, views, nref, children):
                out.add(node)
            return
        for k in node.children:
            walk(k, gap or (node.kind is JoinKind.UNION and not _full(k, row, views, nref, children)))

    walk(tree, False)
    return out


def _row_join(c: _Construction, row: str) -> str | Join | None:
    """The merge structure at ``row``; a leading factored intermediate drives its rows but the
    innermost alone (every member enumerates the dimension there)."""
    tree = _subst_drivers(_join_tree(c.out.body, row, c.views, set(), c.fac), row, c.t)
    lead_kid = next((k.tensor for k in c.kids if k.tensor not in c.t.nested
                     and row in k.indices
                     and row != [r for r in c.order if r in k.indices][-1]), None)
    return lead_kid if isinstance(tree, Join) and lead_kid is not None else tree


def _check_sum_iterates(c: _Construction, row: str) -> Rejected | None:
    """A term lacking ``row`` added to terms that have it: those terms must enumerate the whole
    dimension (locally: an enclosing product may still intersect them with a compressed
    operand, e.g. a fused ``A·relu(B·X + b)``, as the product is 0 elsewhere)."""
    views = c.group.views
    lacking = [d for d, other in _lacking_in_sum(c.out.body, row, c.views, c.fac)
               if not _full(_join_tree(other, row, views, set(), c.fac), row, views, c.nref,
                            c.t.children)]
    if lacking:
        return c.reject(f"{lacking[0]} lacks index {row} but is added to operands that have it; "
                        f"that needs a dense iteration over {row}, but the {row} coordinates come "
                        f"from compressed levels (store an operand with a dense level for {row})")
    return None


def _merge_drivers(c: _Construction) -> Rejected | None:
    """The operand levels an enclosing joiner merges for this (nested) table.  Every reference
    it hands down must be a real one (never N: the pipeline here would scan an empty fibre
    where it assumes a full one), so operands added at a driven row must all be dense there."""
    t = c.t
    views = c.group.views
    for r in sorted(t.driven, key=c.order.index):
        tree = _subst_drivers(_join_tree(c.out.body, r, views, set(), c.fac), r, t)
        why = _driver_problem(tree, r, views)
        if why is not None:
            return c.reject(f"cannot be nested under the iteration over {r}: {why}")
        assert tree is not None
        t.drivers[r] = tree
        t.driven_full[r] = _full(tree, r, views, set())
    return None


def _resolve_row_references(c: _Construction) -> None:
    """Repeat cells' "row crd" references become the row's source column; inlined
    intermediates get references to the row coordinates and a compute cell in ``val``."""
    t = c.t
    for (row, col), cell in list(t.cells.items()):
        if cell.kind is CellKind.REPEAT:
            t.cells[(row, col)] = Cell(CellKind.REPEAT, (cell.args[0], _row_ref(t, row)))
    for n in c.named:
        for row in c.order:
            if row in n.indices:
                t.cells[(row, n.tensor)] = Cell(CellKind.REF, (_row_ref(t, row),))
        t.cells[(VAL, n.tensor)] = Cell(CellKind.COMPUTE, text=t.compute_text(n.body))


def _place_reducers(c: _Construction) -> Rejected | None:
    """Step (3): reductions, inner to outer.  Red0 (reduce the innermost fiber) is only correct
    when no row above it can have an empty fiber: a bare stop from an empty outer fiber looks
    like the end of an empty inner fiber.  Otherwise the trailing reductions are keyed by the
    innermost output coordinate (held down to the reduced rows) and folded by Red1
    accumulators, which read the outer stream and so tell the two apart.  Rows iterated only
    for enclosing tables (``outer``) are neither output nor reduced rows: their stops just nest
    the streams one level deeper."""
    t, out = c.t, c.out
    rorder = [r for r in c.order if r not in c.outer]
    trailing = [r for r in rorder if r not in out.indices and not any(
        i in out.indices for i in rorder[rorder.index(r) + 1:])]
    last_out = next((i for i in reversed(rorder) if i in out.indices), None)
    safe = all(t.full[r] for r in c.order[:c.order.index(trailing[-1])]) if trailing else True
    if safe and last_out is not None and _exact_keys(c, trailing, last_out):
        safe = False  # Red0 emits a value for every fibre, also where no term reaches one
    if safe or last_out is None:
        return _fold_rows(c, rorder, None)
    t.hold = [last_out, *trailing]
    outers = [*reversed(trailing[:-1]), last_out]
    for k, o_row in enumerate(outers):
        t.reducers.append(Reducer(1, trailing[len(trailing) - 1 - k], last_out, outer=o_row))
    t.crd_source[last_out] = t.reducers[-1].name
    return _fold_rows(c, rorder[:rorder.index(last_out)], last_out)


def _exact_keys(c: _Construction, trailing: list[str], last_out: str) -> bool:
    """Whether the trailing reductions must emit only the ``last_out`` coordinates some term
    reaches (a softmax reads the output's visited coordinates, :attr:`Group.exact`): some
    reduced row may be empty, and the output does not declare ``last_out`` dense."""
    out = c.out
    if out.tensor not in c.group.exact or all(c.t.full[r] for r in trailing):
        return False
    if out.fmt is not None:
        level = [out.indices[m] for m in out.fmt.mode_order].index(last_out)
        return out.fmt.levels[level] is not Format.DENSE
    return True


def _fold_rows(c: _Construction, rows: list[str], inner: str | None) -> Rejected | None:
    """Walk ``rows`` inner to outer: output rows are their own coordinate source, a reduced row
    under the innermost output row is a Red1 keyed by it, one above two output rows a Red2
    keyed by both, one below every output row a Red0.  ``inner``: the innermost output row
    already placed (below ``rows``), if any."""
    t = c.t
    below = [inner] if inner is not None else []  # output rows under the current one
    for row in reversed(rows):
        if row in c.out.indices:
            below.insert(0, row)
            inner = inner or row
            t.crd_source[row] = row
        elif inner is None:
            t.reducers.append(Reducer(0, row))
        elif len(below) > 2:
            return c.reject(f"reduction over {row} encloses the output indices "
                            f"{', '.join(below)}; it needs a sparse accumulator of order "
                            f"{len(below)} (the primitive set has orders 1 and 2)")
        elif len(below) == 2:
            if _vector_valued(c.out.body, c.group.views):
                return c.reject(f"the reduction over {row} is above the output indices {below[0]} and "
                                f"{inner}: an order-2 sparse accumulator (spacc2), which has no vector "
                                "form, would add the vectors of the blocked dimension; block another "
                                "dimension (or none)" + c.group.where([row]))
            red = Reducer(2, row, inner, inner0=below[0])
            t.reducers.append(red)
            t.crd_source[below[0]] = t.crd_source[inner] = red.name
        else:
            red = Reducer(1, row, inner)
            t.reducers.append(red)
            t.crd_source[inner] = red.name
    return None


def _vector_valued(e: VExpr, views: dict[str, View]) -> bool:
    """Whether ``e``'s values are vectors: it reads a blocked view outside a lane sum."""
    if isinstance(e, VAccess):
        return views[e.view].vector is not None
    if isinstance(e, VUn):
        return e.op is not UnOp.LANE_SUM and _vector_valued(e.arg, views)
    if isinstance(e, VNamed):
        return _vector_valued(e.body, views)
    return _vector_valued(e.lhs, views) or _vector_valued(e.rhs, views)


def _place_output_cells(c: _Construction) -> Rejected | None:
    """The output column (coordinate sources, reducers, the value) and the stored format."""
    t, out = c.t, c.out
    for row in c.order:
        if row in c.outer:
            continue
        if row in out.indices:
            src = t.crd_source[row]
            reduced = src.startswith("Red")
            t.cells[(row, out.tensor)] = Cell(CellKind.REDUCE if reduced else CellKind.REF,
                                              (_row_ref(t, row),),
                                              text=f"{src}[crd]" if reduced else str(_row_ref(t, row)))
        else:
            red = next(r for r in t.reducers if r.row == row or r.outer == row)
            t.cells[(row, out.tensor)] = Cell(CellKind.REDUCE, text=red.name)
    val_text = f"{t.reducers[-1].name}[val]" if t.reducers else t.compute_text(out.body)
    t.cells[(VAL, out.tensor)] = Cell(CellKind.COMPUTE if not t.reducers else CellKind.REDUCE,
                                      text=val_text)
    fmt = _output_format(t, c.order)
    if isinstance(fmt, Rejected):
        return fmt
    t.out_fmt = fmt
    return None


def _is_row(e: VExpr) -> bool:
    """Whether ``e`` is a row function application (softmax, layernorm)."""
    return isinstance(e, VUn) and e.op.row


def _visits_all(t: FusionTable, row: str) -> bool:
    """Whether every fibre of ``row`` holds every coordinate: a full merge, or a factored
    intermediate whose accumulator adds full fibres over a reduction that visits at least one
    coordinate (the sum of dense products has every coordinate)."""
    if t.full[row]:
        return True
    src = t.joins[row] if row in t.joins else t.row_source(row)
    if not isinstance(src, str) or src not in t.children:
        return False
    ct = t.children[src]
    reds = [r for r in ct.reducers if r.inner == row]
    return bool(reds) and ct.full.get(row, False) and all(ct.full.get(r.row, False) for r in reds)


def _inlined_row_functions(e: VExpr, fac: frozenset[str], top: bool = True) -> list[VUn]:
    """Row functions in ``e`` that this table would evaluate inside its own iteration (not the
    whole body, not inside a factored intermediate)."""
    if isinstance(e, VUn):
        return ([] if top or not e.op.row else [e]) + _inlined_row_functions(e.arg, fac, False)
    if isinstance(e, VBin):
        return _inlined_row_functions(e.lhs, fac, False) + _inlined_row_functions(e.rhs, fac, False)
    if isinstance(e, VNamed) and e.tensor not in fac:
        return _inlined_row_functions(e.body, fac, False)
    return []


def _check_row_functions(c: _Construction) -> Rejected | None:
    """A row function runs over the fibres of its index as its operand's iteration visits
    them: it must be the whole output of a table (its own pipeline, or the graph's output)
    whose innermost row is that index; layernorm also needs every coordinate of the fibre."""
    inner = _inlined_row_functions(c.out.body, c.fac)
    if inner:
        fn = inner[0]
        return c.reject(f"{fn.op.value} along {fn.index} is read inside another iteration: it "
                        "needs a pipeline of its own, whose indices must lead its consumer's "
                        "dataflow order, or a region split", split=True)
    fn = c.out.body
    if not _is_row(fn):
        return None
    assert isinstance(fn, VUn)
    if not c.order or c.order[-1] != fn.index:
        return c.reject(f"{fn.op.value} runs along {fn.index}, which must be its innermost row "
                        f"(rows: {', '.join(c.order)})")
    if fn.op is UnOp.LAYERNORM and not _visits_all(c.t, fn.index):
        return c.reject(f"layernorm along {fn.index} needs every coordinate of each fibre, but "
                        f"the {fn.index} coordinates of {_describe(fn.arg, c.views)} come from "
                        "compressed levels (store its operands dense along "
                        f"{fn.index})")
    return _blocked_mask_problem(c, fn)


def _blocked_mask_problem(c: _Construction, fn: VUn) -> Rejected | None:
    """A masked softmax normalises over the coordinates the iteration visits, but a blocked
    tensor stored with compressed levels stores a block wherever any of its lanes has an entry
    (the other lanes hold explicit zeros there), so its lanes do not have their own coordinates:
    the softmax would count those zeros.  Refused unless every row visits the whole dimension
    (then the mask is full anyway)."""
    if fn.op is not UnOp.SOFTMAX or all(c.t.full.get(r, False) for r in c.order):
        return None
    for v in _views_under(fn.arg, c.group.views):
        if v.vector is not None and any(f is not Format.DENSE for f in v.fmt.levels):
            return c.reject(
                f"softmax along {fn.index} of {_describe(fn.arg, c.views)} runs over the coordinates "
                f"the iteration visits, but {v.tensor} is blocked (mode {v.vector.mode} in blocks of "
                f"{v.vector.block}) and stored {v.fmt}: a block is stored wherever one of its lanes "
                "has an entry, so the other lanes would visit explicit zeros; store "
                f"{v.tensor} dense, or do not block it")
    return None


def _blocked_exact_problem(c: _Construction) -> Rejected | None:
    """A softmax downstream reads the visited coordinates of this table's output
    (:attr:`Group.exact`), but a blocked operand stored with compressed levels stores a block
    wherever one of its lanes has an entry, so its explicit zeros reach coordinates no term of
    the unblocked statement reaches (a blocked reduction emits them with the value 0): the
    softmax would count them.  Refused as :func:`_blocked_mask_problem` is, unless every row
    visits the whole dimension."""
    if c.out.tensor not in c.group.exact or all(c.t.full.get(r, False) for r in c.order):
        return None
    for v in _views_under(c.out.body, c.group.views):
        if v.vector is not None and any(f is not Format.DENSE for f in v.fmt.levels):
            return c.reject(
                f"a softmax runs over the coordinates {c.out.tensor} visits, but {v.tensor} is "
                f"blocked (mode {v.vector.mode} in blocks of {v.vector.block}) and stored {v.fmt}: "
                "a block is stored wherever one of its lanes has an entry, so the other lanes "
                f"would add coordinates of {c.out.tensor} that no term reaches; store {v.tensor} "
                "dense, or do not block it")
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


def _row_ref(t: FusionTable, row: str) -> CellRef:
    """The coordinate stream of ``row``: its source column, or the enclosing table's."""
    return CellRef(OUTER, row) if row in t.ext else CellRef(t.row_source(row), row)


def _members(tree: str | Join) -> list[str]:
    return tree.members() if isinstance(tree, Join) else [tree]


def _joins_in(tree: str | Join) -> list[Join]:
    if not isinstance(tree, Join):
        return []
    return [tree, *(j for c in tree.children for j in _joins_in(c))]


def _subst_drivers(tree: str | Join | None, row: str, t: FusionTable) -> str | Join | None:
    """``tree`` with every nested child driven at ``row`` replaced by its drivers there."""
    return _subst(tree, {name: t.children[name].drivers[row] for name, n in t.nested.items()
                         if row in n.driven})


def _child_output(group: Group, k: VNamed) -> FusedOutput:
    """The output a factored intermediate's own table computes; its index sizes come from the
    views it reads (another output of the group may use the same index name for another size)."""
    sizes = {i: n for v in _views_under(k.body, group.views) for i, n in zip(v.indices, v.shape)}
    own = _own(k.body, group.views, frozenset())
    local = tuple(i for i in group.order if i in own and i not in k.indices)
    return FusedOutput(k.tensor, k.indices, local, k.body, None, tuple(sizes[i] for i in k.indices))


def _check_functions_of_zero(out: FusedOutput, views: dict[str, View]) -> Rejected | None:
    """A function with ``f(0) != 0`` (exp, sigmoid, rsqrt, a scalar shift) is applied to the
    coordinates the iteration visits, so every coordinate of its operand must be visited: all
    tensors under it must be stored densely."""
    for e in _unary_nodes(out.body):
        # row functions run over the visited coordinates by definition
        if e.op.zero_preserving or e.op.row or densified(e.arg, views) or not value_indices(e.arg, views):
            continue  # (a full reduction is one value: its iteration visits it)
        for name in views_under(e.arg):
            v = views[name]
            if any(f is not Format.DENSE for f in v.fmt.levels):
                return Rejected(
                    f"output {out.tensor}: {_describe(e, views)} is not 0 where its operand is 0, "
                    f"so it needs every coordinate of {v}, but {v.tensor} is stored {v.fmt} (store "
                    "it dense, or use a zero-preserving function: relu, neg, gelu, scalar factors)",
                    LoweringError)
    return None


def _unary_nodes(e: VExpr) -> list[VUn]:
    """The elementwise function applications in ``e``, outer first."""
    if isinstance(e, VUn):
        return [e, *_unary_nodes(e.arg)]
    if isinstance(e, VBin):
        return _unary_nodes(e.lhs) + _unary_nodes(e.rhs)
    if isinstance(e, VNamed):
        return _unary_nodes(e.body)
    return []


def _prev(order: Sequence[str], row: str) -> str:
    return order[order.index(row) - 1]


def _views_under(e: VExpr, views: dict[str, View]) -> list[View]:
    """The views an expression reads, through inlined intermediates (each shared node once:
    an expression is a DAG whose intermediates a nonlinear function can read many times)."""
    seen: dict[int, list[View]] = {}

    def walk(x: VExpr) -> list[View]:
        if id(x) not in seen:
            if isinstance(x, VAccess):
                seen[id(x)] = [views[x.view]]
            elif isinstance(x, VUn):
                seen[id(x)] = walk(x.arg)
            elif isinstance(x, VNamed):
                seen[id(x)] = walk(x.body)
            else:
                seen[id(x)] = walk(x.lhs) + walk(x.rhs)
        return seen[id(x)]
    return walk(e)


def _own(e: VExpr, views: dict[str, View], fac: frozenset[str]) -> set[str]:
    """Index variables a node iterates: its views' and its factored children's outputs (each
    shared node of the DAG visited once)."""
    seen: dict[int, frozenset[str]] = {}

    def walk(x: VExpr) -> frozenset[str]:
        if id(x) not in seen:
            if isinstance(x, VAccess):
                seen[id(x)] = frozenset(views[x.view].indices)
            elif isinstance(x, VUn):
                seen[id(x)] = walk(x.arg)
            elif isinstance(x, VNamed):
                seen[id(x)] = frozenset(x.indices) if x.tensor in fac else walk(x.body)
            else:
                seen[id(x)] = walk(x.lhs) | walk(x.rhs)
        return seen[id(x)]
    return set(walk(e))


def _candidates(e: VExpr, fac: frozenset[str]) -> list[VNamed]:
    """Intermediates directly under this node (through compute and inlined intermediates), in
    the order of a left-to-right walk, a node read several times listed once."""
    out: list[VNamed] = []
    seen: set[int] = set()

    def walk(x: VExpr) -> None:
        if id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, VBin):
            walk(x.lhs)
            walk(x.rhs)
        elif isinstance(x, VUn):
            walk(x.arg)
        elif isinstance(x, VNamed):
            out.append(x)
            if x.tensor not in fac:
                walk(x.body)
    walk(e)
    return out


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


def _subst(tree: str | Join | None, drivers: dict[str, str | Join]) -> str | Join | None:
    """``tree`` with the names in ``drivers`` replaced by their trees (same-kind joins flattened,
    repeated members merged)."""
    if tree is None or isinstance(tree, str):
        return drivers.get(tree, tree) if tree is not None else None
    parts: list[str | Join] = []
    for c in tree.children:
        sub = _subst(c, drivers)
        assert sub is not None
        for x in (sub.children if isinstance(sub, Join) and sub.kind is tree.kind else (sub,)):
            if x not in parts:
                parts.append(x)
    return parts[0] if len(parts) == 1 else Join(tree.kind, tuple(parts))


def _driver_problem(tree: str | Join | None, row: str, views: dict[str, View]) -> str | None:
    """Why a joiner at ``row`` cannot hand references down to nested pipelines, or None.  Each
    reference must be a real one (a pipeline scanning on from an N would see an empty fibre
    where it may assume a full one), so a union must only merge views dense at ``row``, and
    every member must be a view (a factored intermediate there is not scanned)."""
    if tree is None:
        return f"nothing iterates {row}"
    for m in _members(tree):
        if m not in views:
            return f"{m} has {row} as an outer index"
    for j in _joins_in(tree):
        if j.kind is JoinKind.UNION and not all(
                isinstance(c, str) and _leaf_full(c, row, views, set()) for c in j.children):
            return (f"operands added at {row} ({j.render(row)}) do not all enumerate it, so "
                    "some references would be N")
    return None


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


def _operands(e: VExpr, fac: frozenset[str]) -> list[VExpr]:
    if isinstance(e, VBin):
        return _operands(e.lhs, fac) + _operands(e.rhs, fac)
    if isinstance(e, VUn):
        return _operands(e.arg, fac)
    if isinstance(e, VNamed) and e.tensor not in fac:
        return _operands(e.body, fac)
    return [e]


def _reduced_under_add(e: VExpr, views: dict[str, View], fac: frozenset[str],
                       under: bool = False) -> str | None:
    """An inlined intermediate with a reduction that sits under an addition (or a nonlinear
    elementwise function), if any."""
    if isinstance(e, VUn):
        return _reduced_under_add(e.arg, views, fac, under or not e.op.linear)
    if isinstance(e, VBin):
        add = under or e.op is not Op.MUL
        return (_reduced_under_add(e.lhs, views, fac, add)
                or _reduced_under_add(e.rhs, views, fac, add))
    if isinstance(e, VNamed) and e.tensor not in fac:
        if under and _own(e.body, views, fac) - set(e.indices):
            return e.tensor
        return _reduced_under_add(e.body, views, fac, under)
    return None


def _inner_names(e: VExpr) -> set[str]:
    if isinstance(e, VBin):
        return _inner_names(e.lhs) | _inner_names(e.rhs)
    if isinstance(e, VUn):
        return _inner_names(e.arg)
    if isinstance(e, VNamed):
        return {e.tensor} | _inner_names(e.body)
    return set()


def _count_having(e: VExpr, row: str, views: dict[str, View], fac: frozenset[str]) -> int:
    if isinstance(e, VAccess):
        return int(row in views[e.view].indices)
    if isinstance(e, VUn):
        return _count_having(e.arg, row, views, fac)
    if isinstance(e, VNamed):
        return int(row in e.indices) if e.tensor in fac else _count_having(e.body, row, views, fac)
    return _count_having(e.lhs, row, views, fac) + _count_having(e.rhs, row, views, fac)


def _leaf_full(view: str, row: str, views: dict[str, View], nref: set[str],
               children: dict[str, FusionTable] | None = None) -> bool:
    if children and view in children:
        ct = children[view]
        if row in ct.driven:  # nested: its coordinates there are the enclosing joiner's
            return ct.driven_full[row]
        return ct.crd_source[row] == row and ct.full[row]
    v = views[view]
    level = v.level_indices().index(row)
    return v.fmt.levels[level] is Format.DENSE and view not in nref


def _full(tree: str | Join | None, row: str, views: dict[str, View], nref: set[str],
          children: dict[str, FusionTable] | None = None) -> bool:
    if tree is None:
        return False
    if isinstance(tree, str):
        return _leaf_full(tree, row, views, nref, children)
    kids = [_full(k, row, views, nref, children) for k in tree.children]
    return all(kids) if tree.kind is JoinKind.INTERSECT else any(kids)


def _output_format(t: FusionTable, order: Sequence[str]) -> TensorFormat | Rejected:
    """The declared format (checked) or dense where the coordinates enumerate the dimension."""
    out = t.output
    pos = {i: k for k, i in enumerate(order)}
    written = sorted(range(len(out.indices)), key=lambda m: pos[out.indices[m]])
    dense_ok = [t.crd_source[i] == i and t.full[i] for i in out.indices]
    if out.fmt is None:
        levels = [Format.DENSE if dense_ok[m] else Format.COMPRESSED for m in written]
        for lvl in _hidden_dense(levels):
            levels[lvl] = Format.COMPRESSED
        return TensorFormat(tuple(levels), tuple(written))
    if tuple(out.fmt.mode_order) != tuple(written):
        raise AssertionError("output mode order is a POG constraint")
    for lvl, m in enumerate(written):
        if out.fmt.levels[lvl] is Format.DENSE and not dense_ok[m]:
            return Rejected(
                f"output {out.tensor}: level {lvl} (index {out.indices[m]}) is declared dense but "
                f"its coordinates do not enumerate the whole dimension in order "
                f"{'->'.join(order)}; declare that level compressed", LoweringError)
    hidden = _hidden_dense(list(out.fmt.levels))
    if hidden:
        lvl = hidden[0]
        return Rejected(
            f"output {out.tensor}: level {lvl} (index {out.indices[written[lvl]]}) is declared dense between "
            f"compressed levels: an empty fiber above it and an empty fiber below it reach the writers as "
            f"the same stream, so the level below cannot count its fibers; declare level {lvl} compressed",
            LoweringError)
    return out.fmt


def _hidden_dense(levels: Sequence[Format]) -> list[int]:
    """The dense levels with a compressed level above and one below: the stream of the compressed
    level below closes a fiber at the stop of an empty fiber above (no positions of the dense
    level) exactly as at the stop of one empty fiber under one position, so its writer cannot
    count its fibers (the whole tensor empty, say).  Compressed there, the crd_drop pairs of the
    lowering drop empty fibers instead."""
    comp = [lvl for lvl, f in enumerate(levels) if f is not Format.DENSE]
    if not comp:
        return []
    return [lvl for lvl, f in enumerate(levels) if f is Format.DENSE and comp[0] < lvl < comp[-1]]
