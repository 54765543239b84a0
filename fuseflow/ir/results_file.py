"""A run's output tensors in one ``.npz`` file (``--save`` of ``sim``, ``rtl`` and ``run``).

Every output is saved by its tensor name: a dense one (or one of order other than 2) as its
dense array under ``NAME``; a sparse matrix (a compressed level) as its CSR arrays under
``NAME.data``, ``NAME.indices``, ``NAME.indptr`` and ``NAME.shape``, so no dense copy of a large
sparse result is made.  Values are the real numbers the datapath's words stand for (fixed point
dequantised), integers for the integer datapath.  :func:`load_results` reads the file back
(scipy ``csr_array`` for the sparse ones); ``numpy.load`` reads it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .numerics import Mode, Numerics
from .tensor import Format, TensorData

__all__ = ["load_results", "save_results"]

_CSR = ("data", "indices", "indptr", "shape")


def _real(values: np.ndarray, num: Numerics | None) -> np.ndarray:
    if num is None or num.mode is Mode.INT:
        return np.asarray(values)
    return np.asarray(num.dequantize(np.asarray(values)), dtype=np.float64)


def save_results(path: str | Path, outputs: Mapping[str, TensorData | np.ndarray],
                 numerics: Numerics | None = None) -> Path:
    """Write ``outputs`` (tensor name -> TensorData in the datapath's words, or a dense array of
    real values already) to ``path`` (``.npz`` added when missing); returns the path written."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    if path.parent != Path("") and not path.parent.is_dir():
        raise ValueError(f"--save {str(path)!r}: no directory {str(path.parent)!r}")
    arrays: dict[str, np.ndarray] = {}
    for name, t in outputs.items():
        if isinstance(t, TensorData) and t.fmt.order == 2 and any(f is not Format.DENSE for f in t.fmt.levels):
            m = t.to_scipy()
            arrays.update({f"{name}.data": _real(m.data, numerics), f"{name}.indices": m.indices,
                           f"{name}.indptr": m.indptr, f"{name}.shape": np.asarray(m.shape)})
        else:
            arrays[name] = _real(t.to_dense() if isinstance(t, TensorData) else t, numerics
                                 if isinstance(t, TensorData) else None)
    np.savez(path, **arrays)
    return path


def load_results(path: str | Path) -> dict[str, np.ndarray | sp.csr_array]:
    """The outputs a :func:`save_results` file holds, by tensor name."""
    with np.load(path) as npz:
        files = {k: npz[k] for k in npz.files}
    out: dict[str, np.ndarray | sp.csr_array] = {}
    for key in sorted(files):
        head, _, part = key.rpartition(".")
        if part in _CSR and head and all(f"{head}.{p}" in files for p in _CSR):
            if head not in out:
                out[head] = sp.csr_array((files[f"{head}.data"], files[f"{head}.indices"], files[f"{head}.indptr"]),
                                         shape=tuple(int(s) for s in files[f"{head}.shape"]))
        else:
            out[key] = files[key]
    return out
