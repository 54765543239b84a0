"""The fused expressions the ``fuse`` pass builds (docs/compiler.md): tensor views, the value
expression of a fused output over them, permuted copies, and a group (its outputs, views, partial
order graph and dataflow order)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx

from ..ir.tensor import TensorFormat
from .program import Op, Statement, UnOp, VectorLayout, binop_text, unary_text

MAX_ORDERS = 2000  # cap on enumerated dataflow orders per group
MAX_KEPT = 32  # lowerable orders kept per group (for schedule ranking)


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


def vexpr_nodes(e: VExpr, *, into: Callable[[VNamed], bool] = lambda n: True,
                once: bool = False) -> Iterator[VExpr]:
    """The nodes of ``e``, parents first, left to right; below an inlined intermediate only
    where ``into`` says so; with ``once``, a node shared by several parents the first time."""
    seen: set[int] = set()
    stack: list[VExpr] = [e]
    while stack:
        x = stack.pop()
        if once:
            if id(x) in seen:
                continue
            seen.add(id(x))
        yield x
        if isinstance(x, VBin):
            stack += (x.rhs, x.lhs)
        elif isinstance(x, VUn):
            stack.append(x.arg)
        elif isinstance(x, VNamed) and into(x):
            stack.append(x.body)


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


# An expression shares subexpressions (an intermediate read twice is one object in two places),
# so the walks below keep what they computed per node (``memo``, keyed by the node's id and the
# walk): without it, a deep chain whose steps read their operand twice costs exponential time.
_Memo = dict


def _cached(memo: _Memo | None, key: tuple, compute):
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def _vindices(e: VExpr, views: Mapping[str, View], memo: _Memo | None = None) -> set[str]:
    def compute() -> set[str]:
        if isinstance(e, VAccess):
            return set(views[e.view].indices)
        if isinstance(e, VBin):
            return _vindices(e.lhs, views, memo) | _vindices(e.rhs, views, memo)
        if isinstance(e, VNamed):
            return _vindices(e.body, views, memo)
        if isinstance(e, VUn):
            return _vindices(e.arg, views, memo)
        return set()
    return _cached(memo, ("i", id(e)), compute)


def _local(e: VNamed, views: Mapping[str, View], memo: _Memo | None = None) -> list[str]:
    """Indices summed inside intermediate ``e`` (not inside an intermediate nested in it)."""
    def compute() -> list[str]:
        nested = _named_locals(e.body, views, memo)
        return sorted(_vindices(e.body, views, memo) - set(e.indices) - nested, key=lambda u: (len(u), u))
    return _cached(memo, ("l", id(e)), compute)


def _named_locals(e: VExpr, views: Mapping[str, View], memo: _Memo | None = None) -> set[str]:
    def compute() -> set[str]:
        if isinstance(e, VBin):
            return _named_locals(e.lhs, views, memo) | _named_locals(e.rhs, views, memo)
        if isinstance(e, VNamed):
            return set(_local(e, views, memo)) | _named_locals(e.body, views, memo)
        if isinstance(e, VUn):
            return _named_locals(e.arg, views, memo)
        return set()
    return _cached(memo if memo is not None else {}, ("n", id(e)), compute)


def render_vexpr(e: VExpr, views: Mapping[str, View], memo: _Memo | None = None) -> str:
    memo = {} if memo is None else memo

    def compute() -> str:
        if isinstance(e, VAccess):
            return str(views[e.view])
        if isinstance(e, VUn):
            return unary_text(e.op, render_vexpr(e.arg, views, memo), e.scalar, e.index)
        if isinstance(e, VNamed):
            local = _local(e, views, memo)
            red = f"Σ_{{{','.join(local)}}} " if local else ""
            return f"[{e.tensor}_{{{','.join(e.indices)}}} = {red}{render_vexpr(e.body, views, memo)}]"
        lhs, rhs = render_vexpr(e.lhs, views, memo), render_vexpr(e.rhs, views, memo)
        if e.op is Op.MUL:
            return f"{lhs} · {rhs}"
        return binop_text(e.op, lhs, rhs)
    return _cached(memo, ("r", id(e)), compute)


