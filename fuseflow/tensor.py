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
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

__all__ = ["COO", "CSC", "CSR", "DCSR", "DENSE2", "Format", "TensorData", "TensorFormat"]


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

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dense(cls, array: np.ndarray, fmt: TensorFormat) -> TensorData:
        array = np.asarray(array)
        if array.ndim != fmt.order:
            raise ValueError(f"array of order {array.ndim} does not match format {fmt} of order {fmt.order}")
        stored = np.transpose(array, fmt.mode_order)
        dims = stored.shape
        nz = np.argwhere(stored != 0)  # lexicographically sorted in storage order
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
        return cls(tuple(array.shape), fmt, segs, crds, np.asarray(vals))

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

    def to_scipy(self) -> sp.csr_array:
        """A matrix as a ``scipy.sparse`` CSR array of its non-zero entries (no dense copy;
        duplicates of a COO matrix summed)."""
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

    def convert(self, fmt: TensorFormat) -> TensorData:
        """The same tensor in another format; a matrix goes through ``scipy.sparse`` when the
        new format is sparse (CSR / CSC / DCSR / DCSC / COO), so it is never made dense."""
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


def _ravel(prefix: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    if prefix.shape[1] == 0:
        return np.zeros(prefix.shape[0], dtype=np.int64)
    return np.ravel_multi_index(tuple(prefix.T), dims).astype(np.int64)
