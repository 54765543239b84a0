"""The construction steps of a fusion table and the checks that refuse one (docs/compiler.md,
"Fusion table"), with the expression helpers they and the factoring search share: cell
placement, stream merging, reducers, the output format.  :mod:`fuseflow.compiler.table` runs
the steps (:data:`~fuseflow.compiler.table._STEPS`) and the factoring search."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.tensor import Format
from .fused import FusedOutput, Group, View, VNamed, VUn
from .program import LoweringError, Rejected, UnOp
from .semantics import densified, sparse_view_under, value_indices, visits_every
from .table_exprs import (
    _child_row_cell,
    _count_reads,
    _describe,
    _driver_problem,
    _eval_formula,
    _formula_names,
    _full,
    _gapped,
    _inlined_row_functions,
    _is_row,
    _join_formula,
    _join_tree,
    _lacking_in_sum,
    _members,
    _output_format,
    _own,
    _prev,
    _reduced_under_add,
    _row_ref,
    _subst_drivers,
    _unary_nodes,
    _vector_valued,
    _view_order,
    _views_under,
    _visits_all,
)
from .table_records import (
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
    accumulators, which read the outer stream and so tell the two apart -- unless the reduced
    rows' own fibres are never empty (dense there): then a bare stop can only close an empty
    outer fiber, and a ``nonempty`` Red0 (no value for a bare stop) is exact.  Rows iterated only
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
    if out.tensor not in c.group.exact and all(t.full[r] for r in trailing):
        # never-empty reduced fibres: bare stops are outer ones.  (A row function's reader keeps
        # the accumulator: it buffers the fibre the row function's two passes wait for.)
        return _fold_rows(c, rorder, None, nonempty=True)
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


def _fold_rows(c: _Construction, rows: list[str], inner: str | None, *,
               nonempty: bool = False) -> Rejected | None:
    """Walk ``rows`` inner to outer: output rows are their own coordinate source, a reduced row
    under the innermost output row is a Red1 keyed by it, one above two output rows a Red2
    keyed by both, one below every output row a Red0.  ``inner``: the innermost output row
    already placed (below ``rows``), if any; ``nonempty``: the Red0s emit no value for a bare
    stop (:func:`_place_reducers`)."""
    t = c.t
    below = [inner] if inner is not None else []  # output rows under the current one
    for row in reversed(rows):
        if row in c.out.indices:
            below.insert(0, row)
            inner = inner or row
            t.crd_source[row] = row
        elif inner is None:
            t.reducers.append(Reducer(0, row, nonempty=nonempty))
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


def _check_functions_of_zero(out: FusedOutput, views: dict[str, View]) -> Rejected | None:
    """A function with ``f(0) != 0`` (exp, sigmoid, rsqrt, a scalar shift) is applied to the
    coordinates the iteration visits, so every coordinate of its operand must be visited: all
    tensors under it must be stored densely."""
    for e in _unary_nodes(out.body):
        # row functions run over the visited coordinates by definition
        if (e.op.zero_preserving or e.op.row or densified(e.arg, views) or visits_every(e.arg, views)
                or not value_indices(e.arg, views)):
            continue  # (a full reduction is one value: its iteration visits it)
        if (v := sparse_view_under(e.arg, views)) is not None:
            return Rejected(
                f"output {out.tensor}: {_describe(e, views)} is not 0 where its operand is 0, "
                f"so it needs every coordinate of {v}, but {v.tensor} is stored {v.fmt} (store "
                "it dense, or use a zero-preserving function: relu, neg, gelu, scalar factors)",
                LoweringError)
    return None

