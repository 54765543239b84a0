"""Einsum programs: tensor declarations, expressions, statements, fusion regions.

A :class:`Program` declares input tensors (:meth:`Program.tensor`), defines computed tensors
from expressions (:meth:`Program.let` / :meth:`Program.assign`) and names its outputs.  Expressions
are built from :func:`einsum`, elementwise ``+``, ``-``, ``*`` (trailing-axis broadcasting as in
numpy, e.g. a bias vector), scalars (``3 * A``, ``A + 1``, ``-A``) and the elementwise functions
:func:`relu`, :func:`neg`, :func:`exp`, :func:`sigmoid`, :func:`gelu`, :func:`rsqrt` (lowered
to unary ALU nodes).  Statements can be grouped into fusion
regions (:meth:`Program.region`) and carry an optional dataflow order written with the index
letters of their own Einsum.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ..ir.tensor import BlockFormat, Blocking, Format, TensorFormat

__all__ = [
    "Access",
    "BinOp",
    "FusionError",
    "IExpr",
    "LoweringError",
    "Op",
    "Program",
    "ProgramError",
    "Rejected",
    "Statement",
    "Sum",
    "Tensor",
    "TensorDecl",
    "TensorExpr",
    "UnOp",
    "Unary",
    "VectorLayout",
    "accesses",
    "binop_text",
    "einsum",
    "exp",
    "free_indices",
    "gelu",
    "layernorm",
    "maximum",
    "minimum",
    "neg",
    "parse_format",
    "relu",
    "rsqrt",
    "sigmoid",
    "softmax",
    "unary_text",
]


# ----------------------------------------------------------------------------- errors and verdicts
class ProgramError(ValueError):
    """A mistake in an Einsum program; the message names the expression, tensor and index."""


class FusionError(ProgramError):
    """The program cannot be fused as asked (order conflicts, unlowerable orders)."""


class LoweringError(ProgramError):
    """A fused expression the SAMML primitive set cannot express; names tensor and index."""


@dataclass(frozen=True)
class Rejected:
    """A check's verdict that a schedule cannot be realised, and why.

    The compiler's checks return this instead of raising, so that a caller can decide up front
    between schedules (factoring choices, region splits, fusion granularities); the public entry
    points raise :meth:`exception`.  ``split``: a region split (materialising a reduced
    intermediate read under an addition) would realise it."""

    reason: str
    error: type[ProgramError] = ProgramError
    split: bool = False

    def exception(self) -> ProgramError:
        return self.error(self.reason)


class Op(enum.Enum):
    """Elementwise binary operators.  Products (``*``, ``/``) are 0 where their left operand
    is (``/`` needs a denominator without implicit zeros, see :mod:`.semantics`), so they
    intersect coordinates; the others (``+``, ``-``, ``max``, ``min``) are 0 where both
    operands are, so they unite them.  Only ``*`` is linear: a reduction is pulled out of it."""

    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    MAX = "max"
    MIN = "min"

    @property
    def product(self) -> bool:
        """Coordinates intersect (``*``, ``/``); otherwise they unite."""
        return self in (Op.MUL, Op.DIV)


def binop_text(op: Op, lhs: str, rhs: str, mul: str = "*") -> str:
    """How a binary operation is printed (expressions, fused einsums, fusion tables)."""
    if op in (Op.MAX, Op.MIN):
        return f"{op.value}({lhs}, {rhs})"
    return f"({lhs} {mul if op is Op.MUL else op.value} {rhs})"


# ----------------------------------------------------------------------------- index-level IR
@dataclass(frozen=True)
class Access:
    tensor: str
    indices: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.tensor}_{{{','.join(self.indices)}}}" if self.indices else self.tensor


class UnOp(enum.Enum):
    """Elementwise functions (one unary ALU node each); SCALE / SHIFT multiply / add a scalar."""

    RELU = "relu"
    NEG = "neg"
    EXP = "exp"
    SIGMOID = "sigmoid"
    GELU = "gelu"
    RSQRT = "rsqrt"
    SCALE = "scale"
    SHIFT = "shift"
    # row functions: along one index (the expression's last), over the coordinates the
    # iteration visits there (see :attr:`row`)
    SOFTMAX = "softmax"
    LAYERNORM = "layernorm"
    # the sum of a vector's lanes (the blocking pass: a reduction over a vectorised index)
    LANE_SUM = "lane_sum"

    @property
    def row(self) -> bool:
        """A function of a whole fibre, not of one element: ``softmax`` normalises over the
        coordinates the iteration visits along its index (the stored entries: a masked
        softmax), ``layernorm`` over a full fibre (mean and variance; ``scalar`` is eps)."""
        return self in (UnOp.SOFTMAX, UnOp.LAYERNORM)

    @property
    def linear(self) -> bool:
        """``f(Σ x) = Σ f(x)``: a reduction may be pulled out of it (and fused through it)."""
        return self in (UnOp.NEG, UnOp.SCALE, UnOp.LANE_SUM)

    @property
    def zero_preserving(self) -> bool:
        """``f(0) = 0``: it may be applied to the stored entries of a sparse operand only."""
        return self in (UnOp.RELU, UnOp.NEG, UnOp.GELU, UnOp.SCALE, UnOp.LANE_SUM)


@dataclass(frozen=True)
class Unary:
    op: UnOp
    arg: IExpr
    scalar: int | float = 0  # SCALE: the factor, SHIFT: the addend, LAYERNORM: eps
    index: str = ""  # row functions: the index they run along

    def __str__(self) -> str:
        return unary_text(self.op, str(self.arg), self.scalar, self.index)


def unary_text(op: UnOp, arg: str, scalar: float = 0, index: str = "") -> str:
    """How a function application is printed (expressions, fusion tables, messages)."""
    if op.row:
        return f"{op.value}_{index}({arg})"
    if op is UnOp.SCALE:
        return f"{scalar}·{arg}"
    if op is UnOp.SHIFT:
        return f"({arg} + {scalar})"
    return f"{op.value}({arg})"


@dataclass(frozen=True)
class BinOp:
    op: Op
    lhs: IExpr
    rhs: IExpr

    def __str__(self) -> str:
        return binop_text(self.op, str(self.lhs), str(self.rhs))


@dataclass(frozen=True)
class Sum:
    """A reduction of ``body`` over ``indices``: a sum, or (``op`` MAX / MIN) a maximum /
    minimum over every coordinate of the reduced indices, implicit zeros included (numpy's
    ``max`` of the dense operand)."""

    indices: tuple[str, ...]
    body: IExpr
    op: Op = Op.ADD

    def __str__(self) -> str:
        sign = "Σ" if self.op is Op.ADD else self.op.value
        return f"{sign}_{{{','.join(self.indices)}}} {self.body}"


IExpr = Access | BinOp | Sum | Unary


def iexpr_nodes(e: IExpr) -> Iterator[IExpr]:
    """The nodes of ``e``, parents first, left to right (also below any node with a ``body``:
    a sum, or the compiler's inlined intermediates)."""
    stack: list = [e]
    while stack:
        x = stack.pop()
        yield x
        if isinstance(x, BinOp):
            stack += (x.rhs, x.lhs)
        elif isinstance(x, Unary):
            stack.append(x.arg)
        elif hasattr(x, "body"):
            stack.append(x.body)


def accesses(e: IExpr) -> list[Access]:
    """Every tensor access in ``e``, left to right (repeats kept)."""
    return [x for x in iexpr_nodes(e) if isinstance(x, Access)]


def free_indices(e: IExpr) -> list[str]:
    """Indices used but not summed, in first-appearance order."""
    if isinstance(e, Access):
        return list(dict.fromkeys(e.indices))
    if isinstance(e, Unary):
        return free_indices(e.arg)
    if isinstance(e, BinOp):
        return list(dict.fromkeys(free_indices(e.lhs) + free_indices(e.rhs)))
    return [i for i in free_indices(e.body) if i not in e.indices]


# ----------------------------------------------------------------------------- formats
_NAMED_FORMATS: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {
    "csr": (("dense", "compressed"), (0, 1)),
    "csc": (("dense", "compressed"), (1, 0)),
    "dcsr": (("compressed", "compressed"), (0, 1)),
    "dcsc": (("compressed", "compressed"), (1, 0)),
}


def parse_format(tensor: str, fmt: TensorFormat | str | Sequence[str | Format] | None,
                 order: int, mode_order: Sequence[int] | None = None) -> TensorFormat:
    """A tensor format from a :class:`TensorFormat`, a name (``csr``, ``csc``, ``dcsr``,
    ``dcsc``, ``coo``, ``dense``, ``compressed``) or per-level letters (``"dc"``, ``"n1"``,
    ``["dense", ...]``; ``n`` a compressed level with non-unique coordinates, ``1`` a singleton
    level)."""
    if isinstance(fmt, TensorFormat):
        tf = fmt
    else:
        if fmt is None:
            fmt = "dense"
        mo: Sequence[int] | None = mode_order
        if isinstance(fmt, str) and fmt.lower() == "coo":
            if order < 1:
                raise ProgramError(f"tensor {tensor!r}: format 'coo' needs at least one mode")
            # one non-unique compressed level, then a singleton level per further mode
            fmt = ("compressed_nonunique",) + ("singleton",) * (order - 1)
        if isinstance(fmt, str) and fmt.lower() in _NAMED_FORMATS:
            levels, named_mo = _NAMED_FORMATS[fmt.lower()]
            mo = mo or named_mo
        elif isinstance(fmt, str) and fmt.lower() in ("dense", "compressed", "sparse"):
            levels = (fmt,) * order
        elif isinstance(fmt, str):
            levels = tuple(fmt)
        else:
            levels = tuple(fmt)
        try:
            tf = TensorFormat(tuple(Format.parse(lv) for lv in levels), tuple(mo or ()))
        except ValueError as exc:
            raise ProgramError(
                f"tensor {tensor!r}: unsupported format {fmt!r}: {exc}; supported level formats "
                "are dense, compressed, compressed_nonunique and singleton (or the names csr, csc, "
                "dcsr, dcsc, coo)"
            ) from None
    if tf.order != order:
        raise ProgramError(f"tensor {tensor!r}: format {tf} has {tf.order} levels but the tensor "
                           f"has {order} modes")
    return tf


# ----------------------------------------------------------------------------- user handles
@dataclass(frozen=True)
class TensorDecl:
    name: str
    shape: tuple[int, ...]
    fmt: TensorFormat | None  # None: chosen by the compiler (computed tensors only)
    vector: VectorLayout | None = None  # set by the blocking pass: values are vectors


@dataclass(frozen=True)
class VectorLayout:
    """A tensor whose values are vectors (the blocking pass, :mod:`.blocking`): mode ``mode``
    of the original tensor (of ``shape``) is cut into blocks of ``block`` entries; the
    compiler iterates the block coordinate in that mode and, when ``lanes < block``, a dense
    mode of ``block / lanes`` entries appended last; each value is a vector of ``lanes``
    entries, stored as the innermost dense level (a :class:`~fuseflow.ir.tensor.BlockFormat`)."""

    mode: int
    block: int
    lanes: int
    shape: tuple[int, ...]  # the original shape

    @property
    def split(self) -> int:
        """Vectors per block: the extent of the appended mode (1: none appended)."""
        return self.block // self.lanes

    def block_format(self, fmt: TensorFormat) -> BlockFormat:
        """The block format of the stored tensor whose compiler view has format ``fmt``."""
        n = len(self.shape)
        order = tuple(m for m in fmt.mode_order if m < n)
        levels = tuple(f for f, m in zip(fmt.levels, fmt.mode_order) if m < n)
        blocks = tuple(self.block if d == self.mode else 1 for d in range(n))
        return BlockFormat(TensorFormat(levels, order), blocks, self.lanes if self.split > 1 else 0)

    def blocking(self, fmt: TensorFormat) -> Blocking:
        return Blocking(self.block_format(fmt), self.shape)


Builder = Callable[[tuple[str, ...], Callable[[str], str]], IExpr]


@dataclass(frozen=True)
class TensorExpr:
    """A tensor-valued expression: its shape, a text form and a builder of the index-level IR.

    ``build(indices, fresh)`` returns the IR with the free modes bound to ``indices``;
    ``fresh(letter)`` names summed indices uniquely.  ``letters`` maps the reduction letters the
    user wrote to those unique names (for dataflow orders)."""

    shape: tuple[int, ...]
    text: str
    build: Builder
    out_letters: tuple[str, ...] = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def unary(self, op: UnOp, scalar: float = 0, text: str | None = None) -> TensorExpr:
        """``op`` applied to every element (see :class:`UnOp`); a row function along the last
        mode."""
        if op.row and not self.shape:
            raise ProgramError(f"{op.value}({self.text}): a scalar has no fibre to run along")

        def build(idx: tuple[str, ...], fresh: Callable[[str], str]) -> IExpr:
            return Unary(op, self.build(idx, fresh), scalar, idx[-1] if op.row else "")

        return TensorExpr(self.shape, text or f"{op.value}({self.text})", build, self.out_letters)

    def _binary(self, other: object, op: Op, swap: bool = False) -> TensorExpr:
        if op in (Op.DIV, Op.MAX, Op.MIN) and isinstance(other, int | float):
            raise ProgramError(_scalar_operand_problem(op, self.text, other, swap))
        if isinstance(other, int | float) and not isinstance(other, bool):
            if op is Op.MUL:
                return self.unary(UnOp.SCALE, other, f"{other}*{self.text}")
            if op is Op.ADD:
                return self.unary(UnOp.SHIFT, other, f"({self.text} + {other})")
            if swap:  # other - self
                return self.unary(UnOp.NEG).unary(UnOp.SHIFT, other, f"({other} - {self.text})")
            return self.unary(UnOp.SHIFT, -other, f"({self.text} - {other})")
        other_e = as_expr(other)
        a, b = (other_e, self) if swap else (self, other_e)
        text = binop_text(op, a.text, b.text)
        big, small = (a, b) if a.ndim >= b.ndim else (b, a)
        if tuple(big.shape[big.ndim - small.ndim:]) != tuple(small.shape):
            raise ProgramError(f"shape mismatch in {text}: {a.text} has shape {a.shape} and "
                               f"{b.text} has shape {b.shape} (trailing axes must agree)")

        def build(idx: tuple[str, ...], fresh: Callable[[str], str]) -> IExpr:
            ia = idx[len(idx) - a.ndim:]
            ib = idx[len(idx) - b.ndim:]
            return BinOp(op, a.build(ia, fresh), b.build(ib, fresh))

        return TensorExpr(big.shape, text, build, big.out_letters)

    def __add__(self, other: object) -> TensorExpr:
        return self._binary(other, Op.ADD)

    def __radd__(self, other: object) -> TensorExpr:
        return self._binary(other, Op.ADD, swap=True)

    def __sub__(self, other: object) -> TensorExpr:
        return self._binary(other, Op.SUB)

    def __rsub__(self, other: object) -> TensorExpr:
        return self._binary(other, Op.SUB, swap=True)

    def __mul__(self, other: object) -> TensorExpr:
        return self._binary(other, Op.MUL)

    def __rmul__(self, other: object) -> TensorExpr:
        return self._binary(other, Op.MUL, swap=True)

    def __truediv__(self, other: object) -> TensorExpr:
        if isinstance(other, int | float) and not isinstance(other, bool) and other != 0:
            return self.unary(UnOp.SCALE, 1 / other, f"({self.text} / {other})")
        return self._binary(other, Op.DIV)

    def __rtruediv__(self, other: object) -> TensorExpr:
        return self._binary(other, Op.DIV, swap=True)

    def __neg__(self) -> TensorExpr:
        return self.unary(UnOp.NEG, text=f"-{self.text}")


def _scalar_operand_problem(op: Op, text: str, scalar: object, swap: bool) -> str:
    if op is Op.DIV and not swap:
        return f"{text} / {scalar}: division by zero"
    if op is Op.DIV:
        return (f"{scalar} / {text}: a scalar divided by a tensor is not supported (the ALU has "
                "no reciprocal of a stream); divide by a tensor of the scalar's value instead")
    return (f"{op.value}({text}, {scalar}): {op.value} with a scalar is not supported (use relu "
            f"for {op.value}(x, 0) = {'relu(x)' if op is Op.MAX else '-relu(-x)'}, or a tensor "
            "operand)")


@dataclass(frozen=True)
class Tensor:
    """A declared tensor (input or computed) of a :class:`Program`."""

    decl: TensorDecl

    @property
    def name(self) -> str:
        return self.decl.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.decl.shape

    def expr(self) -> TensorExpr:
        name = self.name
        return TensorExpr(self.shape, name, lambda idx, fresh: Access(name, tuple(idx)))

    def __add__(self, o: object) -> TensorExpr:
        return self.expr() + o

    def __radd__(self, o: object) -> TensorExpr:
        return self.expr().__radd__(o)

    def __sub__(self, o: object) -> TensorExpr:
        return self.expr() - o

    def __rsub__(self, o: object) -> TensorExpr:
        return self.expr().__rsub__(o)

    def __mul__(self, o: object) -> TensorExpr:
        return self.expr() * o

    def __rmul__(self, o: object) -> TensorExpr:
        return self.expr().__rmul__(o)

    def __truediv__(self, o: object) -> TensorExpr:
        return self.expr() / o

    def __rtruediv__(self, o: object) -> TensorExpr:
        return self.expr().__rtruediv__(o)

    def __neg__(self) -> TensorExpr:
        return -self.expr()


def relu(x: Tensor | TensorExpr) -> TensorExpr:
    """``max(x, 0)`` elementwise."""
    return as_expr(x).unary(UnOp.RELU)


def neg(x: Tensor | TensorExpr) -> TensorExpr:
    """``-x`` elementwise."""
    return -as_expr(x)


def exp(x: Tensor | TensorExpr) -> TensorExpr:
    """``e**x`` elementwise (fixed-point or float numerics; ``exp(0) = 1``, so ``x`` must be
    stored densely)."""
    return as_expr(x).unary(UnOp.EXP)


def sigmoid(x: Tensor | TensorExpr) -> TensorExpr:
    """``1 / (1 + e**-x)`` elementwise (fixed-point or float numerics; ``x`` stored densely)."""
    return as_expr(x).unary(UnOp.SIGMOID)


def gelu(x: Tensor | TensorExpr) -> TensorExpr:
    """``x·Φ(x)`` elementwise (fixed-point or float numerics)."""
    return as_expr(x).unary(UnOp.GELU)


def rsqrt(x: Tensor | TensorExpr) -> TensorExpr:
    """``1 / sqrt(x)`` elementwise (fixed-point or float numerics; ``x`` stored densely)."""
    return as_expr(x).unary(UnOp.RSQRT)


def softmax(x: Tensor | TensorExpr) -> TensorExpr:
    """Softmax along the last mode: ``exp(x - max) / sum(exp(x - max))`` over each fibre's
    *visited* coordinates — every coordinate where ``x`` is dense, the stored entries where it
    is sparse (a masked softmax: absent entries count as ``-inf``, so they stay absent).  Fused
    into the graph that computes ``x`` (fixed-point or float numerics)."""
    return as_expr(x).unary(UnOp.SOFTMAX)


def layernorm(x: Tensor | TensorExpr, eps: float = 1e-5) -> TensorExpr:
    """Layer normalisation along the last mode, without the affine part:
    ``(x - mean) / sqrt(var + eps)`` over each fibre (mean and variance over the whole
    dimension, so every fibre must be fully iterated: ``x`` dense along it).  Scale and shift
    with ordinary products and sums (``layernorm(x) * g + b``).  Fixed-point or float numerics."""
    if not eps > 0:
        raise ProgramError(f"layernorm({as_expr(x).text}, eps={eps!r}): eps must be positive")
    return as_expr(x).unary(UnOp.LAYERNORM, float(eps), f"layernorm({as_expr(x).text})")


def maximum(x: Tensor | TensorExpr, y: Tensor | TensorExpr) -> TensorExpr:
    """``max(x, y)`` elementwise, with numpy's trailing-axis broadcasting; a coordinate stored
    by one operand only is compared with the other's implicit 0 (``numpy.maximum``)."""
    return as_expr(x)._binary(y, Op.MAX)


def minimum(x: Tensor | TensorExpr, y: Tensor | TensorExpr) -> TensorExpr:
    """``min(x, y)`` elementwise (``numpy.minimum``, implicit zeros included)."""
    return as_expr(x)._binary(y, Op.MIN)


def as_expr(x: object) -> TensorExpr:
    if isinstance(x, TensorExpr):
        return x
    if isinstance(x, Tensor):
        return x.expr()
    raise ProgramError(f"{x!r} is not a tensor or tensor expression")


_REDUCE_OPS = {"add": Op.ADD, "sum": Op.ADD, "max": Op.MAX, "min": Op.MIN}


def _reduce_op(spec: str, reduce: str) -> Op:
    if reduce not in _REDUCE_OPS:
        raise ProgramError(f"einsum({spec!r}): reduce={reduce!r} must be one of 'add', 'max', "
                           "'min'")
    return _REDUCE_OPS[reduce]


def einsum(spec: str, *operands: Tensor | TensorExpr, reduce: str = "add") -> TensorExpr:
    """``einsum("ik,kj->ij", A, X)``: indices missing on the right are summed.  ``reduce``
    ``"max"`` / ``"min"`` reduce them by maximum / minimum instead (of the product of the
    operands), over every coordinate: implicit zeros take part, as in
    ``numpy.max(..., axis=...)`` of the dense operands."""
    red_op = _reduce_op(spec, reduce)
    text = f"einsum({spec!r}, {', '.join(as_expr(o).text for o in operands)}" + (
        f", reduce={reduce!r})" if red_op is not Op.ADD else ")")
    if "->" not in spec:
        raise ProgramError(f"{text}: the spec needs '->' and the output indices, e.g. 'ik,kj->ij'")
    lhs, out = spec.replace(" ", "").split("->")
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise ProgramError(f"{text}: the spec has {len(ins)} operands but {len(operands)} were given")
    ops = [as_expr(o) for o in operands]
    sizes: dict[str, tuple[int, str]] = {}
    for letters, op in zip(ins, ops):
        if not all(c.isalpha() for c in letters):
            raise ProgramError(f"{text}: operand {op.text} has a non-letter index in {letters!r}")
        if len(set(letters)) != len(letters):
            dup = next(c for c in letters if letters.count(c) > 1)
            raise ProgramError(f"{text}: index {dup!r} is repeated in operand {op.text} "
                               "(diagonals are not supported)")
        if len(letters) != op.ndim:
            raise ProgramError(f"{text}: operand {op.text} has {op.ndim} modes but indices "
                               f"{letters!r}")
        for c, n in zip(letters, op.shape):
            if c in sizes and sizes[c][0] != n:
                raise ProgramError(f"shape mismatch in {text}: index {c!r} has size {sizes[c][0]} in "
                                   f"{sizes[c][1]} but {n} in {op.text}")
            sizes.setdefault(c, (n, op.text))
    for c in out:
        if c not in sizes:
            raise ProgramError(f"{text}: output index {c!r} is unknown (not used by any operand)")
        if out.count(c) > 1:
            raise ProgramError(f"{text}: output index {c!r} is repeated")
    summed = tuple(dict.fromkeys(c for c in "".join(ins) if c not in out))
    shape = tuple(sizes[c][0] for c in out)

    def build(idx: tuple[str, ...], fresh: Callable[[str], str]) -> IExpr:
        names = dict(zip(out, idx))
        for c in summed:
            names[c] = fresh(c)
        body: IExpr | None = None
        for letters, op in zip(ins, ops):
            term = op.build(tuple(names[c] for c in letters), fresh)
            body = term if body is None else BinOp(Op.MUL, body, term)
        assert body is not None
        return Sum(tuple(names[c] for c in summed), body, red_op) if summed else body

    return TensorExpr(shape, text, build, tuple(out))


def split_order(order: str | Sequence[str]) -> tuple[str, ...]:
    """``"ikj"``, ``"i,k,j"``, ``"i->k->j"`` or a sequence -> index names."""
    if not isinstance(order, str):
        return tuple(order)
    if any(sep in order for sep in (",", "->", " ")):
        return tuple(order.replace("->", ",").replace(",", " ").split())
    return tuple(order)


# ----------------------------------------------------------------------------- statements
@dataclass(frozen=True)
class Statement:
    """``out[indices] = rhs``; summed indices are unique names; ``letters`` maps the letters the
    user wrote (free and summed) to the names in ``rhs``."""

    index: int
    out: str
    indices: tuple[str, ...]
    rhs: IExpr
    text: str
    letters: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    order: tuple[str, ...] = ()  # user dataflow order, in IR index names

    def reads(self) -> list[str]:
        return list(dict.fromkeys(a.tensor for a in accesses(self.rhs)))

    def __str__(self) -> str:
        return f"{self.out}_{{{','.join(self.indices)}}} = {self.rhs}"


_DEFAULT_LETTERS = "ijlmnopqrst"
RESERVED_PREFIX = "_iter"  # the compiler's dense iteration tensors (see .semantics)


class Program:
    """An Einsum program: inputs, statements in program order, outputs and fusion regions."""

    def __init__(self, name: str = "program") -> None:
        self.name = name
        self.decls: dict[str, TensorDecl] = {}
        self.statements: list[Statement] = []
        self.outputs: list[str] = []
        self.regions: list[tuple[int, ...]] = []
        self._assigned: dict[str, int] = {}
        self._pending: set[str] = set()

    # ---------------------------------------------------------------- declarations
    def tensor(self, name: str, shape: Iterable[int],
               fmt: TensorFormat | str | Sequence[str | Format] | None = None,
               mode_order: Sequence[int] | None = None) -> Tensor:
        """Declare a tensor (an input, or a computed tensor later given to :meth:`assign`)."""
        if not name.isidentifier():
            raise ProgramError(f"tensor name {name!r} must be an identifier")
        if name.startswith(RESERVED_PREFIX):
            raise ProgramError(f"tensor name {name!r}: names starting with {RESERVED_PREFIX!r} "
                               "are reserved for the compiler's iteration tensors")
        if name in self.decls:
            raise ProgramError(f"tensor {name!r} is declared twice")
        shape_t = tuple(int(s) for s in shape)
        if any(s <= 0 for s in shape_t):
            raise ProgramError(f"tensor {name!r}: shape {shape_t} must be positive")
        tf = parse_format(name, fmt, len(shape_t), mode_order)
        decl = TensorDecl(name, shape_t, tf)
        self.decls[name] = decl
        return Tensor(decl)

    def let(self, name: str, expr: Tensor | TensorExpr,
            fmt: TensorFormat | str | Sequence[str | Format] | None = None,
            order: str | Sequence[str] | None = None) -> Tensor:
        """Define tensor ``name`` as ``expr`` (format chosen by the compiler unless given)."""
        e = as_expr(expr)
        if name in self.decls:
            raise ProgramError(f"tensor {name!r} is declared twice")
        if name.startswith(RESERVED_PREFIX):
            raise ProgramError(f"tensor name {name!r}: names starting with {RESERVED_PREFIX!r} "
                               "are reserved for the compiler's iteration tensors")
        tf = None if fmt is None else parse_format(name, fmt, e.ndim)
        decl = TensorDecl(name, e.shape, tf)
        self.decls[name] = decl
        t = Tensor(decl)
        self._add_statement(t, e, order)
        return t

    def assign(self, target: Tensor, expr: Tensor | TensorExpr,
               order: str | Sequence[str] | None = None) -> Tensor:
        """Give a previously declared tensor its defining expression."""
        e = as_expr(expr)
        if target.name not in self.decls:
            raise ProgramError(f"tensor {target.name!r} is not declared in program {self.name!r}")
        if tuple(e.shape) != target.shape:
            raise ProgramError(f"shape mismatch: {target.name} = {e.text}: {target.name} has shape "
                               f"{target.shape} but the expression has shape {e.shape}")
        self._add_statement(target, e, order)
        return target

    def _add_statement(self, target: Tensor, e: TensorExpr, order: str | Sequence[str] | None) -> None:
        name = target.name
        if name in self._assigned:
            raise ProgramError(f"tensor {name!r} is assigned twice (statements "
                               f"{self._assigned[name]} and {len(self.statements)})")
        fmt = self.decls[name].fmt
        if fmt is not None and any(not (f is Format.DENSE or f is Format.COMPRESSED) for f in fmt.levels):
            raise ProgramError(
                f"tensor {name!r} is computed, and its format {fmt} has COO levels (compressed_nonunique "
                "/ singleton): COO is an input format; declare it dense or compressed (e.g. 'dcsr') "
                "and convert the result on the host (TensorData.convert)")
        letters = tuple(e.out_letters) if len(e.out_letters) == e.ndim else ()
        if not letters:
            letters = tuple(_DEFAULT_LETTERS[: e.ndim])
        used: set[str] = set(letters)
        sym: dict[str, str] = {}

        def fresh_named(c: str) -> str:
            n, k = c, 0
            while n in used:
                n, k = f"{c}{k}", k + 1
            used.add(n)
            sym.setdefault(c, n)
            return n

        rhs = e.build(letters, fresh_named)
        stmt_text = f"{name} = {e.text}"
        idx_map = {**{c: c for c in letters}, **sym}
        order_t: tuple[str, ...] = ()
        if order is not None:
            raw = split_order(order)
            for c in raw:
                if c not in idx_map:
                    raise ProgramError(f"statement '{stmt_text}': order {''.join(raw)!r} names "
                                       f"unknown index {c!r}; known: {sorted(idx_map)}")
            if len(set(raw)) != len(raw):
                dup = next(c for c in raw if raw.count(c) > 1)
                raise ProgramError(f"statement '{stmt_text}': order {''.join(raw)!r} repeats "
                                   f"index {dup!r}")
            order_t = tuple(idx_map[c] for c in raw)
        stmt = Statement(len(self.statements), name, letters, rhs, stmt_text, idx_map, order_t)
        for t in stmt.reads():
            if t in self._pending and t not in self._assigned:
                raise ProgramError(f"statement {stmt.index} '{stmt_text}' reads {t!r} before it is "
                                   "produced")
            if t == name:
                raise ProgramError(f"statement {stmt.index} '{stmt_text}' reads its own result "
                                   f"{name!r}")
        self._assigned[name] = stmt.index
        self.statements.append(stmt)

    def computed(self, name: str, shape: Iterable[int],
                 fmt: TensorFormat | str | Sequence[str | Format] | None = None) -> Tensor:
        """Declare a tensor that a later :meth:`assign` computes (reading it earlier is an error)."""
        shape_t = tuple(int(s) for s in shape)
        t = self.tensor(name, shape_t, fmt if fmt is not None else "compressed")
        if fmt is None:
            self.decls[name] = TensorDecl(name, shape_t, None)
            t = Tensor(self.decls[name])
        self._pending.add(name)
        return t

    def output(self, *tensors: Tensor) -> None:
        for t in tensors:
            if t.name not in self._assigned:
                raise ProgramError(f"output {t.name!r} is not computed by any statement")
            if t.name not in self.outputs:
                self.outputs.append(t.name)

    def region(self, *tensors: Tensor) -> None:
        """Group the statements computing ``tensors`` into one fusion region."""
        idx = []
        for t in tensors:
            if t.name not in self._assigned:
                raise ProgramError(f"region member {t.name!r} is not computed by any statement")
            idx.append(self._assigned[t.name])
        for r in self.regions:
            both = set(r) & set(idx)
            if both:
                raise ProgramError(f"statement computing {self.statements[min(both)].out!r} is in "
                                   "two fusion regions")
        self.regions.append(tuple(sorted(idx)))

    # ---------------------------------------------------------------- queries
    def inputs(self) -> list[str]:
        return [n for n in self.decls if n not in self._assigned]

    def result_names(self) -> list[str]:
        if self.outputs:
            return list(self.outputs)
        return [self.statements[-1].out] if self.statements else []

    def producer(self, tensor: str) -> Statement | None:
        i = self._assigned.get(tensor)
        return None if i is None else self.statements[i]
