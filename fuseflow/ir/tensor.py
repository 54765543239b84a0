"""Sparse tensor storage: per-level formats in a mode order.

A tensor of order ``n`` stores its modes in ``mode_order`` (level ``l`` holds mode
``mode_order[l]``).  Each level is

* dense (only its dimension),
* compressed (``seg`` and ``crd`` arrays, as in CSR: the coordinates of a fibre increase
  strictly),
* compressed with non-unique coordinates (``seg`` and ``crd``; the coordinates of a fibre only
  never decrease: one position per stored entry below it), or
* singleton (``crd`` only: exactly one coordinate per parent position, no ``seg``).

Values sit in ``vals``, one per position of the last level.  CSR is
``formats=(DENSE, COMPRESSED)``, CSC the same with ``mode_order=(1, 0)``, DCSR is
``(COMPRESSED, COMPRESSED)`` and COO is ``(COMPRESSED_NONUNIQUE, SINGLETON)`` (order ``n``: one
non-unique level and ``n - 1`` singletons).  A non-unique level is followed by singleton
levels only, and a singleton level follows a non-unique or singleton one.  Entries of COO
levels are sorted in storage order; a coordinate stored twice (a duplicate) is summed, as
scipy does: by :meth:`TensorData.to_dense` and by the compiler's graphs.

Block formats (:class:`BlockFormat`) store a tensor as dense blocks under sparse outer levels:
the outer levels hold the block coordinates (any formats), the inner levels the dense blocks.
The stored tensor is an ordinary higher-order :class:`TensorData` (what the simulators load);
its ``blocking`` records the original shape and the block format, so :meth:`TensorData.to_dense`
gives the original array back.  See :class:`BlockFormat` for the level layout.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

__all__ = ["COO", "CSC", "CSR", "DCSR", "DENSE2", "BlockFormat", "Blocking", "Format", "TensorData",
           "TensorFormat", "bcsr", "block_dcsr", "row_blocked"]


class Format(enum.Enum):
    DENSE = "dense"
    COMPRESSED = "compressed"
    COMPRESSED_NONUNIQUE = "compressed_nonunique"  # seg + crd, coordinates may repeat
    SINGLETON = "singleton"  # crd only: one coordinate per parent position

    @classmethod
    def parse(cls, text: str | Format) -> Format:
        if isinstance(text, Format):
            return text
        aliases = {"d": cls.DENSE, "dense": cls.DENSE, "c": cls.COMPRESSED, "compressed": cls.COMPRESSED,
                   "s": cls.COMPRESSED, "sparse": cls.COMPRESSED,
                   "n": cls.COMPRESSED_NONUNIQUE, "compressed_nonunique": cls.COMPRESSED_NONUNIQUE,
                   "compressed-nonunique": cls.COMPRESSED_NONUNIQUE, "nonunique": cls.COMPRESSED_NONUNIQUE,
                   "1": cls.SINGLETON, "singleton": cls.SINGLETON}
        try:
            return aliases[text.lower()]
        except (KeyError, AttributeError):
            raise ValueError(f"unknown level format {text!r}: use 'dense' ('d'), 'compressed' ('c'), "
                             "'compressed_nonunique' ('n') or 'singleton' ('1')") from None

    @property
    def letter(self) -> str:
        """The one-letter name (``d``, ``c``, ``n``, ``1``) used in per-level format strings."""
        return _LETTERS[self]

    @property
    def has_seg(self) -> bool:
        """The level stores a ``seg`` array (compressed, unique or not)."""
        return self is Format.COMPRESSED or self is Format.COMPRESSED_NONUNIQUE

    @property
    def has_crd(self) -> bool:
        """The level stores a ``crd`` array (every level but a dense one)."""
        return self is not Format.DENSE

    @property
    def unique(self) -> bool:
        """Within a fibre each coordinate appears at most once (false for a non-unique level)."""
        return self is not Format.COMPRESSED_NONUNIQUE


_LETTERS = {Format.DENSE: "d", Format.COMPRESSED: "c", Format.COMPRESSED_NONUNIQUE: "n", Format.SINGLETON: "1"}


@dataclass(frozen=True)
class TensorFormat:
    """Per-level formats plus the mode order (storage order of the modes)."""

    levels: tuple[Format, ...]
    mode_order: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(Format.parse(f) for f in self.levels))
        if not self.mode_order:
            object.__setattr__(self, "mode_order", tuple(range(len(self.levels))))
        if sorted(self.mode_order) != list(range(len(self.levels))):
            raise ValueError(
                f"mode order {self.mode_order} is not a permutation of 0..{len(self.levels) - 1}"
            )
        for lvl, f in enumerate(self.levels):
            above = self.levels[lvl - 1] if lvl else None
            if f is Format.SINGLETON and above not in (Format.COMPRESSED_NONUNIQUE, Format.SINGLETON):
                raise ValueError(
                    f"level {lvl} is singleton, but "
                    + (f"level {lvl - 1} above it is {above.value}" if above else "it is the first level")
                    + ": a singleton level must follow a compressed_nonunique or singleton level (COO)")
            if above in (Format.COMPRESSED_NONUNIQUE, Format.SINGLETON) and f is not Format.SINGLETON:
                raise ValueError(
                    f"level {lvl} is {f.value} under the {above.value} level {lvl - 1}: only singleton "
                    "levels may follow a compressed_nonunique level (COO)")

    @property
    def order(self) -> int:
        return len(self.levels)

    @property
    def coo(self) -> bool:
        """Some level is non-unique (COO-style levels)."""
        return Format.COMPRESSED_NONUNIQUE in self.levels

    def __str__(self) -> str:
        lv = ",".join(f.letter for f in self.levels)
        if self.mode_order == tuple(range(self.order)):
            return f"[{lv}]"
        return f"[{lv}]@{''.join(map(str, self.mode_order))}"

    def to_json(self) -> dict:
        return {"levels": [f.value for f in self.levels], "mode_order": list(self.mode_order)}

    @classmethod
    def from_json(cls, d: dict) -> TensorFormat:
        return cls(tuple(d["levels"]), tuple(d["mode_order"]))


CSR = TensorFormat((Format.DENSE, Format.COMPRESSED))
CSC = TensorFormat((Format.DENSE, Format.COMPRESSED), (1, 0))
DCSR = TensorFormat((Format.COMPRESSED, Format.COMPRESSED))
DENSE2 = TensorFormat((Format.DENSE, Format.DENSE))
COO = TensorFormat((Format.COMPRESSED_NONUNIQUE, Format.SINGLETON))


def coo_format(order: int, mode_order: tuple[int, ...] = ()) -> TensorFormat:
    """COO of order ``order``: one non-unique compressed level, then ``order - 1`` singletons."""
    return TensorFormat((Format.COMPRESSED_NONUNIQUE,) + (Format.SINGLETON,) * (order - 1), mode_order)


MAX_BLOCK = 1 << 16  # the largest block size of one mode


def _pow2(n: int) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n & (n - 1) == 0


@dataclass(frozen=True)
class BlockFormat:
    """A block format: a tensor of order ``n`` cut into dense blocks of ``block[d]`` entries
    along mode ``d`` (a power of two; 1 leaves the mode unblocked), stored as

    * ``n`` **outer** levels, one per mode in ``outer.mode_order``, with the formats of
      ``outer.levels``: the block coordinates (mode ``d`` of extent ``shape[d] / block[d]``);
    * one dense **inner** level per blocked mode (``block[d] > 1``), in the same mode order,
      of extent ``block[d]``: the entries of a block, row-major;
    * when ``lanes`` (a power of two) is below the innermost block size ``b``, that last inner
      level is split into two dense levels of extents ``b / lanes`` and ``lanes``, so the
      innermost stored level has exactly ``lanes`` entries (the values a ``lanes``-wide vector
      load reads at once: ``vals[ref * lanes + l]``).

    A block is stored when any of its entries is non-zero (:meth:`TensorData.from_blocks`) or
    when a block mask says so (:meth:`TensorData.from_block_mask`).  BCSR with ``r x c`` blocks
    is ``BlockFormat(CSR, (r, c))`` (levels: block row dense, block column compressed, block
    rows dense, block columns dense); the row-blocked format of BigBird masks is
    ``BlockFormat(CSR, (1, c))`` (row dense, block column compressed, block columns dense).
    """

    outer: TensorFormat
    block: tuple[int, ...]
    lanes: int = 0  # 0: the innermost block size (no split)

    def __post_init__(self) -> None:
        object.__setattr__(self, "block", tuple(self.block))
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    def problems(self) -> list[str]:
        """What is wrong with the format (block sizes, lanes), in words."""
        if len(self.block) != self.outer.order:
            return [f"{len(self.block)} block sizes {list(self.block)} for a format of order {self.outer.order}"]
        out = [f"block size {b!r} of mode {d} is not a power of two (1 to {MAX_BLOCK})"
               for d, b in enumerate(self.block) if not _pow2(b) or b > MAX_BLOCK]
        if out:
            return out
        inner = self.inner_modes
        if self.lanes:
            last = self.block[inner[-1]] if inner else 1
            if not _pow2(self.lanes) or self.lanes > last:
                out.append(f"lanes={self.lanes!r} must be a power of two that divides the innermost block "
                           f"size {last}")
        return out

    @property
    def order(self) -> int:
        return self.outer.order

    @property
    def inner_modes(self) -> tuple[int, ...]:
        """The blocked modes in storage order (one inner level each)."""
        return tuple(d for d in self.outer.mode_order if self.block[d] > 1)

    @property
    def vector_lanes(self) -> int:
        """The extent of the innermost stored level when it is a block level (1 unblocked)."""
        inner = self.inner_modes
        return self.lanes or (self.block[inner[-1]] if inner else 1)

    def stored(self) -> TensorFormat:
        """The format of the stored (higher-order) tensor."""
        n_inner = len(self.inner_modes) + (1 if self._split() else 0)
        return TensorFormat((*self.outer.levels, *(Format.DENSE,) * n_inner))

    def _split(self) -> bool:
        inner = self.inner_modes
        return bool(inner) and self.vector_lanes < self.block[inner[-1]]

    def grid(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The block grid of a tensor of ``shape`` (padded to whole blocks), in mode order."""
        return tuple(-(-s // b) for s, b in zip(shape, self.block))

    def stored_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the stored tensor of an original ``shape``."""
        grid = self.grid(shape)
        inner = [self.block[d] for d in self.inner_modes]
        if self._split():
            inner[-1:] = [inner[-1] // self.vector_lanes, self.vector_lanes]
        return (*(grid[d] for d in self.outer.mode_order), *inner)

    def __str__(self) -> str:
        lanes = f" lanes {self.lanes}" if self.lanes else ""
        return f"{self.outer} blocks {'x'.join(map(str, self.block))}{lanes}"

    def to_json(self) -> dict:
        return {"outer": self.outer.to_json(), "block": list(self.block), "lanes": self.lanes}

    @classmethod
    def from_json(cls, d: dict) -> BlockFormat:
        return cls(TensorFormat.from_json(d["outer"]), tuple(d["block"]), int(d.get("lanes", 0)))

    # -------------------------------------------------------------- array layout
    def to_stored(self, array: np.ndarray) -> np.ndarray:
        """A dense array whose shape is a whole number of blocks, laid out as the stored tensor."""
        n, b = array.ndim, self.block
        a = array.reshape([x for d in range(n) for x in (array.shape[d] // b[d], b[d])])
        order = self.outer.mode_order
        axes = [2 * d for d in order] + [2 * d + 1 for d in order if b[d] > 1]
        axes += [2 * d + 1 for d in order if b[d] == 1]  # extents 1: dropped by the reshape
        return a.transpose(axes).reshape(self.stored_shape(array.shape))

    def from_stored(self, stored: np.ndarray, padded: tuple[int, ...]) -> np.ndarray:
        """Inverse of :meth:`to_stored` for an original array of the (whole-block) shape ``padded``."""
        b, order = self.block, self.outer.mode_order
        grid = self.grid(padded)
        unit = [d for d in order if b[d] == 1]
        a = stored.reshape([grid[d] for d in order] + [b[d] for d in order if b[d] > 1] + [1] * len(unit))
        axes = [2 * d for d in order] + [2 * d + 1 for d in order if b[d] > 1] + [2 * d + 1 for d in unit]
        return a.transpose(np.argsort(axes)).reshape(padded)


def bcsr(block: int | tuple[int, int], lanes: int = 0) -> BlockFormat:
    """BCSR: ``r x c`` blocks (``block`` an int for square ones) under a dense block row and a
    compressed block column."""
    r, c = (block, block) if isinstance(block, int) else block
    return BlockFormat(CSR, (r, c), lanes)


def row_blocked(block: int, lanes: int = 0) -> BlockFormat:
    """Only the column dimension blocked: row dense, block column compressed, block columns
    dense (the BigBird attention masks' format)."""
    return BlockFormat(CSR, (1, block), lanes)


def block_dcsr(block: int | tuple[int, int], lanes: int = 0) -> BlockFormat:
    """BCSR with a compressed block row too (DCSR outer levels: empty block rows not stored)."""
    r, c = (block, block) if isinstance(block, int) else block
    return BlockFormat(DCSR, (r, c), lanes)


@dataclass(frozen=True)
class Blocking:
    """The record a blocked :class:`TensorData` keeps: its original shape and block format."""

    fmt: BlockFormat
    shape: tuple[int, ...]

    @property
    def padded(self) -> tuple[int, ...]:
        """The original shape rounded up to whole blocks."""
        return tuple(g * b for g, b in zip(self.fmt.grid(self.shape), self.fmt.block))

    def to_json(self) -> dict:
        return {**self.fmt.to_json(), "shape": list(self.shape)}

    @classmethod
    def from_json(cls, d: dict) -> Blocking:
        return cls(BlockFormat.from_json(d), tuple(int(s) for s in d["shape"]))


def _blocked_input(array: np.ndarray, fmt: BlockFormat, name: str, pad: bool) -> np.ndarray:
    """``array`` checked against ``fmt`` (order, whole blocks) and zero-padded to whole blocks
    when ``pad``; errors name the tensor."""
    if not isinstance(fmt, BlockFormat):
        raise TypeError(f"tensor {name!r}: expected a BlockFormat, got {fmt!r}")
    if array.ndim != fmt.order:
        raise ValueError(f"tensor {name!r}: an array of order {array.ndim} for block format {fmt} of "
                         f"order {fmt.order}")
    short = [(d, s, b) for d, (s, b) in enumerate(zip(array.shape, fmt.block)) if s % b]
    if short and not pad:
        d, s, b = short[0]
        raise ValueError(f"tensor {name!r}: dimension {d} of size {s} is not a multiple of its block size "
                         f"{b}; pad it (pad=True pads with zeros to whole blocks)")
    if short:
        widths = [(0, -s % b) for s, b in zip(array.shape, fmt.block)]
        array = np.pad(array, widths)
    return array


@dataclass
class TensorData:
    """The level arrays of one tensor.

    ``seg[l]``/``crd[l]`` are set for compressed levels (``None`` for dense ones); a singleton
    level has ``crd[l]`` only (``seg[l]`` is ``None``).
    """

    shape: tuple[int, ...]
    fmt: TensorFormat
    seg: list[np.ndarray | None] = field(default_factory=list)
    crd: list[np.ndarray | None] = field(default_factory=list)
    vals: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # a blocked tensor (shape / fmt are the stored tensor's): its original shape and block format
    blocking: Blocking | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dense(cls, array: np.ndarray, fmt: TensorFormat) -> TensorData:
        array = np.asarray(array)
        if array.ndim != fmt.order:
            raise ValueError(f"array of order {array.ndim} does not match format {fmt} of order {fmt.order}")
        stored = np.transpose(array, fmt.mode_order)
        return cls._from_present(stored, stored != 0, fmt, tuple(array.shape))

    @classmethod
    def _from_present(cls, stored: np.ndarray, present: np.ndarray, fmt: TensorFormat,
                      shape: tuple[int, ...]) -> TensorData:
        """The level arrays of ``stored`` (storage order) keeping the entries ``present`` marks
        (and, under dense levels, every entry of their fibers)."""
        dims = stored.shape
        nz = np.argwhere(present)  # lexicographically sorted in storage order
        prefix = np.zeros((1, 0), dtype=np.int64)
        segs: list[np.ndarray | None] = []
        crds: list[np.ndarray | None] = []
        for lvl, f in enumerate(fmt.levels):
            d = dims[lvl]
            if f is Format.DENSE:
                n = prefix.shape[0]
                prefix = np.concatenate(
                    [np.repeat(prefix, d, axis=0), np.tile(np.arange(d), n)[:, None]], axis=1
                )
                segs.append(None)
                crds.append(None)
                continue
            if f is Format.SINGLETON:  # one position per entry, as the non-unique level above
                segs.append(None)
                crds.append(nz[:, lvl].astype(np.int64))
                prefix = nz[:, : lvl + 1]
                continue
            if f is Format.COMPRESSED_NONUNIQUE:  # one position per stored entry below
                child = nz[:, : lvl + 1]
            else:
                child = np.unique(nz[:, : lvl + 1], axis=0) if nz.size else np.zeros((0, lvl + 1), np.int64)
            # keep only children whose parent position exists (always true, parents are supersets)
            parent_lin = _ravel(prefix, dims[:lvl])
            child_parent = np.searchsorted(parent_lin, _ravel(child[:, :lvl], dims[:lvl]))
            counts = np.bincount(child_parent, minlength=prefix.shape[0])
            segs.append(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
            crds.append(child[:, lvl].astype(np.int64))
            prefix = child
        vals = stored[tuple(prefix.T)] if prefix.shape[1] else stored.reshape(1)
        return cls(shape, fmt, segs, crds, np.asarray(vals))

    @classmethod
    def from_scipy(cls, matrix, fmt: TensorFormat) -> TensorData:
        """A matrix from a ``scipy.sparse`` matrix without a dense copy: CSR (dense, compressed)
        or DCSR (compressed, compressed) levels in either mode order, or COO (entries sorted in
        storage order, duplicates summed and explicit zeros dropped, as scipy's
        ``sum_duplicates`` / ``eliminate_zeros``); other formats through :meth:`from_dense`."""
        if fmt.order == 2 and fmt.levels == COO.levels:
            m = sp.coo_array(matrix if fmt.mode_order == (0, 1) else matrix.T).copy()
            m.sum_duplicates()
            m.eliminate_zeros()
            rows, cols = np.asarray(m.coords[0], np.int64), np.asarray(m.coords[1], np.int64)
            order = np.lexsort((cols, rows))
            return cls(tuple(matrix.shape), fmt, [np.array([0, len(order)], np.int64), None],
                       [rows[order], cols[order]], np.asarray(m.data)[order])
        if fmt.order != 2 or fmt.levels[1] is not Format.COMPRESSED:
            return cls.from_dense(matrix.toarray(), fmt)
        m = (matrix.tocsr() if fmt.mode_order == (0, 1) else matrix.T.tocsr()).copy()
        m.sum_duplicates()
        m.eliminate_zeros()
        m.sort_indices()
        seg, crd = m.indptr.astype(np.int64), m.indices.astype(np.int64)
        vals = np.asarray(m.data)
        if fmt.levels[0] is Format.DENSE:
            return cls(tuple(matrix.shape), fmt, [None, seg], [None, crd], vals)
        rows = np.flatnonzero(np.diff(seg)).astype(np.int64)  # the non-empty rows
        return cls(tuple(matrix.shape), fmt, [np.array([0, len(rows)], np.int64),
                                              np.r_[seg[rows], seg[-1]].astype(np.int64)],
                   [rows, crd], vals)

    # ------------------------------------------------------------------ block formats
    @classmethod
    def from_blocks(cls, array, fmt: BlockFormat, *, name: str = "tensor", pad: bool = False) -> TensorData:
        """A dense ``array`` (of its original shape) in block format ``fmt``: a block is stored
        when any of its entries is non-zero.  Each dimension must be a whole number of blocks,
        or ``pad=True`` pads with zeros to whole blocks (``to_dense`` crops them again).
        Errors name the tensor ``name``."""
        fmt = _named(fmt, name)
        a = np.asarray(array)
        padded = _blocked_input(a, fmt, name, pad)
        stored = fmt.to_stored(padded)
        td = cls._from_present(stored, stored != 0, fmt.stored(), tuple(stored.shape))
        td.blocking = Blocking(fmt, tuple(a.shape))
        return td

    @classmethod
    def from_block_mask(cls, mask, values, fmt: BlockFormat, *, name: str = "tensor",
                        pad: bool = False) -> TensorData:
        """The blocks that the boolean ``mask`` (one entry per block, over the block grid in mode
        order) marks, with ``values`` either a dense array of the original shape (entries
        outside the marked blocks must be zero) or the marked blocks' entries stacked, shape
        ``(blocks marked, *fmt.block)``, in row-major order of the mask.  A marked block is
        stored even when its values are all zero."""
        fmt = _named(fmt, name)
        mask = np.asarray(mask)
        vals = np.asarray(values)
        if mask.dtype != bool:
            raise ValueError(f"tensor {name!r}: the block mask must be a boolean array, got {mask.dtype}")
        if vals.ndim == fmt.order + 1 and vals.shape[1:] == fmt.block:
            return cls._from_stacked(mask, vals, fmt, name)
        padded = _blocked_input(vals, fmt, name, pad)
        grid = fmt.grid(padded.shape)
        if mask.shape != grid:
            raise ValueError(f"tensor {name!r}: block mask of shape {mask.shape}, but a {'x'.join(map(str, vals.shape))} "
                             f"tensor in {'x'.join(map(str, fmt.block))} blocks has a block grid of {grid}")
        present = mask
        for d, b in enumerate(fmt.block):
            present = np.repeat(present, b, axis=d)
        outside = np.argwhere((padded != 0) & ~present)
        if outside.size:
            at = tuple(int(x) for x in outside[0])
            raise ValueError(f"tensor {name!r}: entry {at} = {padded[at]} is non-zero but its block "
                             f"{tuple(i // b for i, b in zip(at, fmt.block))} is not in the mask")
        stored = fmt.to_stored(padded)
        td = cls._from_present(stored, fmt.to_stored(present), fmt.stored(), tuple(stored.shape))
        td.blocking = Blocking(fmt, tuple(vals.shape))
        return td

    @classmethod
    def _from_stacked(cls, mask: np.ndarray, blocks: np.ndarray, fmt: BlockFormat, name: str) -> TensorData:
        """:meth:`from_block_mask` with the marked blocks stacked."""
        if mask.ndim != fmt.order:
            raise ValueError(f"tensor {name!r}: block mask of order {mask.ndim} for block format {fmt}")
        count = int(mask.sum())
        if blocks.shape[0] != count:
            raise ValueError(f"tensor {name!r}: {blocks.shape[0]} stacked blocks for a mask that marks {count}")
        shape = tuple(g * b for g, b in zip(mask.shape, fmt.block))
        dense = np.zeros(shape, dtype=blocks.dtype)
        for block, at in zip(blocks, np.argwhere(mask)):
            dense[tuple(slice(i * b, (i + 1) * b) for i, b in zip(at, fmt.block))] = block
        return cls.from_block_mask(mask, dense, fmt, name=name)

    @classmethod
    def from_bsr(cls, matrix, fmt: BlockFormat | TensorFormat = CSR, *, name: str = "tensor",
                 lanes: int = 0) -> TensorData:
        """A ``scipy.sparse`` BSR matrix (its ``blocksize``, stored blocks kept, zero ones too)
        under outer levels ``fmt`` (a ``TensorFormat`` of order 2: CSR or DCSR, row-major), or
        a ``BlockFormat`` whose block sizes must be the matrix's.  No dense copy."""
        m = sp.bsr_array(matrix)
        r, c = m.blocksize
        bf = fmt if isinstance(fmt, BlockFormat) else BlockFormat(fmt, (r, c), lanes)
        bf = _named(bf, name)
        if bf.block != (r, c):
            raise ValueError(f"tensor {name!r}: a BSR matrix of {r}x{c} blocks for block format {bf}")
        if bf.outer.mode_order != (0, 1) or bf.outer.levels[1] is not Format.COMPRESSED:
            return cls.from_block_mask(_bsr_mask(m), m.toarray(), bf, name=name)
        m = m.copy()
        m.sort_indices()
        seg, crd = m.indptr.astype(np.int64), m.indices.astype(np.int64)
        vals = np.asarray(m.data).reshape(-1)
        stored = bf.stored_shape(m.shape)
        blocking = Blocking(bf, tuple(m.shape))
        if bf.outer.levels[0] is Format.DENSE:
            return cls(stored, bf.stored(), [None, seg] + [None] * (bf.stored().order - 2),
                       [None, crd] + [None] * (bf.stored().order - 2), vals, blocking)
        rows = np.flatnonzero(np.diff(seg)).astype(np.int64)
        segs = [np.array([0, len(rows)], np.int64), np.r_[seg[rows], seg[-1]].astype(np.int64)]
        return cls(stored, bf.stored(), segs + [None] * (bf.stored().order - 2),
                   [rows, crd] + [None] * (bf.stored().order - 2), vals, blocking)

    def to_bsr(self) -> sp.bsr_array:
        """A blocked matrix (row-major outer levels) as a ``scipy.sparse`` BSR array with its
        stored blocks (zero ones too), of the padded shape (whole blocks)."""
        b = self.blocking
        if b is None or b.fmt.order != 2 or b.fmt.outer.mode_order != (0, 1):
            raise ValueError("to_bsr: a matrix in a block format with row-major outer levels is needed, "
                             f"this tensor is {b.fmt if b else self.fmt}")
        prefix, vals = self._stored_coords()
        r, c = b.fmt.block
        per_block = r * c
        blocks = prefix[::per_block, :2]  # the outer coordinates of each stored block, in order
        counts = np.bincount(blocks[:, 0], minlength=b.fmt.grid(b.shape)[0])
        indptr = np.concatenate([[0], np.cumsum(counts)])
        data = np.asarray(vals).reshape(-1, r, c)
        return sp.bsr_array((data, blocks[:, 1], indptr), shape=b.padded, blocksize=(r, c))

    def stored_dense(self, dtype=None) -> np.ndarray:
        """The stored tensor as a dense array of its stored shape (for a blocked tensor, the
        higher-order array of blocks; otherwise :meth:`to_dense`)."""
        stored_shape = tuple(self.shape[m] for m in self.fmt.mode_order)
        prefix, vals = self._stored_coords()
        out = np.zeros(stored_shape, dtype=dtype or (vals.dtype if vals.size else np.int64))
        if not stored_shape:  # a scalar: its one stored value
            out[()] = vals[0]
            return out
        if self.fmt.coo:  # a coordinate stored twice is summed
            np.add.at(out, tuple(prefix.T), vals)
        else:
            out[tuple(prefix.T)] = vals
        inverse = np.argsort(self.fmt.mode_order)
        return np.transpose(out, inverse)

    def _stored_coords(self) -> tuple[np.ndarray, np.ndarray]:
        """The storage-order coordinates of every stored position (``positions × order``) and
        their values."""
        stored_shape = tuple(self.shape[m] for m in self.fmt.mode_order)
        prefix = np.zeros((1, 0), dtype=np.int64)
        for lvl, f in enumerate(self.fmt.levels):
            d = stored_shape[lvl]
            if f is Format.DENSE:
                n = prefix.shape[0]
                prefix = np.concatenate(
                    [np.repeat(prefix, d, axis=0), np.tile(np.arange(d), n)[:, None]], axis=1
                )
            elif f is Format.SINGLETON:
                crd = np.asarray(self.crd[lvl])
                if len(crd) != prefix.shape[0]:
                    raise ValueError(
                        f"level {lvl}: singleton crd has {len(crd)} entries, expected {prefix.shape[0]}"
                    )
                prefix = np.concatenate([prefix, crd[:, None]], axis=1)
            else:
                seg, crd = np.asarray(self.seg[lvl]), np.asarray(self.crd[lvl])
                if len(seg) != prefix.shape[0] + 1:
                    raise ValueError(
                        f"level {lvl}: seg has {len(seg)} entries, expected {prefix.shape[0] + 1}"
                    )
                counts = np.diff(seg)
                prefix = np.concatenate([np.repeat(prefix, counts, axis=0), crd[: seg[-1], None]], axis=1)
        vals = np.asarray(self.vals)
        if len(vals) < prefix.shape[0]:
            raise ValueError(f"vals has {len(vals)} entries, expected {prefix.shape[0]}")
        return prefix, vals[: prefix.shape[0]]

    def to_dense(self, dtype=None) -> np.ndarray:
        """The tensor as a dense array (a blocked tensor: of its original, unblocked shape)."""
        out = self.stored_dense(dtype)
        b = self.blocking
        if b is None:
            return out
        full = b.fmt.from_stored(out, b.padded)
        return full[tuple(slice(0, s) for s in b.shape)]

    def to_scipy(self) -> sp.csr_array:
        """A matrix as a ``scipy.sparse`` CSR array of its non-zero entries (no dense copy;
        duplicates of a COO matrix summed; a blocked matrix through its blocks)."""
        b = self.blocking
        if b is not None:
            if b.fmt.order != 2:
                raise ValueError(f"to_scipy: a tensor of order {b.fmt.order} is not a matrix")
            if b.fmt.outer.mode_order == (0, 1):
                m = sp.csr_array(self.to_bsr())
                m = sp.csr_array(m[: b.shape[0], : b.shape[1]])
            else:
                m = sp.csr_array(self.to_dense())
            m.eliminate_zeros()
            m.sort_indices()
            return m
        if self.fmt.order != 2:
            raise ValueError(f"to_scipy: a tensor of order {self.fmt.order} is not a matrix")
        prefix, vals = self._stored_coords()
        keep = vals != 0
        coords = np.empty_like(prefix)
        coords[:, list(self.fmt.mode_order)] = prefix  # storage order -> mode order
        m = sp.csr_array((vals[keep], (coords[keep, 0], coords[keep, 1])), shape=self.shape)
        if self.fmt.coo:  # duplicates were summed: drop sums that cancelled
            m.eliminate_zeros()
        m.sort_indices()
        return m

    def convert(self, fmt: TensorFormat | BlockFormat, *, pad: bool = False) -> TensorData:
        """The same tensor in another format; a matrix goes through ``scipy.sparse`` when the
        new format is sparse (CSR / CSC / DCSR / DCSC / COO), so it is never made dense.  A
        ``BlockFormat`` blocks the tensor (a blocked one is unblocked first), a ``TensorFormat``
        of a blocked tensor's original order unblocks it."""
        if isinstance(fmt, BlockFormat):
            if self.blocking is not None and self.blocking.fmt == fmt:
                return self
            order = self.blocking.fmt.order if self.blocking else self.fmt.order
            if order == 2 and fmt.outer.mode_order == (0, 1) and not pad and \
                    all(s % b == 0 for s, b in zip(self.blocking.shape if self.blocking else self.shape, fmt.block)):
                bsr = sp.bsr_array(self.to_scipy(), blocksize=fmt.block)
                return TensorData.from_bsr(bsr, fmt)
            return TensorData.from_blocks(self.to_dense(), fmt, pad=pad)
        if self.blocking is not None:
            return TensorData.from_array(self.to_scipy() if self.blocking.fmt.order == 2 else self.to_dense(), fmt)
        if fmt == self.fmt:
            return self
        if fmt.order == 2 and self.fmt.order == 2 and (fmt.levels[1] is Format.COMPRESSED
                                                       or fmt.levels == COO.levels):
            return TensorData.from_scipy(self.to_scipy(), fmt)
        return TensorData.from_dense(self.to_dense(), fmt)

    @classmethod
    def from_array(cls, value, fmt: TensorFormat) -> TensorData:
        """:meth:`from_scipy` for a ``scipy.sparse`` matrix, :meth:`from_dense` otherwise."""
        if sp.issparse(value):
            return cls.from_scipy(value, fmt)
        return cls.from_dense(np.asarray(value), fmt)

    # ------------------------------------------------------------------ arrays by name
    def arrays(self) -> dict[str, list]:
        """Named arrays as loaded into memories: ``"<level>.seg"``, ``"<level>.crd"``, ``"vals"``
        (a singleton level has only ``crd``)."""
        out: dict[str, list] = {}
        for lvl, f in enumerate(self.fmt.levels):
            if f.has_seg:
                out[f"{lvl}.seg"] = [int(x) for x in self.seg[lvl]]
            if f.has_crd:
                out[f"{lvl}.crd"] = [int(x) for x in self.crd[lvl]]
        out["vals"] = self.vals.tolist()
        return out

    @property
    def nnz(self) -> int:
        return len(self.vals)


def _named(fmt: BlockFormat, name: str) -> BlockFormat:
    """``fmt`` checked again, its problems named by tensor ``name``."""
    if not isinstance(fmt, BlockFormat):
        raise TypeError(f"tensor {name!r}: expected a BlockFormat, got {fmt!r}")
    problems = fmt.problems()
    if problems:
        raise ValueError(f"tensor {name!r}: " + "; ".join(problems))
    return fmt


def _bsr_mask(m: sp.bsr_array) -> np.ndarray:
    """The block mask of a BSR matrix's stored blocks."""
    r, c = m.blocksize
    mask = np.zeros((m.shape[0] // r, m.shape[1] // c), dtype=bool)
    rows = np.repeat(np.arange(len(m.indptr) - 1), np.diff(m.indptr))
    mask[rows, m.indices] = True
    return mask


def _ravel(prefix: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    if prefix.shape[1] == 0:
        return np.zeros(prefix.shape[0], dtype=np.int64)
    return np.ravel_multi_index(tuple(prefix.T), dims).astype(np.int64)
