"""Common PyTorch idioms of the torch.export frontend beyond the core-ATen op table
(:mod:`fuseflow.models.aten_ops`): attention written with ``F.scaled_dot_product_attention``
(and ``nn.MultiheadAttention``, which calls it), and the ``torch.sparse`` API on sparse inputs.

* ``scaled_dot_product_attention`` is kept whole by the decompositions
  (:data:`fuseflow.models.export_trace.PRESERVED`) and lowered here: scores ``q·kᵀ·scale``, the
  mask, softmax, the product with ``v``.  A boolean mask (or ``is_causal``, or a constant
  additive mask with -inf entries: what ``nn.MultiheadAttention`` makes of its boolean
  ``attn_mask`` / ``key_padding_mask``) makes *masked scores*: only the kept entries are
  computed (a sparse keep-mask; a row with none gives 0, as PyTorch's safe softmax does).  A
  boolean mask input, and a float mask input holding -inf entries (the simulator takes finite
  inputs only), are compiled in as constants (``ir.fixed_inputs``; noted); a finite float mask
  is added to the scores on dataflow.  Dropout (``dropout_p > 0``) and grouped-query attention
  run the whole op on the host.
* While torch.export captures a module, sparse inputs are dense stand-ins (see
  :mod:`fuseflow.models.export_trace`), on which ``torch.sparse.sum`` / ``softmax`` and
  ``.values()`` / ``.indices()`` / ``.crow_indices()`` / ``.col_indices()`` do not exist.
  :class:`SparseIdioms` replaces them during the capture: ``torch.sparse.sum`` is the dense sum
  (the implicit zeros add nothing), ``torch.sparse.softmax`` and the index / value accessors are
  the custom ops ``fuseflow::sparse_softmax`` / ``fuseflow::sparse_part``.  The lowering makes
  the softmax over the stored entries masked scores (dataflow), the index arrays constants of
  the trace (the sparsity pattern is fixed), and ``.values()`` an einsum with sparse 0/1
  selections of the stored coordinates (dataflow).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Self

import numpy as np
import scipy.sparse as sp
import torch

from . import aten_ops as _ops
from .aten_values import _C, _T, _Unsupported
from .ir import FrontendError, MKind

__all__ = ["DIRECT", "SparseIdioms", "scaled_dot_product_attention"]

aten = torch.ops.aten

_PARTS = ("values", "indices", "crow_indices", "col_indices")


# ----------------------------------------------------------------------------- custom ops
def _over_stored(x: torch.Tensor, row_fn) -> torch.Tensor:
    """``row_fn`` over the nonzero entries of ``x`` (the others count as -inf and stay 0)."""
    keep = x != 0
    s = row_fn(torch.where(keep, x, torch.tensor(float("-inf"), dtype=x.dtype)))
    return torch.where(keep, s, torch.zeros((), dtype=x.dtype))


@torch.library.custom_op("fuseflow::sparse_softmax", mutates_args=())
def sparse_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``torch.sparse.softmax`` of the sparse tensor ``x`` stored as dense: over the nonzero
    entries along ``dim`` (the others stay 0)."""
    return _over_stored(x, lambda t: t.softmax(dim))


@sparse_softmax.register_fake
def _(x, dim):
    return torch.empty_like(x)


@torch.library.custom_op("fuseflow::sparse_log_softmax", mutates_args=())
def sparse_log_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``torch.sparse.log_softmax`` of ``x`` stored as dense (over its nonzeros; 0 elsewhere)."""
    return _over_stored(x, lambda t: t.log_softmax(dim))


@sparse_log_softmax.register_fake
def _(x, dim):
    return torch.empty_like(x)


@torch.library.custom_op("fuseflow::sparse_part", mutates_args=())
def sparse_part(x: torch.Tensor, part: str, nnz: int) -> torch.Tensor:
    """``x.values()`` / ``indices()`` / ``crow_indices()`` / ``col_indices()`` of the sparse
    matrix ``x`` stored as dense (its nonzeros in row-major order)."""
    s = x.to_sparse_csr() if part != "indices" else x.to_sparse_coo().coalesce()
    return {"values": s.values, "indices": s.indices, "crow_indices": s.crow_indices,
            "col_indices": s.col_indices}[part]().clone()


@sparse_part.register_fake
def _(x, part, nnz):
    rows = int(x.shape[0]) if x.dim() else 1
    shape = {"values": (nnz,), "indices": (x.dim(), nnz), "crow_indices": (rows + 1,),
             "col_indices": (nnz,)}[part]
    return x.new_empty(shape, dtype=x.dtype if part == "values" else torch.int64)


# ----------------------------------------------------------------------------- capture patches
class SparseIdioms:
    """Within the ``with`` block (torch.export of a module whose sparse tensors are dense
    stand-ins), the ``torch.sparse`` functions and sparse accessors work on the stand-ins and
    record ops the lowering knows.  ``sparse``: the original sparse tensors (inputs,
    parameters, buffers), to know the number of stored entries of a stand-in."""

    def __init__(self, sparse: list[torch.Tensor]) -> None:
        # (shape, number of stored entries) of each sparse tensor, counted before the patches
        self.counts = [(tuple(t.shape), int(t.to_sparse_coo().coalesce()._nnz()))
                       for t in sparse if t.layout != torch.strided]
        self.saved: list[tuple[Any, str, Any]] = []

    def nnz(self, x: torch.Tensor, what: str) -> int:
        counts = {n for shape, n in self.counts if shape == tuple(x.shape)}
        if len(counts) != 1:
            why = "no sparse input" if not counts else "several sparse inputs with different numbers of entries"
            raise FrontendError(f"{what} of a tensor of shape {list(x.shape)}: {why} of that shape (only a "
                                "sparse input's stored entries can be read)")
        return counts.pop()

    def __enter__(self) -> Self:
        if not self.counts:
            return self
        idioms = self

        def part(name: str):
            original = getattr(torch.Tensor, name)

            def accessor(self):
                if self.layout != torch.strided:
                    return original(self)
                return torch.ops.fuseflow.sparse_part(self, name, idioms.nnz(self, f".{name}()"))
            return accessor

        def same(name: str):
            original = getattr(torch.Tensor, name)

            def identity(self, *a, **k):
                return self if self.layout == torch.strided else original(self, *a, **k)
            return identity

        def nnz_of(self):
            return idioms.nnz(self, "._nnz()")

        def ssum(x, dim=None, dtype=None):
            out = x.sum() if dim is None else x.sum(dim)
            return out if dtype is None else out.to(dtype)

        def ssoftmax(x, dim, dtype=None):
            out = torch.ops.fuseflow.sparse_softmax(x, dim)
            return out if dtype is None else out.to(dtype)

        def slog_softmax(x, dim, dtype=None):
            out = torch.ops.fuseflow.sparse_log_softmax(x, dim)
            return out if dtype is None else out.to(dtype)

        patches = [(torch.Tensor, n, part(n)) for n in _PARTS]
        patches += [(torch.Tensor, "_values", part("values")), (torch.Tensor, "_indices", part("indices")),
                    (torch.Tensor, "coalesce", same("coalesce")), (torch.Tensor, "_nnz", nnz_of),
                    (torch.sparse, "sum", ssum), (torch.sparse, "softmax", ssoftmax),
                    (torch.sparse, "log_softmax", slog_softmax)]
        for owner, name, fn in patches:
            self.saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, fn)
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, fn in reversed(self.saved):
            setattr(owner, name, fn)
        self.saved.clear()


# ----------------------------------------------------------------------------- lowering
def _sparse_input(low, x, what: str):
    """The scipy CSR matrix of the sparse input ``x``, or a one-line error."""
    data = low.s.data.get(x.name) if isinstance(x, _T) else None
    if data is None or not hasattr(data, "tocsr") or low.kind_of(x.name) is not MKind.INPUT:
        name = x.name if isinstance(x, _T) else repr(x)
        raise FrontendError(f"{low.src}: {what} of {name}, which is not a sparse input (a torch sparse "
                            "tensor given to the model): only an input's stored entries can be read")
    return data.tocsr()


def _pattern_note(low, name: str, what: str) -> None:
    m = low.s.data[name].tocsr()
    low.patterns.setdefault(name, (m.indptr.copy(), m.indices.copy()))
    note = (f"{name}: its sparsity pattern ({what}) compiled in as a constant (a new pattern needs a new "
            "trace)")
    if note not in low.s.notes:
        low.s.notes.append(note)


def _sparse_softmax(low, x, dim):
    m = _sparse_input(low, x, "torch.sparse.softmax")
    if len(x.shape) != 2:
        raise _Unsupported("torch.sparse.softmax of a tensor that is not a matrix")
    _pattern_note(low, x.name, "torch.sparse.softmax")
    pattern = sp.csr_array((np.ones(m.nnz), m.indices, m.indptr), shape=m.shape)
    over_rows = dim % 2 == 0  # over dim 0: the softmax of each column, on the transpose
    if over_rows:
        x = _ops._permute_to(low, x, [1, 0])
        pattern = sp.csr_array(pattern.T)
    keep = low.const_sparse("pattern", pattern)
    masked = low.emit("masked", MKind.MASK, (keep, x.name), x.shape)
    y = _T(low.emit("softmax", MKind.SOFTMAX, (masked,), x.shape), x.shape, x.keep, x.dtype)
    return _ops._permute_to(low, y, [1, 0]) if over_rows else y


def _sparse_part(low, x, part, nnz):
    m = _sparse_input(low, x, f".{part}()")
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    if part == "values":
        # v[e] = Σ_ij R[i, e] · x[i, j] · C[j, e] with the 0/1 selections of the stored coordinates
        _pattern_note(low, x.name, ".values()")
        sel = _selections(low, np.stack([rows, m.indices]), m.shape)
        return _ops._einsum_node(low, "ie,ij,je->e", [sel[0], _ops._full(low, x, ".values()"), sel[1]], "values")
    _pattern_note(low, x.name, f".{part}()")
    value = {"indices": lambda: np.stack([rows, m.indices]), "crow_indices": lambda: m.indptr,
             "col_indices": lambda: m.indices}[part]()
    return _C(torch.from_numpy(np.ascontiguousarray(value).astype(np.int64)))


def _selections(low, idx: np.ndarray, shape: tuple[int, int]) -> list[_T]:
    """The sparse 0/1 matrices ``R[idx[0, e], e]`` and ``C[idx[1, e], e]`` of coordinates ``idx``."""
    e = idx.shape[1]
    out = []
    for coords, k in ((idx[0], shape[0]), (idx[1], shape[1])):
        name = low.const_sparse("sel", sp.csr_array((np.ones(e), (coords, np.arange(e))), shape=(k, e)))
        out.append(_T(name, (k, e), (0, 1), torch.float64))
    return out


def _coo_tensor(low, sparse_dim, dense_dim, size, indices, values, **kw):
    """``torch.sparse_coo_tensor(indices, values, size)`` of constant indices (the pattern of a
    sparse input, an index list): the dense matrix ``R · diag(values) · Cᵀ`` with the 0/1
    selections ``R[row[e], e]`` and ``C[col[e], e]`` (repeated coordinates add up, as
    PyTorch's ``to_dense``), an einsum over sparse constants on dataflow."""
    if sparse_dim != 2 or dense_dim != 0 or not isinstance(indices, _C) or not isinstance(values, _T):
        raise _Unsupported("a sparse tensor built from indices computed from the input values, or not a matrix")
    idx = indices.value.to(torch.int64).numpy()
    n, m = (int(d) for d in size)
    if (idx < 0).any() or (idx[0] >= n).any() or (idx[1] >= m).any():
        raise FrontendError(f"{low.src}: sparse_coo_tensor: an index is out of range for size {[n, m]}")
    sel = _selections(low, idx, (n, m))
    v = _ops._full(low, values, "sparse tensor values")
    return _ops._einsum_node(low, "ie,e,je->ij", [sel[0], v, sel[1]], "coo_tensor")


def _mask_value(low, mask, is_causal: bool, shape: tuple[int, int]):
    """The attention mask as a constant additive mask (``_C``), a float tensor (``_T``) or
    None; a boolean input with a sparse format annotation stays itself (``("input", _T)``)."""
    if is_causal:
        keep = torch.ones(shape, dtype=torch.bool).tril()
        return _C(torch.zeros(shape, dtype=torch.float64).masked_fill(~keep, float("-inf")))
    if mask is None:
        return None
    if isinstance(mask, _C):
        if mask.value.dtype == torch.bool:
            return _C(torch.zeros(mask.value.shape, dtype=torch.float64).masked_fill(~mask.value, float("-inf")))
        return mask
    if not isinstance(mask, _T):
        raise _Unsupported("an attention mask that is not a tensor")
    if mask.dtype != torch.bool:
        return _float_mask(low, mask)
    if mask.inverted or low.kind_of(mask.name) is not MKind.INPUT:
        raise _Unsupported("a boolean attention mask computed by the model")
    if mask.name in low.s.formats and mask.full and mask.ir_shape == shape:
        return ("input", mask)
    keep = _ops.fixed_bool_input(low, mask)
    return _C(torch.zeros(keep.shape, dtype=torch.float64).masked_fill(~keep, float("-inf")))


def _float_mask(low, mask: _T):
    """A float mask input holding -inf entries (the simulator's inputs are finite) becomes a
    constant of the trace, like a boolean mask; any other float mask is added as it is."""
    if mask.inverted or mask.sqrt or low.kind_of(mask.name) is not MKind.INPUT:
        return mask
    data = low.s.data[mask.name]
    arr = np.asarray(data.toarray() if hasattr(data, "toarray") else data, dtype=np.float64)
    if not np.isneginf(arr).any():
        return mask
    if mask.name not in low.int_inputs:
        low.int_inputs[mask.name] = arr.copy()
        low.s.notes.append(f"{mask.name}: a float attention mask with -inf entries, compiled in as a constant "
                           "(the scores are computed only where it is finite; new mask values need a new trace)")
    view = [mask.shape[a] if a in mask.keep else 1 for a in range(len(mask.shape))]
    return _C(torch.from_numpy(arr.reshape(view)).expand(mask.shape).clone())


def scaled_dot_product_attention(low, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if dropout_p:
        raise _Unsupported("scaled_dot_product_attention with dropout_p > 0 (random)")
    if enable_gqa:
        raise _Unsupported("grouped-query attention (enable_gqa=True)")
    q, k, v = (_ops._full(low, t, "attention operand") for t in (q, k, v))
    if len(k.shape) != len(q.shape):
        raise _Unsupported("attention operands of different orders (broadcast batch axes)")
    mask = _mask_value(low, attn_mask, is_causal, (q.shape[-2], k.shape[-2]))
    s = _ops._matmul(low, q, _ops._transpose(low, k, -2, -1))
    s = _ops._scale(low, s, scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    if isinstance(mask, tuple):
        s = _ops._mask(low, mask[1], s)
    elif isinstance(mask, _C) and _ops.neg_inf_entries(mask):
        s = _ops.masked_add(low, s, mask, safe=True)  # a row without kept entries: 0, as PyTorch
    elif mask is not None:
        s = _ops.binary(low, "add", s, mask)
    p = _ops._softmax(low, s, -1)
    return _ops._matmul(low, p, v)


DIRECT: Mapping[Any, Any] = {
    aten.scaled_dot_product_attention.default: scaled_dot_product_attention,
    torch.ops.fuseflow.sparse_softmax.default: _sparse_softmax,
    torch.ops.fuseflow.sparse_part.default: _sparse_part,
    aten._sparse_coo_tensor_with_dims_and_tensors.default: _coo_tensor,
    aten._sparse_addmm.default: _ops._addmm,  # torch.sparse.addmm
}
