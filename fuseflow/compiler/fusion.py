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
from .densify import densify_statement, free_in_order, is_iteration_tensor
from .fused import (
    MAX_ORDERS,
    FusedOutput,
    Group,
    PermutedCopy,
    VAccess,
    VBin,
    VExpr,
    View,
    VNamed,
    VUn,
)
from .pog import (
    _build_pog,
    _choose_order,
    accumulator_order,
    all_orders,
    order_lowerable,
    order_problem,
    set_order,
)
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
    accesses,
    iexpr_nodes,
    split_order,
)
from .semantics import densified_notes

__all__ = [
    "MAX_ORDERS",
    "Fusion",
    "FusionError",
    "accumulator_order",
    "all_orders",
    "fuse",
    "order_lowerable",
    "order_problem",
    "plan_regions",
    "set_order",
]


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
                free = [i for i in free_in_order(e.body) if i not in e.indices]
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
                free = [i for i in free_in_order(arg) if i != e.index] + [e.index]
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
    for a in accesses(e):
        out.update(zip(a.indices, shapes[a.tensor]))


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
            order = tuple(i for i in order if i in set(free_in_order(rhs)) | set(_all_sums(rhs)))
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
    return [i for a in accesses(e) for i in a.indices]

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
    return [i for x in iexpr_nodes(e) if isinstance(x, Sum) for i in x.indices]

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
    g.notes += densified_notes(g.outputs, g.views)
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
