"""The ``block`` pass: sparsity blocking with vector lanes (docs/compiler.md, "Blocking").

``block={"j": 16}`` cuts the dimension that index ``j`` iterates into blocks of 16 entries in
every tensor that has it, stores those tensors in a block format (the block coordinate at the
level the dimension had, the entries of a block in a dense level below all others) and
iterates only the block coordinates: every value of such a tensor is a *vector* of the
block's entries (``lanes``, by default the block size; a divisor of it adds a dense index of
``block / lanes`` vectors per block).  The pass rewrites the program before fusion:

* the tensors of the blocked dimension get a :class:`~fuseflow.compiler.program.VectorLayout`
  and the shape of their block grid (plus the appended mode of vectors per block);
* an access keeps its index letters (the letter of the blocked dimension now iterates block
  coordinates) and, with ``lanes < block``, gets a fresh letter for the appended mode;
* a sum over the blocked index sums the blocks and, inside, the lanes of each vector
  (``lane_sum``: a ``lane_reduce`` node); elementwise arithmetic of a vector with a value
  that lacks the dimension uses that value for every lane (the ALU's ``scalar_port``).

The dimension is found through every statement: index letters that meet in a statement name
the same dimension, so blocking ``j`` of ``S = M ⊙ Q·Kᵀ`` also blocks the reduction index of
``O = S·V`` that reads ``S``'s columns, and ``V``'s rows.  One dimension is blocked per
program; a row function along it, a tensor with the dimension twice and a block that does not
divide the dimension are refused with a message naming the tensor and index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ...ir.primitives.parallel import MAX_LANES
from ...ir.tensor import Format, TensorFormat
from ...options import Kind, Option, Source
from ..program import (
    Access,
    BinOp,
    IExpr,
    Program,
    ProgramError,
    Rejected,
    Statement,
    Sum,
    TensorDecl,
    Unary,
    UnOp,
    VectorLayout,
    accesses,
)
from .base import GroupIR, Pass, ProgramIR

__all__ = ["BLOCK", "LANES", "MAX_BLOCK_LANES", "PASS", "block_program", "dimension_of"]

MAX_BLOCK_LANES = 64  # the widest vector the primitives take


class _Dims:
    """Union-find over tensor modes: two modes are one dimension when one statement reads or
    writes them with the same index."""

    def __init__(self, program: Program) -> None:
        self.parent: dict[tuple[str, int], tuple[str, int]] = {}
        for s in program.statements:
            seen: dict[str, tuple[str, int]] = {}
            for t, idx in [(s.out, s.indices), *((a.tensor, a.indices) for a in accesses(s.rhs))]:
                for m, i in enumerate(idx):
                    here = (t, m)
                    self.find(here)
                    if i in seen:
                        self.union(seen[i], here)
                    else:
                        seen[i] = here

    def find(self, x: tuple[str, int]) -> tuple[str, int]:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple[str, int], b: tuple[str, int]) -> None:
        self.parent[self.find(a)] = self.find(b)

    def members(self, root: tuple[str, int]) -> list[tuple[str, int]]:
        return [x for x in self.parent if self.find(x) == root]


def dimension_of(program: Program, key: str) -> list[tuple[str, int]]:
    """The tensor modes of the dimension index ``key`` iterates (``j``: the letter as some
    statement wrote it; ``T:j``: as the statement computing ``T`` wrote it)."""
    dims = _Dims(program)
    scope, _, letter = key.rpartition(":")
    stmts = [s for s in program.statements if not scope or s.out == scope]
    if scope and not stmts:
        raise ProgramError(f"block {key}: no statement computes tensor {scope!r}")
    roots = set()
    for s in stmts:
        name = s.letters.get(letter)
        if name is None:
            continue
        for t, idx in [(s.out, s.indices), *((a.tensor, a.indices) for a in accesses(s.rhs))]:
            roots |= {dims.find((t, m)) for m, i in enumerate(idx) if i == name}
    if not roots:
        raise ProgramError(f"block {key}: no statement has an index {letter!r}")
    if len(roots) > 1:
        where = ", ".join(sorted(s.out for s in stmts if letter in s.letters))
        raise ProgramError(f"block {key}: index {letter!r} names different dimensions in the "
                           f"statements computing {where}; write STATEMENT:{letter} (e.g. "
                           f"{min(s.out for s in stmts if letter in s.letters)}:{letter})")
    return sorted(dims.members(roots.pop()))


def _check_sizes(program: Program, modes: list[tuple[str, int]], key: str, block: int, lanes: int) -> None:
    for b, what in ((block, "block size"), (lanes, "lanes")):
        if b < 1 or b & (b - 1) or b > MAX_BLOCK_LANES:
            raise ProgramError(f"block {key}={block}: {what} {b} must be a power of two from 1 to "
                               f"{MAX_BLOCK_LANES}")
    if block % lanes:
        raise ProgramError(f"block {key}={block}: lanes {lanes} must divide the block size")
    tensors = [t for t, _ in modes]
    twice = sorted({t for t in tensors if tensors.count(t) > 1})
    if twice:
        raise ProgramError(f"block {key}: tensor {twice[0]!r} has the blocked dimension in two modes")
    for t, m in modes:
        n = program.decls[t].shape[m]
        if n % block:
            raise ProgramError(f"block {key}={block}: mode {m} of tensor {t!r} has {n} entries, "
                               f"not a whole number of blocks of {block}")


def block_program(program: Program, block: Mapping[str, int], lanes: int | None = None) -> Program:
    """``program`` with one dimension blocked and vectorised (see the module docstring)."""
    if not block:
        return program
    if len(block) > 1:
        raise ProgramError(f"block {','.join(f'{i}={b}' for i, b in block.items())}: one blocked dimension per program (got {len(block)})")
    [(key, size)] = block.items()
    lanes = lanes or size
    modes = dimension_of(program, key)
    _check_sizes(program, modes, key, size, lanes)
    mode_of = dict(modes)
    layouts = {t: VectorLayout(m, size, lanes, program.decls[t].shape) for t, m in mode_of.items()}
    out = Program(program.name)
    for name, d in program.decls.items():
        v = layouts.get(name)
        out.decls[name] = d if v is None else _blocked_decl(d, v)
    for s in program.statements:
        out.statements.append(_blocked_statement(s, mode_of, layouts))
    out.outputs = list(program.outputs)
    out.regions = list(program.regions)
    out._assigned = dict(program._assigned)
    out._pending = set(program._pending)
    return out


def _blocked_decl(d: TensorDecl, v: VectorLayout) -> TensorDecl:
    shape = tuple(n // v.block if m == v.mode else n for m, n in enumerate(d.shape))
    fmt = d.fmt
    if v.split > 1:
        shape = (*shape, v.split)
        if fmt is not None:
            fmt = TensorFormat((*fmt.levels, Format.DENSE), (*fmt.mode_order, len(d.shape)))
    if fmt is not None and any(f in (Format.COMPRESSED_NONUNIQUE, Format.SINGLETON) for f in fmt.levels):
        # a blocked tensor is stored anew in blocks (its duplicates summed): a COO tensor's block
        # grid gets compressed levels in the same mode order, as DCSR stores a matrix
        fmt = TensorFormat(tuple(Format.COMPRESSED if f in (Format.COMPRESSED_NONUNIQUE, Format.SINGLETON)
                                 else f for f in fmt.levels), fmt.mode_order)
    return TensorDecl(d.name, shape, fmt, v)


def _blocked_statement(s: Statement, mode_of: Mapping[str, int],
                       layouts: Mapping[str, VectorLayout]) -> Statement:
    """The statement over block coordinates; its letter of the blocked dimension (if any)
    now iterates blocks, ``<letter>~v`` the vectors of a block (``lanes < block``)."""
    letter = _blocked_letter(s, mode_of)
    split = next(iter(layouts.values())).split
    extra = (f"{letter}~v",) if letter and split > 1 else ()

    def access(a: Access) -> Access:
        return Access(a.tensor, (*a.indices, *extra)) if a.tensor in layouts else a

    def walk(e: IExpr) -> IExpr:
        if isinstance(e, Access):
            return access(e)
        if isinstance(e, BinOp):
            return BinOp(e.op, walk(e.lhs), walk(e.rhs))
        if isinstance(e, Unary):
            if e.op.row and letter and e.index == letter:
                raise ProgramError(f"statement '{s.text}': {e.op.value} runs along {letter}, the "
                                   "blocked index (row functions along a vectorised index are not "
                                   "supported)")
            return Unary(e.op, walk(e.arg), e.scalar, e.index)
        assert isinstance(e, Sum)
        body = walk(e.body)
        if letter not in e.indices:
            return Sum(e.indices, body, e.op)
        if e.op.value != "+":
            raise ProgramError(f"statement '{s.text}': a {e.op.value} reduction over the blocked "
                               f"index {letter} is not supported (sums are)")
        return Sum((*e.indices, *extra), Unary(UnOp.LANE_SUM, body), e.op)

    rhs = walk(s.rhs)
    indices = (*s.indices, *extra) if s.out in layouts else s.indices
    if s.out in layouts and not _has_vector(rhs, layouts):
        raise ProgramError(f"statement '{s.text}': its result has the blocked index {letter} but "
                           "no operand of it does")
    order = (*s.order, *extra) if s.order else ()
    letters = dict(s.letters)
    if extra:
        letters[extra[0]] = extra[0]
    return replace(s, indices=indices, rhs=rhs, letters=letters, order=order)


def _blocked_letter(s: Statement, mode_of: Mapping[str, int]) -> str | None:
    for t, idx in [(s.out, s.indices), *((a.tensor, a.indices) for a in accesses(s.rhs))]:
        if t in mode_of:
            return idx[mode_of[t]]
    return None


def _has_vector(e: IExpr, layouts: Mapping[str, VectorLayout]) -> bool:
    """Whether ``e``'s values are vectors: it reads a blocked tensor outside a lane sum."""
    if isinstance(e, Access):
        return e.tensor in layouts
    if isinstance(e, BinOp):
        return _has_vector(e.lhs, layouts) or _has_vector(e.rhs, layouts)
    if isinstance(e, Unary):
        return e.op is not UnOp.LANE_SUM and _has_vector(e.arg, layouts)
    assert isinstance(e, Sum)
    return _has_vector(e.body, layouts)


# ----------------------------------------------------------------------------- the pass
BLOCK = Option("block", Kind.INDEX_MAP, None,
               "sparsity blocking: the dimension INDEX iterates in blocks of SIZE (a power of two), "
               "each block a vector (docs/compiler.md, Blocking)",
               sources=Source.PROGRAM, low=1, high=MAX_LANES, power_of_two=True, units="entries",
               metavar="INDEX=SIZE", sweep=False)
LANES = Option("lanes", Kind.INT, None,
               "vector lanes of the blocked dimension (a power of two dividing the block size; "
               "default the block size)",
               sources=Source.PROGRAM, low=1, high=MAX_LANES, power_of_two=True, units="lanes",
               metavar="W", sweep=False)


def _run(state: ProgramIR, _: GroupIR) -> Rejected | None:
    opts = state.options
    if not opts.block or state.source is not None:
        return None
    try:
        blocked = block_program(state.program, opts.block, opts.lanes)
    except ProgramError as exc:
        return Rejected(str(exc), ProgramError)
    state.source, state.program = state.program, blocked
    return None


def _text(state: ProgramIR, _: GroupIR) -> str:
    if state.source is None:
        return f"program {state.program.name}: nothing blocked\n"
    lines = [(f"program {state.program.name}: blocked {dict(state.options.block or {})}"
             f" (lanes {state.options.lanes or next(iter((state.options.block or {}).values()))})")]
    for name, d in state.program.decls.items():
        if d.vector is not None:
            lines.append(f"  {name}: mode {d.vector.mode} in blocks of {d.vector.block}, vectors of "
                         f"{d.vector.lanes}; iterated shape {d.shape}")
    lines += [f"  {st}" for st in state.program.statements]
    return "\n".join(lines) + "\n"


PASS = Pass("block", "sparsity blocking: one dimension cut into blocks whose entries become vector "
            "lanes (block={index: size}; nothing otherwise)", "Program", "Program", _run, _text,
            per_group=False, options=(BLOCK, LANES))
