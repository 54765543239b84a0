"""Checks of tensor data handed to the simulators: level arrays that do not describe a tensor,
and values that do not fit the datapath's numeric format, are an error naming the tensor, level,
index and value, before any cycle is simulated.  :func:`saturate_inputs` is the explicit
alternative for values out of range: it clamps them and reports how many it clamped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .numerics import Mode, Numerics
from .primitives.base import PrimitiveSpec
from .samml import Graph, GraphError
from .tensor import Format, TensorData
from .tokens import DONE, Control, Token, Vec, format_token

__all__ = ["check_inputs", "primitive_run_problems", "require_valid_inputs", "require_words", "saturate_inputs", "tensor_problems", "value_problems"]


def tensor_problems(self: TensorData) -> list[str]:
    """What is wrong with the level arrays (empty when they are consistent): per compressed
    level, ``seg`` starts at 0, never decreases and ends at ``len(crd)``, has one entry per
    parent position plus one; coordinates lie in the level's dimension and increase strictly
    within each segment (a non-unique level: never decrease); a singleton level has one
    coordinate per parent position, and the entries below a non-unique level are sorted in
    storage order (a repeated coordinate is a duplicate, summed); ``vals`` has one entry per
    stored position and no NaN."""
    out: list[str] = []
    if len(self.shape) != self.fmt.order:
        return [f"shape {tuple(self.shape)} has {len(self.shape)} dimensions, format {self.fmt} {self.fmt.order}"]
    if any(int(d) < 0 for d in self.shape):
        return [f"shape {tuple(self.shape)} has a negative dimension"]
    stored = [int(self.shape[m]) for m in self.fmt.mode_order]
    parents = 1
    run: _Run | None = None  # the fibres of the non-unique level above (COO order checks)
    for lvl, f in enumerate(self.fmt.levels):
        if f is Format.DENSE:
            parents *= stored[lvl]
            continue
        crd, fatal = _level_arrays(self, lvl, f, parents)
        if fatal:
            return [fatal]
        if crd.size and (crd.min() < 0 or crd.max() >= stored[lvl]):
            i = int(np.flatnonzero((crd < 0) | (crd >= stored[lvl]))[0])
            out.append(f"level {lvl}: crd[{i}] = {int(crd[i])} is outside the dimension 0..{stored[lvl] - 1}")
        if f is Format.SINGLETON:
            out += run.add(lvl, crd) if run is not None else []
        else:
            seg = np.asarray(self.seg[lvl])
            out += _order_problem(lvl, seg, crd, f.unique)
            run = None if f.unique else _Run(seg, crd)
        parents = len(crd)
    b = self.blocking
    if b is not None and (b.fmt.stored() != self.fmt or b.fmt.stored_shape(b.shape) != tuple(self.shape)):
        out.append(f"blocked as {b.fmt} of shape {tuple(b.shape)}, but stored as {self.fmt} of shape "
                   f"{tuple(self.shape)} (expected {b.fmt.stored()} of {b.fmt.stored_shape(b.shape)})")
    vals = np.asarray(self.vals)
    if vals.ndim != 1 or len(vals) != parents:
        out.append(f"vals has {vals.size} entries, expected {parents} (one per stored position)")
    elif np.issubdtype(vals.dtype, np.floating) and np.isnan(vals).any():
        out.append(f"vals[{int(np.flatnonzero(np.isnan(vals))[0])}] is NaN")
    return out


def _level_arrays(self: TensorData, lvl: int, f: Format, parents: int) -> tuple[np.ndarray, str]:
    """The ``crd`` array of a stored level, or a problem that stops the checks: missing or
    ill-typed arrays, a ``seg`` (compressed) that does not describe ``parents`` fibres, a
    singleton ``crd`` without one coordinate per parent position."""
    what = "seg/crd arrays" if f.has_seg else "crd array"
    if (lvl >= len(self.crd) or self.crd[lvl] is None
            or f.has_seg and (lvl >= len(self.seg) or self.seg[lvl] is None)):
        return np.zeros(0, np.int64), f"level {lvl} is {f.value} but has no {what}"
    crd = np.asarray(self.crd[lvl])
    seg = np.asarray(self.seg[lvl]) if f.has_seg else np.zeros(1, np.int64)
    if seg.ndim != 1 or crd.ndim != 1 or not (np.issubdtype(seg.dtype, np.integer) or seg.size == 0) \
            or not (np.issubdtype(crd.dtype, np.integer) or crd.size == 0):
        return crd, f"level {lvl}: {'seg and crd' if f.has_seg else 'crd'} must be 1-D integer arrays"
    if not f.has_seg:
        if len(crd) != parents:
            return crd, (f"level {lvl}: the singleton crd has {len(crd)} entries, expected {parents} "
                         "(one per parent position)")
        return crd, ""
    if len(seg) != parents + 1:
        return crd, f"level {lvl}: seg has {len(seg)} entries, expected {parents + 1} (one per parent position, plus one)"
    steps = np.diff(seg)
    if seg[0] != 0 or (steps < 0).any() or seg[-1] != len(crd):
        bad = "seg[0] is not 0" if seg[0] != 0 else (
            f"seg decreases at entry {int(np.flatnonzero(steps < 0)[0]) + 1}" if (steps < 0).any()
            else f"seg ends at {int(seg[-1])}, but crd has {len(crd)} entries")
        return crd, f"level {lvl}: {bad}"
    return crd, ""


def _inside(seg: np.ndarray, n: int) -> np.ndarray:
    """For each pair of consecutive positions ``(p - 1, p)`` of a compressed level with ``n``
    positions: whether both lie in one segment."""
    inside = np.ones(max(n - 1, 0), dtype=bool)
    inside[seg[1:-1][(seg[1:-1] > 0) & (seg[1:-1] < n)] - 1] = False  # segment starts
    return inside


def _order_problem(lvl: int, seg: np.ndarray, crd: np.ndarray, unique: bool) -> list[str]:
    """Coordinates increase strictly within each segment (``unique``), or never decrease."""
    if crd.size < 2:
        return []
    step = np.diff(crd)
    down = np.flatnonzero(((step <= 0) if unique else (step < 0)) & _inside(seg, len(crd)))
    if not down.size:
        return []
    i = int(down[0]) + 1
    how = "does not increase" if unique else "decreases"
    return [f"level {lvl}: crd[{i}] = {int(crd[i])} {how} within its segment (after {int(crd[i - 1])})"]


class _Run:
    """The entries under one non-unique level: the pairs of consecutive positions in one of its
    fibres whose coordinates are equal so far (down to the last singleton level checked); a
    singleton level must not decrease on them (entries sorted in storage order)."""

    def __init__(self, seg: np.ndarray, crd: np.ndarray) -> None:
        self.tied = _inside(seg, len(crd)) & (np.diff(crd) == 0) if crd.size > 1 else np.zeros(0, bool)

    def add(self, lvl: int, crd: np.ndarray) -> list[str]:
        if crd.size < 2:
            return []
        step = np.diff(crd)
        down = np.flatnonzero(self.tied & (step < 0))
        self.tied = self.tied & (step == 0)
        if not down.size:
            return []
        i = int(down[0]) + 1
        return [(f"level {lvl}: crd[{i}] = {int(crd[i])} is below crd[{i - 1}] = {int(crd[i - 1])} under "
                 "equal coordinates above: COO entries must be sorted in storage order")]


@dataclass(frozen=True)
class _Word:
    """The range of the raw words a datapath carries: ``label`` names it in messages."""

    label: str
    lo: int
    hi: int
    real: bool  # float numerics: any finite value

    @classmethod
    def of(cls, num: Numerics | int) -> _Word:
        """For numerics, or for a plain signed word of ``num`` bits (an RTL value width)."""
        if isinstance(num, int):
            return cls(f"{num}-bit value", -(1 << (num - 1)), (1 << (num - 1)) - 1, False)
        if num.mode is Mode.FLOAT:
            return cls(str(num), 0, 0, True)
        return cls(str(num), num.lo, num.hi, False)


def _py(v):
    """A numpy scalar as the Python number it holds (for messages)."""
    return v.item() if isinstance(v, np.generic) else v


def _out_of_range(vals: np.ndarray, word: _Word) -> np.ndarray:
    """The mask of the values outside ``word``'s range (exact for Python ints of any size)."""
    if vals.dtype == object:
        return np.fromiter((not word.lo <= v <= word.hi for v in vals), dtype=bool, count=vals.size)
    return (vals < word.lo) | (vals > word.hi)


def _numeric(vals: np.ndarray) -> np.ndarray | None:
    """``vals`` as a numeric array (Python ints kept exact in an object array), ``None`` if
    they are not numbers."""
    if vals.dtype == object:
        if all(isinstance(v, int) for v in vals):
            return vals
        try:
            return vals.astype(np.float64)
        except (TypeError, ValueError):
            return None
    return vals if np.issubdtype(vals.dtype, np.number) or vals.dtype == np.bool_ else None


def value_problems(self: TensorData, num: Numerics | int, *, integers: bool = True) -> list[str]:
    """What keeps the values of ``self`` from entering a datapath of numerics ``num`` (or a
    plain signed word of ``num`` bits) unchanged: in ``int`` and ``fixed`` mode the values are
    raw hardware words, so each must be a whole number inside the word's range; infinities are
    refused in every mode.  ``integers=False`` lets float values through unchecked (sw_sim
    without explicit numerics computes on them as floats); integer values are range-checked
    either way."""
    word = _Word.of(num)
    raw = np.asarray(self.vals)
    if raw.ndim != 1 or raw.size == 0:
        return []
    vals = _numeric(raw)
    if vals is None:
        return [f"vals have type {raw.dtype}, not numbers"]
    if np.issubdtype(vals.dtype, np.floating):
        bad = np.flatnonzero(np.isinf(vals))
        if bad.size:
            return [f"vals[{int(bad[0])}] is {_py(vals[bad[0]])}: values must be finite"]
        if word.real or not integers:
            return []  # float tokens in an int run without explicit numerics: sw_sim's float pass-through
        frac = np.flatnonzero(vals != np.floor(np.nan_to_num(vals)))
        if frac.size:
            i = int(frac[0])
            return [(f"vals[{i}] = {_py(vals[i])!r} is not a whole number, but the {word.label} datapath "
                     f"carries raw integer words ({frac.size} such value(s)); quantise real numbers with "
                     "Numerics.quantize, or simulate with float numerics")]
    elif word.real or vals.dtype == np.bool_:
        return []
    out = np.flatnonzero(_out_of_range(vals, word))
    if out.size:
        i = int(out[0])
        return [(f"vals[{i}] = {_py(vals[i])} does not fit the {word.label} datapath (raw words "
                 f"{word.lo}..{word.hi}); {out.size} value(s) out of range (saturate explicitly with "
                 "saturate_inputs / --saturate)")]
    return []


def require_words(values, width: int, *, signed: bool, where: str) -> None:
    """A ``ValueError`` naming ``where`` unless every entry of ``values`` is a whole number that
    fits a ``width``-bit word (two's complement when ``signed``): what a memory image loader
    checks before it masks values into words."""
    arr = _numeric(np.asarray(values).ravel())
    if arr is None:
        raise ValueError(f"{where}: entries must be numbers")
    if arr.size == 0:
        return
    if np.issubdtype(arr.dtype, np.floating):
        bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.floor(np.nan_to_num(arr))))
        if bad.size:
            raise ValueError(f"{where}: entry {int(bad[0])} = {_py(arr[bad[0]])!r} is not a whole number")
    word = _Word(f"{width}-bit", -(1 << (width - 1)) if signed else 0,
                 (1 << (width - 1)) - 1 if signed else (1 << width) - 1, False)
    bad = np.flatnonzero(_out_of_range(arr, word))
    if bad.size:
        raise ValueError(f"{where}: entry {int(bad[0])} = {_py(arr[bad[0]])} does not fit a {word.label} "
                         f"{'signed' if signed else 'unsigned'} word ({word.lo}..{word.hi})")


def saturate_inputs(graph: Graph, data: Mapping[str, TensorData],
                    num: Numerics | int) -> tuple[dict[str, TensorData], dict[str, int]]:
    """The explicit saturating mode: ``data`` with every input value outside ``num``'s range
    clamped to the nearest bound, and how many values were clamped per tensor (tensors with
    none are left out).  Non-integral values in an integer datapath are still an error of
    :func:`require_valid_inputs`: saturation is about range, not rounding."""
    word = _Word.of(num)
    if word.real:
        return dict(data), {}
    out, counts = dict(data), {}
    for name in graph.input_tensors():
        td = data.get(name)
        if td is None:
            continue
        raw = np.asarray(td.vals)
        vals = _numeric(raw) if raw.ndim == 1 else None
        if vals is None or vals.size == 0:
            continue
        mask = _out_of_range(vals, word)
        if mask.any():
            clamped = np.asarray([min(max(v, word.lo), word.hi) for v in vals.tolist()], dtype=np.int64) \
                if vals.dtype == object else np.clip(vals, word.lo, word.hi)
            out[name] = TensorData(td.shape, td.fmt, td.seg, td.crd, clamped, td.blocking)
            counts[name] = int(mask.sum())
    return out, counts


def check_inputs(graph: Graph, data: Mapping[str, TensorData], numerics: Numerics | int | None = None,
                 *, integers: bool = True) -> list[str]:
    """Problems of the input tensors of ``graph`` in ``data`` (those present and of the declared
    format; :meth:`Graph.verify` reports missing ones and format mismatches); with ``numerics``
    also their values (:func:`value_problems`)."""
    out = []
    for name in graph.input_tensors():
        td = data.get(name)
        if td is not None and td.fmt == graph.tensors[name].fmt:
            problems = tensor_problems(td)
            if not problems and numerics is not None:
                problems = value_problems(td, numerics, integers=integers)
            out += [f"tensor {name!r}: {p}" for p in problems]
    return out


def require_valid_inputs(graph: Graph, data: Mapping[str, TensorData], numerics: Numerics | int | None = None,
                         *, integers: bool = True) -> None:
    """:meth:`Graph.verify` with ``data``, then :func:`check_inputs`: a :class:`GraphError`
    listing every problem."""
    graph.verify(data)
    problems = check_inputs(graph, data, numerics, integers=integers)
    if problems:
        raise GraphError(f"graph {graph.name!r}: invalid input data:\n  - " + "\n  - ".join(problems))


# keys a single-primitive run passes besides the declared parameters: the memory contents and
# level description a graph would bind from its tensors
RUN_EXTRAS = frozenset({"seg", "crd", "vals", "dim", "format"})


def _lane_problems(spec: PrimitiveSpec, params: Mapping[str, Any], streams: Mapping[str, list[Token]]) -> list[str]:
    """Data tokens that do not have the lanes of their input port (a vector of that many lanes
    on a vector port, a number on a one-lane port), the first one per port."""
    try:
        ins = spec.port_types({k: v for k, v in params.items() if k in spec.hints()})[0]
    except (KeyError, TypeError, ValueError, AttributeError):
        return []  # parameters the model refuses when it is built
    out = []
    for port, toks in streams.items():
        lanes = ins[port].lanes if port in ins else 1
        for i, t in enumerate(toks):
            if isinstance(t, Control):
                continue
            if (len(t) if isinstance(t, Vec) else 1) != lanes:
                out.append(f"input {port!r}: token {i} ({format_token(t)}) is not a value of {lanes} "
                           f"lane{'s' * (lanes > 1)} (the port carries {ins.get(port, lanes)})")
                break
    return out


def primitive_run_problems(spec: PrimitiveSpec, params: Mapping[str, Any],
                           streams: Mapping[str, list[Token]]) -> list[str]:
    """What is wrong with a single-primitive run: parameters the declaration does not take or
    whose type it refuses (unknown name, unknown op, not a number), and input streams that do
    not end with exactly one ``D`` (tokens after ``D`` would never be read)."""
    declared = {k: v for k, v in params.items() if k in spec.hints() or k not in RUN_EXTRAS}
    _, problems = spec.coerce(declared)  # value rules: each model checks them when it is built
    if not problems:
        problems += _lane_problems(spec, declared, streams)
    for port, toks in streams.items():
        done = [i for i, t in enumerate(toks) if t is DONE]
        if not done:
            problems.append(f"input {port!r}: the stream has no D token (every stream ends with D)")
        elif done[0] != len(toks) - 1:
            problems.append(f"input {port!r}: {len(toks) - 1 - done[0]} token(s) after D at position "
                            f"{done[0]} (a stream ends at its D token)")
    return problems
