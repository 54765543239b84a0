"""The ``locate`` pass: iterate the sparse operands and locate into the dense ones.

A dense level supports random access: under a parent reference ``p``, coordinate ``c`` is at
position ``p * dim + c``.  So where an intersection merges a dense level with at least one
compressed (or otherwise sparse) operand, the dense level need not be scanned and intersected
coordinate by coordinate: the other operands produce the coordinates and a ``locate`` node
computes the dense level's references from them (the iteration-lattice rule: an intersection
with a dense level becomes a locate).  A union with a dense level still iterates it (every
coordinate of the union is needed), and so does an intersection of dense levels only; but a
union of dense levels only, under an intersection (a densified iteration multiplied by a
sparse operand), covers every coordinate and so joins the intersection's located members.

A dense level is located only when its parent reference is never ``N`` (the view is not a
union member at an earlier row): an intersection drops a coordinate whose dense operand is
absent, a locate would not.

The pass rewrites the tables' scan cells into ``Loc`` cells (``--explain`` renders them);
lowering (:mod:`.lower`) emits one ``locate`` node per such cell.  Values are unchanged; the work
becomes proportional to the sparse operand's nonzeros instead of the dense dimension.

After it, :func:`nonunique_join_problem` checks that a non-unique level of a COO tensor meets
located dense levels only (:mod:`.coo`).
"""

from __future__ import annotations

from ...ir.tensor import Format
from ...options import Kind, Option, Source
from ..program import LoweringError, Rejected
from ..table_records import Cell, CellKind, FusionTable, Join, JoinKind
from .base import GroupIR, Pass, ProgramIR
from .table import tables_text

__all__ = ["LOCATE", "PASS", "locate_dense_levels", "located_levels", "nonunique_join_problem"]


def locate_dense_levels(t: FusionTable) -> list[tuple[str, str]]:
    """Rewrite ``t`` (and its factored intermediates' tables) in place: every dense level that
    an intersection can locate gets a ``Loc`` cell.  Returns the (row, view) pairs located by
    this call, intermediates' tables first."""
    out: list[tuple[str, str]] = []
    for ct in t.children.values():
        out += locate_dense_levels(ct)
    for row in list(t.joins):
        t.joins[row] = tree = _flatten_dense_unions(t, t.joins[row], row)
        for j in _intersections(tree):
            for view in _locatable(t, j, row):
                cell = t.cells[(row, view)]
                t.cells[(row, view)] = Cell(CellKind.LOCATE, cell.args, level=cell.level)
                out.append((row, view))
    return out


def located_levels(t: FusionTable) -> list[tuple[str, str]]:
    """The (row, view) pairs of ``t`` and its intermediates' tables with ``Loc`` cells."""
    out: list[tuple[str, str]] = []
    for ct in t.children.values():
        out += located_levels(ct)
    out += [(row, col) for (row, col), cell in t.cells.items() if cell.kind is CellKind.LOCATE]
    return out


def _intersections(tree: Join) -> list[Join]:
    out = [tree] if tree.kind is JoinKind.INTERSECT else []
    for k in tree.children:
        if isinstance(k, Join):
            out += _intersections(k)
    return out


def _flatten_dense_unions(t: FusionTable, j: Join, row: str) -> Join:
    """``j`` with every union under an intersection whose members are all dense levels (a
    densified iteration: an operand where ``f(0) != 0`` next to the dense all-coordinates term)
    replaced by its members.  Such a union yields every coordinate of the level, so it adds no
    constraint to the intersection: its members can be located from the other operands'
    coordinates instead of being scanned and merged (work in proportion to the sparse operand,
    not to the dense dimension).  Values do not change: every member is present at every
    coordinate either way."""
    kids: list[str | Join] = []
    for k in j.children:
        if isinstance(k, Join):
            k = _flatten_dense_unions(t, k, row)
            if (j.kind is JoinKind.INTERSECT and k.kind is JoinKind.UNION
                    and all(isinstance(m, str) and _dense_scan(t, m, row) for m in k.children)):
                kids += list(k.children)
                continue
        kids.append(k)
    if all(isinstance(k, str) and _dense_scan(t, k, row) for k in kids):
        kids = list(j.children)  # dense levels only: nothing to locate from, keep the merge as written
    return j if tuple(kids) == j.children else Join(j.kind, tuple(kids))


def _locatable(t: FusionTable, j: Join, row: str) -> list[str]:
    """The members of intersection ``j`` at ``row`` that can be located: input views scanned
    there at a dense level whose parent reference is never N.  None if no other member would be
    left to produce the coordinates."""
    dense = [k for k in j.children if isinstance(k, str) and _dense_scan(t, k, row)]
    return dense if len(dense) < len(j.children) else []


def _dense_scan(t: FusionTable, view: str, row: str) -> bool:
    if view not in t.views or view in t.children:
        return False
    cell = t.cells.get((row, view))
    if cell is None or cell.kind is not CellKind.SCAN:
        return False
    v = t.views[view]
    return (v.fmt.levels[cell.level] is Format.DENSE
            and view not in t.n_parents.get(row, frozenset()))


def nonunique_join_problem(t: FusionTable, located: bool) -> str | None:
    """None, or why a fusion table (and its intermediates' tables) merges a non-unique level
    of a COO tensor with a level that is not located (:mod:`.coo`): a sorted merge of a
    non-decreasing stream would drop or misplace repeated coordinates; ``located``: the locate
    pass ran."""
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


def _describe(t: FusionTable, view: str, row: str) -> str:
    v = t.views.get(view)
    cell = t.cells.get((row, view))
    if v is None or cell is None or cell.level < 0:
        return f"{view}"
    return f"{v} (its {v.fmt.levels[cell.level].value} level {cell.level})"


# ----------------------------------------------------------------------------- the pass
LOCATE = Option("locate", Kind.FLAG, True,
                "scan and intersect dense levels instead of locating into them (the locate pass "
                "off, for comparison: work then grows with the dense dimension)",
                sources=Source.PROGRAM | Source.MODEL)


def _run(state: ProgramIR, g: GroupIR) -> Rejected | None:
    if state.options.locate:
        for t in g.tables:
            locate_dense_levels(t)
    for t in g.tables:  # COO: a non-unique level meets located dense levels only
        why = nonunique_join_problem(t, state.options.locate)
        if why:
            return Rejected(f"graph {g.plan.name}: {why}", LoweringError)
    return None


PASS = Pass("locate", "iterate the sparse operands and locate into dense levels under "
            "intersections (off with locate=False)", "list[FusionTable]", "list[FusionTable]",
            _run, tables_text, options=(LOCATE,), needs=("table",))
