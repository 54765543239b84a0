"""Expression helpers of the fusion tables (docs/compiler.md, "Fusion table"): the index
variables and views an expression reads, its intermediates and operands, join trees and their
formulas, which rows are full, and the output format.  Used by the construction steps
(:mod:`.table_steps`) and the factoring search (:mod:`.table`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.tensor import Format, TensorFormat
from .fused import FusedOutput, Group, VAccess, VBin, VExpr, View, VNamed, VUn, vexpr_nodes
from .program import LoweringError, Op, Rejected, UnOp, binop_text, unary_text
from .semantics import iteration_only
from .table_records import OUTER, Cell, CellKind, CellRef, FusionTable, Join, JoinKind


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


def _child_row_cell(t: FusionTable, ct: FusionTable, name: str, row: str, last: str) -> Cell:
    if name in t.nested and row != last:
        return Cell(CellKind.REF, (CellRef(_members(ct.drivers[row])[0], row),))
    src = ct.crd_source[row]
    return Cell(CellKind.CHILD, text=f"{src}[crd]" if src != row else f"<{name}_{row}>")


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


def _vector_valued(e: VExpr, views: dict[str, View]) -> bool:
    """Whether ``e``'s values are vectors: it reads a blocked view outside a lane sum."""
    if isinstance(e, VAccess):
        return views[e.view].vector is not None
    if isinstance(e, VUn):
        return e.op is not UnOp.LANE_SUM and _vector_valued(e.arg, views)
    if isinstance(e, VNamed):
        return _vector_valued(e.body, views)
    return _vector_valued(e.lhs, views) or _vector_valued(e.rhs, views)


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
    return [x for x in vexpr_nodes(e, into=lambda n: n.tensor not in fac, once=True) if isinstance(x, VNamed)]


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

