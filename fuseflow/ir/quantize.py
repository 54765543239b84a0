"""Real input values into the datapath's numbers: the range check and the quantisation of a
dense or ``scipy.sparse`` array into a tensor format (models, kernels and graph files alike)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .numerics import Mode, Numerics
from .tensor import TensorData, TensorFormat

__all__ = ["quantized_input", "range_checked"]


def range_checked(name: str, values: np.ndarray, num: Numerics, saturate: bool,
                   saturated: dict[str, int] | None) -> np.ndarray:
    """``values`` (real numbers) after checking that they fit ``num``'s range: out-of-range
    values are an error naming ``name``, or with ``saturate`` are counted into ``saturated``
    (``Numerics.quantize`` then clamps them)."""
    if num.mode is Mode.FLOAT or values.size == 0:
        return values
    lo, hi = num.from_raw(num.lo), num.from_raw(num.hi)
    if num.mode is Mode.FIXED:  # round half up: x lands in range iff lo - h <= x < hi + h
        h = 0.5 / (1 << num.frac)
        out = (values < lo - h) | (values >= hi + h) | ~np.isfinite(values)
    else:
        out = (values < lo) | (values > hi) | ~np.isfinite(values)
    count = int(out.sum())
    if count and not saturate:
        worst = values[out][np.argmax(np.abs(np.nan_to_num(values[out], nan=np.inf)))]
        raise ValueError(f"input {name!r}: {count} value(s) outside the {num} range [{float(lo)!r}, {float(hi)!r}] "
                         f"(e.g. {float(worst)!r}); scale the data, choose wider numerics, or saturate "
                         "explicitly (saturate=True, --saturate) to clamp them and report the count")
    if count and saturated is not None:
        saturated[name] = count
    return np.nan_to_num(values, nan=0.0, posinf=hi, neginf=lo) if count else values


def quantized_input(name: str, value, shape: tuple[int, ...], num: Numerics, fmt: TensorFormat, *,
                    saturate: bool = False, saturated: dict[str, int] | None = None) -> TensorData:
    """An input array (numpy, or ``scipy.sparse``: kept sparse) quantised into its format;
    values outside the numerics' range are an error unless ``saturate`` (then counted into
    ``saturated`` by ``name``)."""
    if tuple(value.shape) != shape:
        raise ValueError(f"input {name!r}: data shape {tuple(value.shape)} != traced shape {shape}")
    if sp.issparse(value):
        q = sp.csr_array(value, dtype=np.float64)
        data = range_checked(name, q.data, num, saturate, saturated)
        q = sp.csr_array((num.quantize(data), q.indices, q.indptr), shape=q.shape)
        return TensorData.from_scipy(q, fmt)
    a = range_checked(name, np.asarray(value, dtype=np.float64), num, saturate, saturated)
    return TensorData.from_dense(num.quantize(a), fmt)


