"""Cross-expression fusion (the ``fuse`` pass, docs/compiler.md): fresh reduction indices, producer inlining, tensor
views, the partial order graph (POG), cycle resolution by permuted copies and dataflow orders.

The default lowering joins operands level by level over one iteration space per output, so a
fused expression must be a *sum of products*: a reduction may sit under a product (it is pulled
out, ``(Σ_k P)·Q = Σ_k P·Q``) but not under an addition.  A statement whose reduction sits under
an addition is therefore split into a temporary, and (``split_adds``) a producer with a
reduction read under an addition is materialised, which starts a new graph.  Factored iteration
(:func:`fuseflow.compiler.table.build_table` with ``factored``) keeps such producers as their
own pipelines inside one graph instead, nested under (and recomputed for) outer rows of the
consumer where their indices do not lead its order (see docs/compiler.md).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import networkx as nx

from ..ir.tensor import Format, TensorFormat
from .coo import coo_origin, lift_coo
from .densify import densify_statement, is_iteration_tensor
from .program import (
    RESERVED_PREFIX,
    Access,
    BinOp,
    FusionError,
    IExpr,
    Op,
    Program,
    ProgramError,
    Rejected,
    Statement,
    Sum,
    Unary,
    UnOp,
    VectorLayout,
    accesses,
    binop_text,
    split_order,
    unary_text,
)

__all__ = [
    "MAX_ORDERS",
    "FusedOutput",
    "Fusion",
    "FusionError",
    "Group",
    "PermutedCopy",
    "VAccess",
    "VBin",
    "VExpr",
    "VNamed",
    "VUn",
    "View",
    "accumulator_order",
    "fuse",
    "order_lowerable",
    "order_problem",
    "plan_regions",
]

MAX_ORDERS = 2000  # cap on enumerated dataflow orders per group


# ----------------------------------------------------------------------------- fused expressions
@dataclass(frozen=True)
class View:
    """One use of a tensor: the index per mode and the storage format it is read in."""

    name: str  # column name: tensor name, primes for further views
    tensor: str  # tensor actually scanned (a permuted copy's name if permuted)
    source: str  # tensor as written in the program
    indices: tuple[str, ...]
    shape: tuple[int, ...]
    fmt: TensorFormat
    vector: VectorLayout | None = None  # blocked: every value is a vector (the block pass)

    def level_indices(self) -> tuple[str, ...]:
        return tuple(self.indices[m] for m in self.fmt.mode_order)

    def __str__(self) -> str:
        return f"{self.name}_{{{','.join(self.indices)}}}" if self.indices else self.name


@dataclass(frozen=True)
class VAccess:
    view: str


@dataclass(frozen=True)
class VUn:
    """An elementwise function of a value (one unary ALU node)."""

    op: UnOp
    arg: VExpr
    scalar: int | float = 0
    index: str = ""  # row functions (softmax, layernorm): the index they run along


@dataclass(frozen=True)
class VBin:
    op: Op
    lhs: VExpr
    rhs: VExpr


@dataclass(frozen=True)
class VNamed:
    """The inlined body of an intermediate tensor (a fusion-table column)."""

    tensor: str
    indices: tuple[str, ...]
    body: VExpr


VExpr = VAccess | VBin | VNamed | VUn


@dataclass(frozen=True)
class FusedOutput:
    tensor: str
    indices: tuple[str, ...]
    reduced: tuple[str, ...]
    body: VExpr
    fmt: TensorFormat | None  # declared format (None: compiler's choice)
    shape: tuple[int, ...]
    reduce: Op = Op.ADD  # how ``reduced`` is reduced (MAX / MIN: a statement of its own)
    vector: VectorLayout | None = None  # blocked: its values are vectors (the block pass)


@dataclass(frozen=True)
class PermutedCopy:
    """A permuted copy (higher-order transpose) of ``source`` stored as ``name`` in ``fmt``."""

    name: str
    source: str
    fmt: TensorFormat
    reason: str


@dataclass
class Group:
    """The statements lowered to one SAMML graph, with their fused form and POG."""

    name: str
    statements: list[Statement]
    outputs: list[FusedOutput]
    views: dict[str, View]
    pog: nx.DiGraph
    order: tuple[str, ...] = ()
    orders_count: int = 0
    lowerable_count: int = 0
    orders_capped: bool = False
    lowerable_orders: list[tuple[str, ...]] = field(default_factory=list)  # the first MAX_KEPT
    permuted: list[PermutedCopy] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)  # fresh index -> what the user wrote
    # outputs and inlined intermediates whose coordinates a softmax reads (it normalises over the
    # visited ones): each must store exactly the coordinates some term of it reaches
    exact: frozenset[str] = frozenset()

    def where(self, indices: Sequence[str]) -> str:
        """'; u0 is index k of 'T = ...'' for the fresh indices among ``indices``."""
        seen = [i for i in dict.fromkeys(indices) if i in self.origins]
        return "".join(f"; {i} is {self.origins[i]}" for i in seen)

    def fused_einsum(self) -> str:
        """One line per output; each reduction is shown at the intermediate it belongs to."""
        lines = []
        for o in self.outputs:
            inner = _named_locals(o.body, self.views)
            top = [r for r in o.reduced if r not in inner]
            red = f"Σ_{{{','.join(top)}}} " if top else ""
            if top and o.reduce is not Op.ADD:
                red = f"{o.reduce.value}_{{{','.join(top)}}} "
            lines.append(f"{o.tensor}_{{{','.join(o.indices)}}} = {red}{render_vexpr(o.body, self.views)}")
        return "\n".join(lines)

    def pog_text(self) -> str:
        lines = [f"nodes: {' '.join(self.pog.nodes)}"]
        for a, b, d in self.pog.edges(data=True):
            lines.append(f"{a} -> {b}   [{'; '.join(d['reasons'])}]")
        return "\n".join(lines)


def _vindices(e: VExpr, views: Mapping[str, View]) -> set[str]:
    if isinstance(e, VAccess):
        return set(views[e.view].indices)
    if isinstance(e, VBin):
        return _vindices(e.lhs, views) | _vindices(e.rhs, views)
    if isinstance(e, VNamed):
        return _vindices(e.body, views)
    if isinstance(e, VUn):
        return _vindices(e.arg, views)
    return set()


def _local(e: VNamed, views: Mapping[str, View]) -> list[str]:
    """Indices summed inside intermediate ``e`` (not inside an intermediate nested in it)."""
    nested = _named_locals(e.body, views)
    return sorted(_vindices(e.body, views) - set(e.indices) - nested, key=lambda u: (len(u), u))


def _named_locals(e: VExpr, views: Mapping[str, View]) -> set[str]:
    if isinstance(e, VBin):
        return _named_locals(e.lhs, views) | _named_locals(e.rhs, views)
    if isinstance(e, VNamed):
        return set(_local(e, views)) | _named_locals(e.body, views)
    if isinstance(e, VUn):
        return _named_locals(e.arg, views)
    return set()


def render_vexpr(e: VExpr, views: Mapping[str, View]) -> str:
    if isinstance(e, VAccess):
        return str(views[e.view])
    if isinstance(e, VUn):
        return unary_text(e.op, render_vexpr(e.arg, views), e.scalar, e.index)
    if isinstance(e, VNamed):
        local = _local(e, views)
        red = f"Σ_{{{','.join(local)}}} " if local else ""
        return f"[{e.tensor}_{{{','.join(e.indices)}}} = {red}{render_vexpr(e.body, views)}]"
    lhs, rhs = render_vexpr(e.lhs, views), render_vexpr(e.rhs, views)
    if e.op is Op.MUL:
        return f"{lhs} · {rhs}"
    return binop_text(e.op, lhs, rhs)


# ----------------------------------------------------------------------------- statement rewriting
# "Under an addition" below also covers nonlinear elementwise functions (relu, exp, a scalar
# shift, ...): like a sum, they cannot be pulled through a reduction.
# A max / min reduction commutes with nothing: it is hoisted from under any operation, and a
# sum inside it too (each becomes a statement of its own; see plan_groups).
def _sum_under_add(e: IExpr, under_add: bool = False, under_any: bool = False) -> bool:
    if isinstance(e, Sum):
        if e.op is not Op.ADD:
            return under_any or _sum_under_add(e.body, True, True)
        return under_add or _sum_under_add(e.body, False, True)
    if isinstance(e, BinOp):
        add = e.op is not Op.MUL
        return (_sum_under_add(e.lhs, under_add or add, True)
                or _sum_under_add(e.rhs, under_add or add, True))
    if isinstance(e, Unary):
        return _sum_under_add(e.arg, under_add or not e.op.linear, True)
    return False


def _max_reduction(e: IExpr) -> bool:
    """``e`` has a max / min reduction."""
    if isinstance(e, Sum):
        return e.op is not Op.ADD or _max_reduction(e.body)
    if isinstance(e, BinOp):
        return _max_reduction(e.lhs) or _max_reduction(e.rhs)
    if isinstance(e, Unary):
        return _max_reduction(e.arg)
    return False


def _hoist(stmt: Statement, extra: list[tuple[str, tuple[str, ...], IExpr]]) -> IExpr:
    """Replace every reduction under an addition by an access to a new temporary tensor."""
    counter = itertools.count()

    def walk(e: IExpr, under_add: bool, under_any: bool = False) -> IExpr:
        if isinstance(e, Sum):
            if under_any if e.op is not Op.ADD else under_add:
                free = [i for i in _free_ordered(e.body) if i not in e.indices]
                name = f"{stmt.out}_t{next(counter)}"
                # a hoisted max / min reduction is hoisted from in turn (its own statement)
                extra.append((name, tuple(free), walk(e, False) if _max_reduction(e) else e))
                return Access(name, tuple(free))
            inner = e.op is not Op.ADD
            return Sum(e.indices, walk(e.body, inner, True), e.op)
        if isinstance(e, BinOp):
            add = under_add or e.op is not Op.MUL
            return BinOp(e.op, walk(e.lhs, add, True), walk(e.rhs, add, True))
        if isinstance(e, Unary):
            return Unary(e.op, walk(e.arg, under_add or not e.op.linear, True), e.scalar, e.index)
        return e

    return walk(stmt.rhs, False)


def _hoist_rows(out: str, rhs: IExpr, extra: list[tuple[str, tuple[str, ...], IExpr]]) -> IExpr:
    """Replace every row function (softmax, layernorm) that is not the whole right-hand side by
    an access to a new temporary: a row function is computed by a pipeline of its own, whose
    rows end with the index it runs along (its values cannot be recomputed inside another
    iteration)."""
    counter = itertools.count()

    def walk(e: IExpr, top: bool) -> IExpr:
        if isinstance(e, Unary):
            arg = walk(e.arg, False)
            if e.op.row and not top:
                free = [i for i in _free_ordered(arg) if i != e.index] + [e.index]
                name = f"{out}_r{next(counter)}"
                extra.append((name, tuple(free), Unary(e.op, arg, e.scalar, e.index)))
                return Access(name, tuple(free))
            return Unary(e.op, arg, e.scalar, e.index)
        if isinstance(e, BinOp):
            return BinOp(e.op, walk(e.lhs, False), walk(e.rhs, False))
        if isinstance(e, Sum):
            return Sum(e.indices, walk(e.body, False), e.op)
        return e

    return walk(rhs, True)


def is_row_function(e: IExpr) -> bool:
    """Whether the whole of ``e`` is a row function (softmax, layernorm)."""
    return isinstance(e, Unary) and e.op.row


def _free_ordered(e: IExpr) -> list[str]:
    if isinstance(e, Access):
        return list(e.indices)
    if isinstance(e, BinOp):
        return list(dict.fromkeys(_free_ordered(e.lhs) + _free_ordered(e.rhs)))
    if isinstance(e, Sum):
        return [i for i in _free_ordered(e.body) if i not in e.indices]
    if isinstance(e, Unary):
        return _free_ordered(e.arg)
    return []


@dataclass
class _Stmt:
    """A statement after hoisting: ``out[indices] = rhs``; ``shape`` of the result."""

    out: str
    indices: tuple[str, ...]
    rhs: IExpr
    text: str
    order: tuple[str, ...]
    shape: tuple[int, ...]
    fmt: TensorFormat | None
    source: Statement


def _index_sizes(e: IExpr, shapes: Mapping[str, tuple[int, ...]], out: dict[str, int]) -> None:
    if isinstance(e, Access):
        for i, n in zip(e.indices, shapes[e.tensor]):
            out[i] = n
    elif isinstance(e, BinOp):
        _index_sizes(e.lhs, shapes, out)
        _index_sizes(e.rhs, shapes, out)
    elif isinstance(e, Sum):
        _index_sizes(e.body, shapes, out)
    elif isinstance(e, Unary):
        _index_sizes(e.arg, shapes, out)


def _temp_shapes(program: Program) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for s in _rewrite(program, program.statements, {}):
        out[s.out] = s.shape
    return out


def _rewrite(program: Program, stmts: Sequence[Statement],
             orders: Mapping[str, tuple[str, ...]]) -> list[_Stmt]:
    shapes = {n: d.shape for n, d in program.decls.items()}
    out: list[_Stmt] = []
    read = _visits_read(program)
    for s in stmts:
        orig = s
        extra: list[tuple[str, tuple[str, ...], IExpr]] = []
        sizes: dict[str, int] = {}
        _index_sizes(s.rhs, shapes, sizes)
        dense_rhs = densify_statement(program, s.rhs, s.indices, program.decls[s.out].fmt, sizes,
                                      orders.get(s.out, s.order), s.out in read)
        # COO operands: duplicates summed (.coo), or read from a DCSR copy (coo_copies)
        dense_rhs = lift_coo(program, dense_rhs, coo_copies(program))
        if dense_rhs != s.rhs:
            shapes.update({n: (int(n[len(RESERVED_PREFIX):]),) for n in _tensors_in(dense_rhs)
                           if is_iteration_tensor(n)})
            s = replace(s, rhs=dense_rhs)
        hoisted: list[tuple[str, tuple[str, ...], IExpr]] = []
        rhs = _hoist(s, hoisted) if _sum_under_add(s.rhs) else s.rhs
        for name, free, e in hoisted:  # row functions inside a hoisted reduction come first
            extra.append((name, free, _hoist_rows(name, e, extra)))
        rhs = _hoist_rows(s.out, rhs, extra)
        order = orders.get(s.out, s.order)
        for name, free, e in extra:
            _index_sizes(e, shapes, sizes)
            shape = tuple(sizes[i] for i in free)
            shapes[name] = shape
            # the statement's dataflow order, on the indices the temporary keeps
            own = set(free) | set(_all_sums(e))
            out.append(_Stmt(name, free, e, f"{name} = {e}  (split from '{s.text}')",
                             tuple(i for i in order if i in own), shape, None, orig))
        if extra:
            order = tuple(i for i in order if i in set(_free_ordered(rhs)) | set(_all_sums(rhs)))
        out.append(_Stmt(s.out, s.indices, rhs, s.text, order, program.decls[s.out].shape,
                         program.decls[s.out].fmt, orig))
    return out


def _tensors_in(e: IExpr) -> set[str]:
    return {t for t, _ in _accesses_under_add(e)}


# ----------------------------------------------------------------------------- normal form
def _accesses_under_add(e: IExpr, under: bool = False) -> list[tuple[str, bool]]:
    if isinstance(e, Access):
        return [(e.tensor, under)]
    if isinstance(e, BinOp):
        add = under or e.op is not Op.MUL
        return _accesses_under_add(e.lhs, add) + _accesses_under_add(e.rhs, add)
    if isinstance(e, Sum):
        return _accesses_under_add(e.body, under)
    if isinstance(e, Unary):
        return _accesses_under_add(e.arg, under or not e.op.linear)
    return []


# ----------------------------------------------------------------------------- grouping
class Fusion(enum.Enum):
    """How statements are grouped into graphs: one per statement, one per fusion region, one
    per program (each further split where :func:`plan_groups` must)."""

    UNFUSED = "unfused"
    PARTIAL = "partial"
    FULL = "full"


def plan_regions(program: Program, fusion: Fusion) -> list[list[int]]:
    """Statement indices of each fusion region, in program order."""
    n = len(program.statements)
    if fusion is Fusion.UNFUSED:
        return [[i] for i in range(n)]
    if fusion is Fusion.FULL:
        return [list(range(n))] if n else []
    regions: list[list[int]] = []
    member = {i: r for r in program.regions for i in r}
    seen: set[tuple[int, ...]] = set()
    for i in range(n):
        r = member.get(i, (i,))
        if r not in seen:
            seen.add(r)
            regions.append(list(r))
    return regions


@dataclass
class GroupPlan:
    """Statements of one graph and the ones among them whose results are materialised."""

    name: str
    part: list[_Stmt]
    outs: list[_Stmt]
    note: str = ""


def plan_groups(program: Program, fusion: Fusion = Fusion.FULL,
                orders: Mapping[str, str | Sequence[str]] | None = None,
                split_adds: bool = True) -> list[GroupPlan]:
    """Split each fusion region into groups (one graph each), in program order.  With
    ``split_adds`` a region is split where a reduced intermediate is read under an addition
    (needed by the single-iteration-space lowering, not by factored iteration)."""
    if not program.statements:
        raise ProgramError(f"program {program.name!r} has no statements")
    order_map = _parse_orders(program, orders or {})
    results = set(program.result_names())
    plans: list[GroupPlan] = []
    for r, region in enumerate(plan_regions(program, fusion)):
        stmts = _rewrite(program, [program.statements[i] for i in region], order_map)
        region_outs = {s.out for s in stmts if s.out in results or _read_outside(program, s.out, region)}
        parts: list[list[_Stmt]] = [[]]
        notes = [""]
        reduced_in_part: dict[str, bool] = {}
        rows_in_part: set[str] = set()
        for s in stmts:
            # a row function's result read in the same part needs a pipeline of its own; where
            # the analysis found none, the previous graph materialises it
            alone = _max_reduction(s.rhs) or (parts[-1] and _max_reduction(parts[-1][-1].rhs))
            if parts[-1] and (alone or split_adds and any(
                    (reduced_in_part.get(t, False) and under) or t in rows_in_part
                    for t, under in _accesses_under_add(s.rhs))):
                parts.append([])
                notes.append(_MAX_NOTE if alone else _SPLIT_NOTE)
                reduced_in_part = {}
                rows_in_part = set()
            parts[-1].append(s)
            reduced_in_part[s.out] = bool(_normal_named(_inline_preview(s, parts[-1]))[0])
            if is_row_function(s.rhs):
                rows_in_part.add(s.out)
        for p, part in enumerate(parts):
            later = [t for q in parts[p + 1:] for t in q]
            outs = [s for s in part if s.out in region_outs
                    or any(s.out in _reads(t.rhs) for t in later)]
            name = f"{program.name}_g{len(plans)}"
            plans.append(GroupPlan(name, part, outs, notes[p]))
    return plans


_SPLIT_NOTE = ("region split here: a reduced intermediate is read under an addition, so the "
               "previous graph materialises it")
_MAX_NOTE = ("region split here: a max / min reduction is not fused with other statements (it "
             "commutes with no other operation), so it has a graph of its own")


def _parse_orders(program: Program, orders: Mapping[str, str | Sequence[str]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, order in orders.items():
        st = program.producer(name)
        if st is None:
            raise ProgramError(f"--order {name}=...: no statement computes tensor {name!r}; "
                               f"computed tensors: {[s.out for s in program.statements]}")
        raw = split_order(order)
        for c in raw:
            if c not in st.letters:
                raise ProgramError(f"order {''.join(raw)!r} for statement '{st.text}': unknown index "
                                   f"{c!r}; the statement's indices are {sorted(st.letters)}")
        if len(set(raw)) != len(raw):
            dup = next(c for c in raw if raw.count(c) > 1)
            raise ProgramError(f"order {''.join(raw)!r} for statement '{st.text}' repeats index {dup!r}")
        out[name] = tuple(st.letters[c] for c in raw)
    return out


def _read_outside(program: Program, tensor: str, region: Sequence[int]) -> bool:
    return any(tensor in s.reads() for s in program.statements if s.index not in region)


def _reads(e: IExpr) -> set[str]:
    return {t for t, _ in _accesses_under_add(e)}


def _inline_preview(s: _Stmt, part: list[_Stmt]) -> IExpr:
    producers = {p.out: p for p in part if p is not s}
    return _substitute(s.rhs, producers, itertools.count(), {}, None)


def _substitute(e: IExpr, producers: Mapping[str, _Stmt], fresh: itertools.count,
                rename: Mapping[str, str], orders: list | None,
                origins: dict[str, str] | None = None, copies: dict[str, int] | None = None) -> IExpr:
    """Rename indices and inline in-group producers (their reductions get fresh names).  A
    producer inlined more than once into one output (a residual ``T`` added to a chain that
    also reads ``T``) is recomputed per use; each further copy is named ``T~2``, ``T~3``, ...
    (``copies`` counts them), so that factored iteration can give each its own pipeline."""
    copies = {} if copies is None else copies

    def sub_e(x: IExpr, ren: Mapping[str, str]) -> IExpr:
        return _substitute(x, producers, fresh, ren, orders, origins, copies)

    if isinstance(e, Access):
        idx = tuple(rename.get(i, i) for i in e.indices)
        p = producers.get(e.tensor)
        if p is None:
            return Access(e.tensor, idx)
        sub = dict(zip(p.indices, idx))
        for r in _all_sums(p.rhs):
            sub[r] = f"_f{next(fresh)}"
            if origins is not None:
                origins[sub[r]] = coo_origin(r, p.text) or f"index {r} of '{p.text}'"
        copies[e.tensor] = copies.get(e.tensor, 0) + 1
        name = e.tensor if copies[e.tensor] == 1 else f"{e.tensor}~{copies[e.tensor]}"
        body = sub_e(p.rhs, sub)
        if orders is not None and p.order:
            orders.append((p.text, tuple(sub.get(i, i) for i in p.order)))
        return _Named(name, idx, body)
    if isinstance(e, BinOp):
        return BinOp(e.op, sub_e(e.lhs, rename), sub_e(e.rhs, rename))
    if isinstance(e, Sum):
        return Sum(tuple(rename.get(i, i) for i in e.indices), sub_e(e.body, rename), e.op)
    if isinstance(e, Unary):
        return Unary(e.op, sub_e(e.arg, rename), e.scalar, rename.get(e.index, e.index))
    return e


@dataclass(frozen=True)
class _Named:
    """Marks an inlined producer inside the index-level IR (becomes :class:`VNamed`)."""

    tensor: str
    indices: tuple[str, ...]
    body: IExpr


def _indices_in_order(e) -> list[str]:
    if isinstance(e, Access):
        return list(e.indices)
    if isinstance(e, BinOp):
        return _indices_in_order(e.lhs) + _indices_in_order(e.rhs)
    if isinstance(e, (Sum, _Named)):
        return _indices_in_order(e.body)
    if isinstance(e, Unary):
        return _indices_in_order(e.arg)
    return []


def _rename(e, m: Mapping[str, str]):
    if isinstance(e, Access):
        return Access(e.tensor, tuple(m.get(i, i) for i in e.indices))
    if isinstance(e, BinOp):
        return BinOp(e.op, _rename(e.lhs, m), _rename(e.rhs, m))
    if isinstance(e, Sum):
        return Sum(tuple(m.get(i, i) for i in e.indices), _rename(e.body, m), e.op)
    if isinstance(e, _Named):
        return _Named(e.tensor, tuple(m.get(i, i) for i in e.indices), _rename(e.body, m))
    if isinstance(e, Unary):
        return Unary(e.op, _rename(e.arg, m), e.scalar, m.get(e.index, e.index))
    return e


def _all_sums(e: IExpr) -> list[str]:
    if isinstance(e, Sum):
        return list(e.indices) + _all_sums(e.body)
    if isinstance(e, BinOp):
        return _all_sums(e.lhs) + _all_sums(e.rhs)
    if isinstance(e, _Named):
        return _all_sums(e.body)
    if isinstance(e, Unary):
        return _all_sums(e.arg)
    return []


def _normal_named(e) -> tuple[tuple[str, ...], object]:
    if isinstance(e, _Named):
        red, body = _normal_named(e.body)
        return red, _Named(e.tensor, e.indices, body)
    if isinstance(e, Sum):
        red, body = _normal_named(e.body)
        return tuple(e.indices) + red, body
    if isinstance(e, BinOp):
        rl, bl = _normal_named(e.lhs)
        rr, br = _normal_named(e.rhs)
        return rl + rr, BinOp(e.op, bl, br)
    if isinstance(e, Unary):  # a sum directly under a nonlinear function was hoisted before
        red, body = _normal_named(e.arg)
        return red, Unary(e.op, body, e.scalar, e.index)
    return (), e


def coo_copies(program: Program) -> dict[str, TensorFormat]:
    """COO inputs read from a DCSR copy (same mode order, duplicates summed; made by the runner
    on the host, as permuted copies are) instead of through their non-unique level: those read
    in some statement next to another operand with the index of that level that does not store
    it in a dense level under dense levels only (a non-unique level may only meet located dense
    levels: its coordinates repeat, and a merge needs them strictly increasing), including a
    second read of the same tensor."""
    out: dict[str, TensorFormat] = {}
    for st in program.statements:
        acc = [a for a in accesses(st.rhs) if not is_iteration_tensor(a.tensor)]
        for k, a in enumerate(acc):
            decl = program.decls.get(a.tensor)
            if decl is None or decl.fmt is None or not decl.fmt.coo or decl.vector is not None \
                    or a.tensor in out or program.producer(a.tensor) is not None:
                continue
            nu = a.indices[decl.fmt.mode_order[decl.fmt.levels.index(Format.COMPRESSED_NONUNIQUE)]]
            if any(nu in b.indices and not _dense_down_to(program, b, nu) for b in acc[:k] + acc[k + 1:]):
                out[a.tensor] = TensorFormat((Format.COMPRESSED,) * decl.fmt.order, decl.fmt.mode_order)
    return out


def _dense_down_to(program: Program, b: Access, index: str) -> bool:
    """``b``'s declared levels down to the one of ``index`` are all dense (it can be located)."""
    d = program.decls.get(b.tensor)
    if d is None or d.fmt is None:
        return False
    level = [b.indices[m] for m in d.fmt.mode_order].index(index)
    return all(f is Format.DENSE for f in d.fmt.levels[: level + 1])


def coo_copy_name(tensor: str) -> str:
    return f"{tensor}_dcsr"


# ----------------------------------------------------------------------------- one group
class _ViewMaker:
    """The tensor views of one group: one per tensor, indices and addition term."""

    def __init__(self, program: Program, group: str, formats: Mapping[str, TensorFormat],
                 shapes: Mapping[str, tuple[int, ...]]) -> None:
        self.program, self.group, self.formats, self.shapes = program, group, formats, shapes
        self.views: dict[str, View] = {}
        self.view_of: dict[tuple[str, tuple[str, ...], tuple[int, ...]], str] = {}
        self.copies = coo_copies(program)
        self.copied: dict[str, PermutedCopy] = {}

    def convert(self, x, term: tuple[int, ...] = ()) -> VExpr:
        """``term``: the path of addition operands leading here.  One access in several
        terms of a sum gets one view per term (its own scanner and reference), since a
        reference through one term's intersection is N where another term needs the value;
        inside one product a repeated access is one view."""
        if isinstance(x, Access):
            return self._access(x, term)
        if isinstance(x, Unary):
            return VUn(x.op, self.convert(x.arg, term), x.scalar, x.index)
        if isinstance(x, BinOp):
            if x.op.product:
                return VBin(x.op, self.convert(x.lhs, term), self.convert(x.rhs, term))
            return VBin(x.op, self.convert(x.lhs, (*term, 0)), self.convert(x.rhs, (*term, 1)))
        assert isinstance(x, _Named)
        return VNamed(x.tensor, x.indices, self.convert(x.body, term))

    def _access(self, x: Access, term: tuple[int, ...]) -> VAccess:
        key = (x.tensor, x.indices, term)
        if key not in self.view_of:
            n_prev = sum(1 for v in self.views.values() if v.source == x.tensor)
            vname = x.tensor + "'" * n_prev
            decl = self.program.decls.get(x.tensor)
            fmt = self.formats.get(x.tensor) or (decl.fmt if decl is not None else None)
            if is_iteration_tensor(x.tensor):  # densified iteration (.densify): one dense level
                fmt = TensorFormat((Format.DENSE,))
                self.shapes = {**self.shapes, x.tensor: (int(x.tensor[len(RESERVED_PREFIX):]),)}
            if fmt is None:
                raise ProgramError(f"group {self.group}: tensor {x.tensor!r} is read before its "
                                   "format is known (it must be produced by an earlier graph)")
            scanned = x.tensor
            if x.tensor in self.copies:  # a COO input read from its DCSR copy (coo_copies)
                fmt, scanned = self.copies[x.tensor], coo_copy_name(x.tensor)
                self.copied[x.tensor] = PermutedCopy(
                    scanned, x.tensor, fmt, f"COO tensor {x.tensor} meets operands that are not dense at "
                    "its indices (a non-unique level may only meet located dense levels): read from a "
                    "DCSR copy, duplicates summed")
            self.views[vname] = View(vname, scanned, x.tensor, x.indices, self.shapes[x.tensor], fmt,
                                     decl.vector if decl is not None else None)
            self.view_of[key] = vname
        return VAccess(self.view_of[key])


@dataclass
class _Fresh:
    """Fresh index names of one group and what the user wrote for each."""

    fresh: itertools.count = field(default_factory=itertools.count)
    numbers: itertools.count = field(default_factory=itertools.count)
    origins: dict[str, str] = field(default_factory=dict)
    user_orders: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def number(self, e, since: int):
        """Number the fresh indices of ``e`` ``u0, u1, ...`` in order of appearance (also in
        the user orders recorded since ``since``)."""
        numbering: dict[str, str] = {}
        for i in _indices_in_order(e):
            if i.startswith("_f") and i not in numbering:
                numbering[i] = f"u{next(self.numbers)}"
        self.user_orders[since:] = [(t, tuple(numbering.get(i, i) for i in od))
                                    for t, od in self.user_orders[since:]]
        for old, new in numbering.items():
            if old in self.origins:
                self.origins[new] = self.origins.pop(old)
        return _rename(e, numbering)


def _fuse_output(o: _Stmt, producers: Mapping[str, _Stmt], names: _Fresh,
                 views: _ViewMaker) -> FusedOutput:
    """One group output with its in-group producers inlined, in the fused index names."""
    rename = {r: f"_f{next(names.fresh)}" for r in _all_sums(o.rhs)}
    for r, u in rename.items():
        names.origins[u] = coo_origin(r, o.text) or f"index {r} of '{o.text}'"
    since = len(names.user_orders)
    if o.order:
        names.user_orders.append((o.text, tuple(rename.get(i, i) for i in o.order)))
    e = _substitute(o.rhs, producers, names.fresh, rename, names.user_orders, names.origins)
    red, body = _normal_named(names.number(e, since))
    red = tuple(sorted(dict.fromkeys(red), key=lambda u: int(u[1:])))
    reduce = o.rhs.op if isinstance(o.rhs, Sum) else Op.ADD
    decl = views.program.decls.get(o.out)
    return FusedOutput(o.out, o.indices, red, views.convert(body), o.fmt, o.shape, reduce,
                       decl.vector if decl is not None else None)


def fuse(program: Program, plan: GroupPlan, formats: Mapping[str, TensorFormat]) -> Group | Rejected:
    """Cross-expression fusion of one group, or why its ordering constraints cannot be met;
    ``formats`` gives the stored format of tensors materialised by earlier groups."""
    shapes = {n: d.shape for n, d in program.decls.items()} | _temp_shapes(program)
    views = _ViewMaker(program, plan.name, formats, shapes)
    names = _Fresh()
    # a group output read by another output of the same group is inlined there (recomputed)
    all_producers = {s.out: s for s in plan.part}
    fused = [_fuse_output(o, {k: v for k, v in all_producers.items() if k != o.out}, names, views)
             for o in plan.outs]
    g = Group(plan.name, list(dict.fromkeys(s.source for s in plan.part)), fused, views.views,
              nx.DiGraph())
    g.origins = names.origins
    g.exact = _exact_tensors(program, plan, fused)
    g.permuted += list(views.copied.values())
    if plan.note:
        g.notes.append(plan.note)
    why = _build_pog(g, names.user_orders) or _choose_order(g)
    return Rejected(why, FusionError) if why else g


def _exact_tensors(program: Program, plan: GroupPlan, fused: list[FusedOutput]) -> frozenset[str]:
    """The group's outputs and inlined intermediates whose visited coordinates a softmax reads
    (:attr:`Group.exact`): a reduction there must emit only the coordinates some term reaches
    (docs/compiler.md, softmax over the visited coordinates), not one per empty fibre."""
    read = _visits_read(program)
    out = {o.out for o in plan.outs if o.out in read or (
        o.out != o.source.out and (o.source.out in read or _softmax_in(o.source.rhs)))}
    for o in fused:
        _exact_named(o.body, o.tensor in out, out)
    return frozenset(out)


def _visits_read(program: Program) -> set[str]:
    """Computed tensors whose visited coordinates reach a softmax: read inside its operand, or
    by a statement computing such a tensor (products, sums and reductions pass visited
    coordinates on; layernorm visits every coordinate)."""
    out: set[str] = set()

    def walk(e: IExpr, under: bool) -> None:
        if isinstance(e, Access):
            if under and program.producer(e.tensor) is not None:
                out.add(e.tensor)
        elif isinstance(e, Unary):
            walk(e.arg, e.op is UnOp.SOFTMAX or (under and e.op is not UnOp.LAYERNORM))
        elif isinstance(e, BinOp):
            walk(e.lhs, under)
            walk(e.rhs, under)
        elif isinstance(e, Sum):
            walk(e.body, under)

    for st in reversed(program.statements):
        walk(st.rhs, st.out in out)
    return out


def _softmax_in(e: IExpr) -> bool:
    if isinstance(e, Unary):
        return e.op is UnOp.SOFTMAX or _softmax_in(e.arg)
    if isinstance(e, BinOp):
        return _softmax_in(e.lhs) or _softmax_in(e.rhs)
    return isinstance(e, Sum) and _softmax_in(e.body)


def _exact_named(e: VExpr, under: bool, out: set[str]) -> None:
    if isinstance(e, VNamed):
        if under:
            out.add(e.tensor)
        _exact_named(e.body, under, out)
    elif isinstance(e, VUn):
        _exact_named(e.arg, e.op is UnOp.SOFTMAX or (under and e.op is not UnOp.LAYERNORM), out)
    elif isinstance(e, VBin):
        _exact_named(e.lhs, under, out)
        _exact_named(e.rhs, under, out)


def fuse_group(program: Program, plan: GroupPlan, formats: Mapping[str, TensorFormat]) -> Group:
    """:func:`fuse`, raising :class:`FusionError` when the group cannot be fused."""
    g = fuse(program, plan, formats)
    if isinstance(g, Rejected):
        raise g.exception()
    return g


def _add_edge(pog: nx.DiGraph, a: str, b: str, reason: str) -> None:
    if pog.has_edge(a, b):
        if reason not in pog[a][b]["reasons"]:
            pog[a][b]["reasons"].append(reason)
    else:
        pog.add_edge(a, b, reasons=[reason])


def _view_edges(v: View) -> list[tuple[str, str]]:
    li = v.level_indices()
    return list(itertools.pairwise(li))


def _build_pog(g: Group, user_orders: list[tuple[str, tuple[str, ...]]]) -> str | None:
    """The partial order graph of ``g``'s indices; None, or why its cycles cannot be broken."""
    pog = g.pog
    pog.add_nodes_from(i for o in g.outputs for i in o.indices)
    pog.add_nodes_from(i for v in g.views.values() for i in v.indices)
    pog.add_nodes_from(r for o in g.outputs for r in o.reduced)
    for v in g.views.values():
        for a, b in _view_edges(v):
            _add_edge(pog, a, b, f"mode order of {v}")
    for o in g.outputs:
        _output_edges(pog, o)
    for text, order in user_orders:
        for a, b in itertools.pairwise(order):
            _add_edge(pog, a, b, f"dataflow order of '{text}'")
    edges, why = _coo_edges([(o.tensor, o.body) for o in g.outputs], g.views)
    if why:
        return f"group {g.name}: {why}"
    for a, b, reason in edges:
        _add_edge(pog, a, b, reason)
    return _resolve_cycles(g)


def _output_edges(pog: nx.DiGraph, o: FusedOutput) -> None:
    """The ordering constraints an output adds: its declared mode order, the vectors of a
    block stored innermost (the block pass), and each row function's index innermost among
    the indices of the tensor it computes."""
    if o.vector is not None and o.vector.split > 1:
        for a in o.indices[:-1]:
            _add_edge(pog, a, o.indices[-1], f"vectors of a block of {o.tensor} stored innermost")
    if o.fmt is not None:
        li = tuple(o.indices[m] for m in o.fmt.mode_order)
        for a, b in itertools.pairwise(li):
            _add_edge(pog, a, b, f"mode order of output {o.tensor}_{{{','.join(o.indices)}}}")
    for tensor, indices, fn in _row_functions(o.tensor, o.indices, o.body):
        for a in indices:
            if a != fn.index:
                _add_edge(pog, a, fn.index, f"{fn.op.value} of {tensor} runs along {fn.index}")


def _pairs(e: VExpr, views: Mapping[str, View], out: list[tuple[str, str]]) -> None:
    """(COO view, its duplicate-summing index) for every lifted access under ``e``."""
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


def _coo_edges(bodies: list[tuple[str, VExpr]], views: Mapping[str, View]
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


def _row_functions(tensor: str, indices: tuple[str, ...], body: VExpr
                   ) -> list[tuple[str, tuple[str, ...], VUn]]:
    """The row functions of an output (its whole body) and of the intermediates inlined in it:
    (tensor, its indices, the function); each must see its index innermost."""
    out = [(tensor, indices, body)] if isinstance(body, VUn) and body.op.row else []

    def walk(e: VExpr) -> None:
        if isinstance(e, VNamed):
            if isinstance(e.body, VUn) and e.body.op.row:
                out.append((e.tensor, e.indices, e.body))
            walk(e.body)
        elif isinstance(e, VUn):
            walk(e.arg)
        elif isinstance(e, VBin):
            walk(e.lhs)
            walk(e.rhs)

    walk(body)
    return out


def _first_cycle(pog: nx.DiGraph) -> list[tuple[str, str]]:
    """The edges of a cycle of ``pog`` ([] when it has none)."""
    if nx.is_directed_acyclic_graph(pog):
        return []
    return [(a, b) for a, b, *_ in nx.find_cycle(pog)]


def _permutable(v: View) -> bool:
    """A view that can be read from a permuted copy: a stored tensor of order >= 2 (an input or
    a tensor an earlier graph writes), not read from a permuted copy already, not COO (the
    ordering constraints of its duplicate-summing index follow its stored mode order)."""
    return (len(v.indices) > 1 and v.tensor == v.source and not is_iteration_tensor(v.source)
            and not v.fmt.coo)


def _without(pog: nx.DiGraph, views: Sequence[View]) -> nx.DiGraph:
    """``pog`` without the mode-order edges of ``views`` (edges with other reasons stay)."""
    out = pog.copy()
    for v in views:
        for a, b in _view_edges(v):
            if out.has_edge(a, b) and all(r == f"mode order of {v}" for r in out[a][b]["reasons"]):
                out.remove_edge(a, b)
    return out


def _resolve_cycles(g: Group) -> str | None:
    """Break the POG's cycles with permuted copies of views; None, or why a cycle stays."""
    pog = g.pog
    while True:
        edges = _first_cycle(pog)
        if not edges:
            return None
        # a view on the cycle can be read from a permuted copy (once: a view read from a
        # permuted copy already is not permuted again): views of a tensor used through several
        # views first (the copy serves the conflicting use), then any other view of a stored
        # tensor (e.g. a CSC operand of an elementwise product with a CSR one, read from a
        # row-major copy); blocked views last (they cannot be permuted: an error below); among
        # those, the first whose copy leaves no cycle
        counts = {s: sum(1 for v in g.views.values() if v.source == s)
                  for s in {v.source for v in g.views.values() if v.indices}}
        on_cycle = [v for v in reversed(list(g.views.values()))
                    if _permutable(v) and any(e in edges for e in _view_edges(v))]
        # a cycle through a dataflow order the user wrote is theirs to resolve: only the views
        # of tensors used through several views are permuted then (as the error says)
        user = any(r.startswith("dataflow order of") for a, b in edges for r in pog[a][b]["reasons"])
        on_cycle = [v for v in on_cycle if counts.get(v.source, 0) > 1 or not user]
        candidates = sorted(on_cycle, key=lambda v: (v.vector is not None, counts.get(v.source, 0) <= 1))
        if not candidates:
            why = []
            for a, b in edges:
                why.append(f"{a} -> {b} ({'; '.join(pog[a][b]['reasons'])})")
            return (f"group {g.name}: the ordering constraints form a cycle: "
                    + ", ".join(why) + g.where([a for a, _ in edges])
                    + "; change the dataflow order or the format")
        multi = counts.get(candidates[0].source, 0) > 1
        v = candidates[0] if multi else \
            next((c for c in candidates if nx.is_directed_acyclic_graph(_without(pog, [c]))), candidates[0])
        for a, b in _view_edges(v):
            reasons = pog[a][b]["reasons"]
            reasons.remove(f"mode order of {v}")
            if not reasons:
                pog.remove_edge(a, b)
        # the copy's mode order: a topological order of the constraints that stay (without the
        # views that may still be permuted, when the rest has a cycle yet)
        rest = pog if nx.is_directed_acyclic_graph(pog) or multi else \
            _without(pog, [w for w in g.views.values() if _permutable(w) and w.vector is None])
        topo = list(nx.topological_sort(rest)) if nx.is_directed_acyclic_graph(rest) else list(pog.nodes)
        rank = {i: k for k, i in enumerate(topo)}
        mode_order = tuple(sorted(range(len(v.indices)), key=lambda m: rank[v.indices[m]]))
        fmt = TensorFormat(v.fmt.levels, mode_order)
        densified = any(is_iteration_tensor(w.source) for w in g.views.values())
        if densified and v.name not in _visits_read_views(g):
            # not where a softmax reads the view's visited coordinates: a dense copy would
            # visit every coordinate of its leading indices, and the softmax normalises over
            # the visited ones (program fuzzer seeds 11431, 11635, 12171)
            fmt = _keeping_dense_cover(v.fmt, mode_order)
        copy = f"{v.source}_p{''.join(map(str, mode_order))}"
        if fmt.levels != v.fmt.levels:  # another group may copy the same tensor in the same order with
            copy += "_" + "".join(f.value[0] for f in fmt.levels)  # its own levels: its own name
        if v.vector is not None:
            return (f"group {g.name}: the views of the blocked tensor {v.source} conflict (POG cycle "
                    f"{' -> '.join(a for a, _ in edges)}); a blocked tensor cannot be read through a "
                    "permuted copy: change the dataflow order or the format")
        nv = View(v.name, copy, v.source, v.indices, v.shape, fmt)
        g.views[v.name] = nv
        what = f"views of {v.source} conflict" if multi else f"the mode order of {v} conflicts"
        g.permuted.append(PermutedCopy(copy, v.source, fmt,
                                       f"{what} (POG cycle "
                                       f"{' -> '.join(a for a, _ in edges)} -> {edges[0][0]})"))
        for a, b in _view_edges(nv):
            _add_edge(pog, a, b, f"mode order of {nv} (permuted copy {copy})")


def _visits_read_views(g: Group) -> set[str]:
    """The views of ``g`` whose visited coordinates a softmax reads: under a softmax's operand
    (not below a layernorm, which visits every coordinate), or under an output or inlined
    intermediate in :attr:`Group.exact` (its visited coordinates reach a softmax later)."""
    out: set[str] = set()

    def walk(e: VExpr, under: bool) -> None:
        if isinstance(e, VAccess):
            if under:
                out.add(e.view)
        elif isinstance(e, VUn):
            # a function with f(0) != 0 is densified (.densify): it visits every coordinate
            keeps = e.op.zero_preserving and e.op is not UnOp.LAYERNORM
            walk(e.arg, e.op is UnOp.SOFTMAX or (under and keeps))
        elif isinstance(e, VBin):
            walk(e.lhs, under)
            walk(e.rhs, under)
        elif isinstance(e, VNamed):
            walk(e.body, under or e.tensor in g.exact)

    for o in g.outputs:
        walk(o.body, o.tensor in g.exact)
    return out


def _keeping_dense_cover(fmt: TensorFormat, mode_order: tuple[int, ...]) -> TensorFormat:
    """A permuted copy's format in a densified group (:mod:`.densify`): the densifier left an
    index out where the operand's levels are dense down to it (its scanners enumerate the whole
    dimension), so the copy keeps that: its levels are dense down to the deepest such index in
    the new order (a CSC operand of ``x + c`` read row-major is read from a dense copy, not a
    CSR one whose compressed column level would leave the shifted zeros out)."""
    lead = next((k for k, f in enumerate(fmt.levels) if f is not Format.DENSE), len(fmt.levels))
    covered = fmt.mode_order[:lead]
    if not covered:
        return TensorFormat(fmt.levels, mode_order)
    deepest = max(mode_order.index(m) for m in covered)
    levels = tuple(Format.DENSE if lvl <= deepest else f for lvl, f in enumerate(fmt.levels))
    return TensorFormat(levels, mode_order)


MAX_ACC_ORDER = 2  # the sparse accumulators: spacc1 (order 1) and spacc2 (order 2)


def accumulator_order(order: Sequence[str], out: FusedOutput) -> int:
    """The largest number of output indices after a reduction index of ``out`` in ``order``:
    the order of the sparse accumulator that reduction needs (0: none)."""
    pos = [i for i in order if i in out.indices or i in out.reduced]
    need = 0
    for k, r in enumerate(pos):
        if r in out.reduced:
            need = max(need, sum(1 for i in pos[k + 1:] if i in out.indices))
    return need


def order_lowerable(order: Sequence[str], out: FusedOutput) -> str | None:
    """None if the codegen can lower ``out`` in ``order``, else the reason."""
    pos = [i for i in order if i in out.indices or i in out.reduced]
    for k, r in enumerate(pos):
        if r in out.reduced:
            after = [i for i in pos[k + 1:] if i in out.indices]
            if len(after) > MAX_ACC_ORDER:
                return (f"reduction index {r} of {out.tensor} has output indices "
                        f"{', '.join(after)} after it: that needs a sparse accumulator of order "
                        f"{len(after)}, and the primitive set has orders 1 and 2 only (spacc1, "
                        "spacc2)")
    return None


MAX_KEPT = 32  # lowerable orders kept per group (for schedule ranking)


def _acc_need(order: Sequence[str], g: Group) -> int:
    return max((accumulator_order(order, o) for o in g.outputs), default=0)


def _choose_order(g: Group) -> str | None:
    """Pick the first lowerable topological order of the POG, preferring orders whose
    reductions need order-1 accumulators at most (an order-2 accumulator buffers a whole 2-D
    fibre); None, or why there is none."""
    pog = g.pog
    first = {i: k for k, i in enumerate(pog.nodes)}
    preferred = tuple(nx.lexicographical_topological_sort(pog, key=lambda i: first[i]))
    count = lowerable = 0
    chosen: tuple[str, ...] | None = None
    fallback: tuple[str, ...] | None = None  # the first lowerable order with spacc2
    if all(order_lowerable(preferred, o) is None for o in g.outputs):
        if _acc_need(preferred, g) <= 1:
            chosen = preferred
        else:
            fallback = preferred
    for order in nx.all_topological_sorts(pog):
        count += 1
        if all(order_lowerable(order, o) is None for o in g.outputs):
            lowerable += 1
            if len(g.lowerable_orders) < MAX_KEPT:
                g.lowerable_orders.append(tuple(order))
            if chosen is None and _acc_need(order, g) <= 1:
                chosen = tuple(order)
            elif fallback is None:
                fallback = tuple(order)
        if count >= MAX_ORDERS:
            g.orders_capped = True
            break
    g.orders_count, g.lowerable_count = count, lowerable
    chosen = chosen or fallback
    if chosen is None:
        reasons = {order_lowerable(preferred, o) for o in g.outputs} - {None}
        return (f"group {g.name}: no valid dataflow order can be lowered: "
                + "; ".join(sorted(r for r in reasons if r)) + g.where(g.pog.nodes))
    g.order = chosen
    return None


def order_problem(g: Group, order: Sequence[str]) -> str | None:
    """None if ``order`` (a full fused order) is a lowerable topological order of ``g``'s POG,
    else why not."""
    order = tuple(order)
    if sorted(order) != sorted(g.pog.nodes):
        return (f"group {g.name}: order {','.join(order)} must name each of the indices "
                f"{', '.join(g.pog.nodes)} once")
    pos = {i: k for k, i in enumerate(order)}
    for a, b, d in g.pog.edges(data=True):
        if pos[a] > pos[b]:
            return (f"group {g.name}: order {','.join(order)} puts {b} before {a}, but the "
                    f"POG requires {a} -> {b} ({'; '.join(d['reasons'])})" + g.where([a, b]))
    for o in g.outputs:
        why = order_lowerable(order, o)
        if why:
            return f"group {g.name}: order {','.join(order)} cannot be lowered: {why}"
    return None


def set_order(g: Group, order: Sequence[str]) -> None:
    """Use ``order`` (a full fused order) for ``g``; :class:`FusionError` if
    :func:`order_problem` rejects it."""
    why = order_problem(g, order)
    if why:
        raise FusionError(why)
    g.order = tuple(order)


def all_orders(g: Group, cap: int = MAX_ORDERS) -> list[tuple[str, ...]]:
    """Valid (POG-respecting and lowerable) fused orders of ``g``, at most ``cap``."""
    out = []
    for order in nx.all_topological_sorts(g.pog):
        if all(order_lowerable(order, o) is None for o in g.outputs):
            out.append(tuple(order))
            if len(out) >= cap:
                break
    return out

