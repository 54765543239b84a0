"""The records of a fusion table (docs/compiler.md, "Fusion table"): cells and their kinds, cell
references, joins, reducers, nests and :class:`FusionTable` with its text rendering.
:mod:`fuseflow.compiler.table` builds them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..ir.tensor import TensorFormat
from .fused import FusedOutput, VAccess, VBin, VExpr, View, VNamed, VUn
from .program import Op, binop_text, unary_text
from .semantics import iteration_only

VAL = "val"
ROOT = "root"


class CellKind(enum.Enum):
    SCAN = "LS"
    LOCATE = "Loc"  # a dense level under an intersection: parent ref x dim + the row's crd
    REPEAT = "Rep"
    LOAD = "Val"
    REF = "ref"
    COMPUTE = "compute"
    REDUCE = "Red"
    CHILD = "child"  # a coordinate (or, innermost, value) stream of a factored intermediate
    DRIVEN = "driven"  # a stream handed down by an enclosing table (nested factored iteration)


@dataclass(frozen=True)
class CellRef:
    """``<col_row>``: the stream of column ``col`` at row ``row`` (``root``: a root reference)."""

    col: str
    row: str

    def __str__(self) -> str:
        return "root" if self.col == ROOT else f"<{self.col}_{self.row}>"


OUTER = "outer"  # CellRef column of a row whose coordinates an enclosing table produces


@dataclass(frozen=True)
class Nest:
    """How a factored intermediate nested under outer rows of its consumer is iterated.

    ``rows`` (in order) are the consumer's rows before the intermediate's innermost index: the
    intermediate is recomputed for every coordinate tuple of them, and their coordinate streams
    come from the consumer.  ``driven`` are the intermediate's own indices among them: the
    consumer's joiner at such a row also merges the intermediate's operand levels for it (its
    *drivers*), and hands their references down to the intermediate's pipeline, which scans on
    from there.  E.g. layer 2 of a GCN, ``Σ_u0 A[i,u0]·relu(Σ_u2 T1[u0,u2]·W[u3,u2] + b[u3])``
    in order i -> u0 -> u3: the reduction is nested under i, and the consumer's
    ``Intersect_u0(A, A')`` hands refs into the (dense) u0 level of ``A'`` (layer 1's copy of the
    adjacency) down to the pipeline computing row u0 of layer 1."""

    rows: tuple[str, ...]
    driven: frozenset[str]


@dataclass(frozen=True)
class Cell:
    kind: CellKind
    args: tuple[CellRef, ...] = ()
    level: int = -1  # scanner level
    text: str = ""  # rendering for compute / reducer cells

    def __str__(self) -> str:
        if self.kind is CellKind.SCAN:
            return f"LS({self.args[0]})"
        if self.kind is CellKind.LOCATE:
            return f"Loc({self.args[0]})"
        if self.kind is CellKind.REPEAT:
            return f"Rep({self.args[0]}, {self.args[1]})"
        if self.kind is CellKind.LOAD:
            return f"Val({self.args[0]})"
        if self.kind in (CellKind.REF, CellKind.DRIVEN):
            return str(self.args[0])
        return self.text


_NOTHING = Cell(CellKind.REF)  # placeholder for an empty table cell


class JoinKind(enum.Enum):
    INTERSECT = "Intersect"
    UNION = "Union"


@dataclass(frozen=True)
class Join:
    """A stream-merging cell: children are view names or nested joins."""

    kind: JoinKind
    children: tuple[str | Join, ...]

    def members(self) -> list[str]:
        out: list[str] = []
        for c in self.children:
            out += c.members() if isinstance(c, Join) else [c]
        return out

    def render(self, row: str, located: frozenset[str] = frozenset()) -> str:
        """``Intersect_j(A, B)``; members in ``located`` after a ``;`` as ``locate X``."""
        parts = [c.render(row, located) if isinstance(c, Join) else c for c in self.children
                 if c not in located]
        loc = [c for c in self.children if isinstance(c, str) and c in located]
        tail = f"; locate {', '.join(loc)}" if loc else ""
        return f"{self.kind.value}_{row}({', '.join(parts)}{tail})"


@dataclass(frozen=True)
class Reducer:
    """``Red0_r``: reduce the innermost fiber (row ``row``); ``Red1_r``: order-1 sparse
    accumulator over ``row`` keyed by the coordinates of output row ``inner``; ``Red2_r``:
    order-2 sparse accumulator over ``row`` keyed by the coordinate pairs of output rows
    ``inner0`` (outer) and ``inner``."""

    order: int
    row: str
    inner: str = ""
    outer: str = ""  # Red1 over held keys: the row whose stream is the accumulator's outer
    inner0: str = ""  # Red2: the outer of its two output rows
    nonempty: bool = False  # Red0 under rows whose fibres may be empty (its own never are)

    @property
    def name(self) -> str:
        return f"Red{self.order}_{self.row}"


@dataclass
class FusionTable:
    output: FusedOutput
    rows: list[str]  # fused order restricted to the output, then "val"
    columns: list[str]
    views: dict[str, View]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)  # (row, col) -> cell
    joins: dict[str, Join] = field(default_factory=dict)  # row -> merge cell
    named: dict[str, VNamed] = field(default_factory=dict)  # intermediate columns
    reducers: list[Reducer] = field(default_factory=list)  # applied inner to outer
    crd_source: dict[str, str] = field(default_factory=dict)  # output index -> row or reducer
    full: dict[str, bool] = field(default_factory=dict)  # row -> crd stream enumerates the dim
    hold: list[str] = field(default_factory=list)  # keyed reduction: output row, reduced rows
    children: dict[str, FusionTable] = field(default_factory=dict)  # factored intermediates
    out_fmt: TensorFormat | None = None
    # nested factored iteration (see :class:`Nest`): rows iterated by the enclosing tables (a
    # prefix of ``rows``) and, of those, the output indices whose coordinates they produce
    ext: tuple[str, ...] = ()
    driven: frozenset[str] = frozenset()
    nested: dict[str, Nest] = field(default_factory=dict)  # children lowered nested
    drivers: dict[str, str | Join] = field(default_factory=dict)  # driven row -> operand levels
    driven_full: dict[str, bool] = field(default_factory=dict)  # driven row -> drivers dense
    # row -> views whose reference at the row above may be N (a union member there): a dense
    # level under such a parent cannot be located (an intersection would drop the coordinate)
    n_parents: dict[str, frozenset[str]] = field(default_factory=dict)

    def row_source(self, row: str) -> str:
        """The column whose coordinate stream at ``row`` is the row's coordinates."""
        if row in self.joins:
            return self.joins[row].members()[0]
        for c in self.columns:
            cell = self.cells.get((row, c))
            if cell is not None and cell.kind in (CellKind.SCAN, CellKind.CHILD):
                return c
        raise AssertionError(row)

    def compute_text(self, e: VExpr) -> str:
        if isinstance(e, VBin) and iteration_only(e.rhs, self.views):  # densified: 0 there
            return self.compute_text(e.lhs)
        if isinstance(e, VAccess):
            return f"<{e.view}_val>"
        if isinstance(e, VNamed):
            return f"<{e.tensor}_val>"
        if isinstance(e, VUn):
            return unary_text(e.op, self.compute_text(e.arg), e.scalar, e.index)
        return binop_text(e.op, self.compute_text(e.lhs), self.compute_text(e.rhs), mul="×")

    def render(self) -> str:
        """The table as text, like the paper's figures (merge cells on their own line); the
        tables of factored intermediates come first."""
        parts = [f"{c.render()}\n" for c in self.children.values()]
        return "".join(parts) + self._render_own()

    def _render_own(self) -> str:
        head = ["", *[self._col_title(c) for c in self.columns]]
        body: list[list[str]] = []
        for r in self.rows:
            body.append([r, *[str(self.cells[(r, c)]) if (r, c) in self.cells else "" for c in self.columns]])
            if r in self.joins:
                located = frozenset(c for c in self.columns
                                    if self.cells.get((r, c), _NOTHING).kind is CellKind.LOCATE)
                body.append(["", self.joins[r].render(r, located)])
        widths = [max(len(x[i]) for x in [head, *body] if i < len(x)) for i in range(len(head))]
        lines = [" | ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
        lines.append("-+-".join("-" * w for w in widths))
        for row in body:
            if len(row) == 2 and row[0] == "":
                lines.append(" " * widths[0] + " | " + row[1])
            else:
                lines.append(" | ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip())
        sign = "Σ" if self.output.reduce is Op.ADD else self.output.reduce.value
        for red in self.reducers:
            what = self.compute_text(self.output.body) if red is self.reducers[0] else \
                f"{self.reducers[self.reducers.index(red) - 1].name}[val]"
            if red.order == 0:
                lines.append(f"{red.name}[val] = {sign}_{red.row} {what}")
            elif red.order == 2:
                lines.append(f"{red.name}[crd0, crd1, val] = {sign}_{red.row} {what}  keyed by the "
                             f"({red.inner0}, {red.inner}) coordinates")
            elif red.outer:
                lines.append(f"{red.name}[crd, val] = {sign} over each {red.outer} fiber of {what}  "
                             f"keyed by the {red.inner} coordinate held over "
                             f"{', '.join(self.hold[1:])}")
            else:
                lines.append(f"{red.name}[crd, val] = {sign}_{red.row} {what}  keyed by the "
                             f"{red.inner} coordinates")
        if self.nested:
            lines.append(self.render_nest())
        return "\n".join(lines)

    def _col_title(self, c: str) -> str:
        if c in self.views:
            return str(self.views[c])
        if c in self.named:
            n = self.named[c]
            return f"{n.tensor}_{{{','.join(n.indices)}}}"
        if c in self.children:
            o = self.children[c].output
            return f"{o.tensor}_{{{','.join(o.indices)}}}"
        return f"{c}_{{{','.join(self.output.indices)}}}"

    def recomputed(self) -> dict[str, list[str]]:
        """Nested children recomputed for each coordinate of rows of this table that are not
        their own indices (rows this table itself is only nested under do not count): child ->
        those rows."""
        out = {}
        outer = set(self.ext) - self.driven
        for name, n in self.nested.items():
            rows = [r for r in n.rows if r not in n.driven and r not in outer]
            if rows:
                out[name] = rows
        return out

    def render_nest(self) -> str:
        """One line per nested child: the rows it is nested under, the ones it is recomputed
        for, and the operand levels the enclosing joiners merge for it at its driven rows."""
        lines = []
        again = self.recomputed()
        for name, n in self.nested.items():
            ct = self.children[name]
            per = f" (recomputed per {', '.join(again[name])})" if name in again else ""
            drv = "; ".join(f"{r} driven through {_tree_text(ct.drivers[r], r)}"
                            for r in n.rows if r in n.driven)
            lines.append(f"{name} nested under {' -> '.join(n.rows)}{per}: {drv}")
        return "\n".join(lines)


def _tree_text(tree: str | Join, row: str) -> str:
    return tree.render(row) if isinstance(tree, Join) else tree


