"""The ATen op table of the torch.export frontend (:mod:`fuseflow.models.export_trace`): one
handler per core-ATen op (or preserved composite), mapping it to model-IR nodes.

A handler takes the lowering (``low``) and the op's arguments (IR values ``_T``, constants
``_C``, Python numbers) and returns the result's value; raising ``_Unsupported`` makes the op a
host node (a graph break) with the reason given.  :data:`SUPPORTED` lists what each op becomes
(docs/models.md prints it).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from .aten_values import _C, _T, _letters, _Multi, _scalar, _Unsupported
from .ir import FrontendError, MKind

aten = torch.ops.aten

# ----------------------------------------------------------------------------- elementwise
_KINDS = {"add": MKind.ADD, "sub": MKind.SUB, "mul": MKind.MUL, "div": MKind.DIV,
          "maximum": MKind.MAXIMUM, "minimum": MKind.MINIMUM}


def _out_shape(low) -> tuple[int, ...]:
    val = low.node.meta.get("val")
    return tuple(int(s) for s in val.shape)


def _unary(low, x: _T, op: str) -> _T:
    name = low.emit(op, MKind.UNARY, (x.name,), x.ir_shape, op=op)
    return replace(x, name=name)


def _scale(low, x: _T, c: float, base: str = "scale") -> _T:
    return replace(x, name=low.emit(base, MKind.SCALE, (x.name,), x.ir_shape, c=float(c)))


def _shift(low, x: _T, c: float) -> _T:
    return replace(x, name=low.emit("add_scalar", MKind.ADD_SCALAR, (x.name,), x.ir_shape, c=float(c)))


def _relu_shifted(low, x: _T, lo: float) -> _T:
    """``max(x, lo)`` = ``relu(x - lo) + lo``."""
    if lo == 0:
        return _unary(low, x, "relu")
    return _shift(low, _unary(low, _shift(low, x, -lo), "relu"), lo)


def _min_shifted(low, x: _T, hi: float) -> _T:
    """``min(x, hi)`` = ``hi - relu(hi - x)``."""
    t = _shift(low, _unary(low, x, "neg"), hi)
    return _shift(low, _unary(low, _unary(low, t, "relu"), "neg"), hi)


def _plain(low, v, what: str, mask_ok: bool = False) -> _T:
    """A float tensor operand: a pending sqrt or ~mask is made real first."""
    v = low.tensor(v, what, mask_ok)
    return low.resolve(v) if v.sqrt or v.inverted else v


def _scalar_op(low, kind: str, x: _T, c: float, left: bool) -> _T:
    """``x kind c`` (``c kind x`` when ``left``)."""
    if kind == "div" and left:
        if x.sqrt:  # c / sqrt(y) = c * rsqrt(y)
            return _scale(low, _unary(low, replace(x, sqrt=False), "rsqrt"), c) if c != 1 else \
                _unary(low, replace(x, sqrt=False), "rsqrt")
        raise _Unsupported(f"{c} / tensor: the ALU has no reciprocal of a stream")
    x = _plain(low, x, f"{kind} operand")
    if kind == "add":
        return _shift(low, x, c)
    if kind == "sub":
        return _shift(low, _unary(low, x, "neg"), c) if left else _shift(low, x, -c)
    if kind == "mul":
        return _scale(low, x, c)
    if kind == "div":
        if c == 0:
            raise FrontendError(f"{low.src}: division by zero")
        return _scale(low, x, 1.0 / c)
    if kind == "maximum":
        return _relu_shifted(low, x, c)
    return _min_shifted(low, x, c)


def _aligned(low, x: _T, out: tuple[int, ...]) -> tuple[_T, tuple[int, ...]]:
    """``x`` broadcast against ``out``: its stored axes in ``out``'s numbering (stored size-1
    axes that broadcast are squeezed out first)."""
    off = len(out) - len(x.shape)
    ones = [a for a in x.keep if x.shape[a] == 1 and out[a + off] != 1]
    x = low.squeeze_kept(x, ones)
    return x, tuple(a + off for a in x.keep)


def _broadcast_to(low, x: _T, k: tuple[int, ...], u: tuple[int, ...], out: tuple[int, ...]) -> str:
    """IR tensor of ``x`` (stored out-axes ``k``) broadcast to out-axes ``u`` with ones."""
    letters = _letters(len(out))
    missing = [a for a in u if a not in k]
    ones = [low.ones(out[a]) for a in missing]
    spec = ",".join(["".join(letters[a] for a in k)] + [letters[a] for a in missing]) + "->" + \
        "".join(letters[a] for a in u)
    return low.emit("broadcast", MKind.EINSUM, (x.name, *ones), tuple(out[a] for a in u), spec=spec)


def _tensor_tensor(low, kind: str, a: _T, b: _T) -> _T:
    out = tuple(torch.broadcast_shapes(a.shape, b.shape))
    a, ka = _aligned(low, a, out)
    b, kb = _aligned(low, b, out)
    u = tuple(sorted(set(ka) | set(kb)))

    def trailing(k):
        return k == u[len(u) - len(k):]

    direct = (ka == u and trailing(kb)) or (kb == u and trailing(ka))
    shape = tuple(out[x] for x in u)
    dtype = a.dtype if a.dtype.is_floating_point else b.dtype
    if not direct and kind == "mul":  # a product broadcasts by itself
        letters = _letters(len(out))
        spec = f"{''.join(letters[x] for x in ka)},{''.join(letters[x] for x in kb)}->" \
               f"{''.join(letters[x] for x in u)}"
        return _T(low.emit("mul", MKind.EINSUM, (a.name, b.name), shape, spec=spec), out, u, dtype)
    an, bn = a.name, b.name
    if not direct:
        an = an if ka == u else _broadcast_to(low, a, ka, u, out)
        bn = bn if kb == u else _broadcast_to(low, b, kb, u, out)
    return _T(low.emit(kind, _KINDS[kind], (an, bn), shape), out, u, dtype)


def _const_tensor(low, c: _C) -> _T:
    v = c.value.detach()
    name = low.const_input("const", v.to(torch.float64).numpy().copy())
    return _T(name, tuple(v.shape), tuple(range(v.dim())), v.dtype)


def binary(low, kind: str, a, b) -> _T:
    sa, sb = _scalar(a), _scalar(b)
    if isinstance(a, _T) and sb is not None and (not isinstance(b, _C) or b.value.dim() <= len(a.shape)):
        return _scalar_op(low, kind, a, sb, left=False)
    if isinstance(b, _T) and sa is not None and (not isinstance(a, _C) or a.value.dim() <= len(b.shape)):
        if kind in ("add", "mul", "maximum", "minimum"):
            return _scalar_op(low, kind, b, sa, left=False)
        return _scalar_op(low, kind, b, sa, left=True)
    a = _const_tensor(low, a) if isinstance(a, _C) else a
    b = _const_tensor(low, b) if isinstance(b, _C) else b
    if isinstance(a, int | float):
        a = _const_tensor(low, _C(torch.tensor(float(a))))
    if isinstance(b, int | float):
        b = _const_tensor(low, _C(torch.tensor(float(b))))
    if kind == "div" and isinstance(b, _T) and b.sqrt:  # a / sqrt(y) = a * rsqrt(y)
        r = _unary(low, replace(b, sqrt=False), "rsqrt")
        return _tensor_tensor(low, "mul", _plain(low, a, "div operand"), r)
    return _tensor_tensor(low, kind, _plain(low, a, f"{kind} operand"), _plain(low, b, f"{kind} operand"))


def _add(low, a, b, alpha=1):
    if alpha != 1:
        b = binary(low, "mul", b, alpha) if isinstance(b, _T) else b * alpha
    return binary(low, "add", a, b)


def _sub(low, a, b, alpha=1):
    if alpha != 1:
        b = binary(low, "mul", b, alpha) if isinstance(b, _T) else b * alpha
    return binary(low, "sub", a, b)


def _div(low, a, b, rounding_mode=None):
    if rounding_mode is not None:
        raise _Unsupported(f"division with rounding_mode={rounding_mode!r}")
    return binary(low, "div", a, b)


# ----------------------------------------------------------------------------- unary
def _simple(op: str):
    def handler(low, x):
        return _unary(low, _plain(low, x, op), op)
    return handler


def _gelu(low, x, approximate="none"):
    x = _plain(low, x, "gelu")
    if approximate == "none":
        return _unary(low, x, "gelu")
    # x·Φ(x) with the tanh form: 0.5·x·(1 + tanh(y)) = x·σ(2y), y = √(2/π)·(x + 0.044715·x³)
    x3 = _tensor_tensor(low, "mul", _tensor_tensor(low, "mul", x, x), x)
    y = _tensor_tensor(low, "add", x, _scale(low, x3, 0.044715))
    s = _unary(low, _scale(low, y, 2 * math.sqrt(2 / math.pi)), "sigmoid")
    return _tensor_tensor(low, "mul", x, s)


def _tanh(low, x):
    """tanh(x) = 2·σ(2x) − 1."""
    x = _plain(low, x, "tanh")
    return _shift(low, _scale(low, _unary(low, _scale(low, x, 2.0), "sigmoid"), 2.0), -1.0)


def _sqrt(low, x):
    x = _plain(low, x, "sqrt")
    return replace(x, sqrt=True)


def _reciprocal(low, x):
    if isinstance(x, _T) and x.sqrt:
        return _unary(low, replace(x, sqrt=False), "rsqrt")
    raise _Unsupported("1 / tensor: the ALU has no reciprocal of a stream")


def _pow(low, x, e):
    e = _scalar(e)
    if e is None:
        raise _Unsupported("pow with a tensor exponent")
    if e == 0.5:
        return _sqrt(low, x)
    x = _plain(low, x, "pow")
    if e == 1:
        return x
    if e == -0.5:
        return _unary(low, x, "rsqrt")
    if e in (2, 3, 4):
        out = x
        for _ in range(int(e) - 1):
            out = _tensor_tensor(low, "mul", out, x)
        return out
    raise _Unsupported(f"pow(x, {e}) (only 0.5, -0.5, 1, 2, 3, 4 have a dataflow form)")


def _abs(low, x):
    """|x| = relu(x) + relu(−x)."""
    x = _plain(low, x, "abs")
    return _tensor_tensor(low, "add", _unary(low, x, "relu"), _unary(low, _unary(low, x, "neg"), "relu"))


def _clamp(low, x, min=None, max=None):
    x = _plain(low, x, "clamp")
    lo, hi = _scalar(min), _scalar(max)
    if (min is not None and lo is None) or (max is not None and hi is None):
        raise _Unsupported("clamp with tensor bounds")
    if lo is not None:
        x = _relu_shifted(low, x, lo)
    if hi is not None:
        x = _min_shifted(low, x, hi)
    return x


def _leaky_relu(low, x, slope=0.01):
    """relu(x) − slope·relu(−x)."""
    x = _plain(low, x, "leaky_relu")
    neg = _scale(low, _unary(low, _unary(low, x, "neg"), "relu"), -float(slope))
    return _tensor_tensor(low, "add", _unary(low, x, "relu"), neg)


# ----------------------------------------------------------------------------- products
def _full(low, v, what: str, mask_ok: bool = False) -> _T:
    return low.materialise(_plain(low, v, what, mask_ok))


def _einsum_node(low, spec: str, ops: list[_T], base: str, **attrs) -> _T:
    ins, res = spec.split("->")
    size = {c: n for term, o in zip(ins.split(","), ops) for c, n in zip(term, o.shape)}
    out = tuple(size[c] for c in res)
    for o in ops:
        if low.kind_of(o.name) is MKind.MASK:
            raise FrontendError(f"{low.src}: {base} reads the masked scores {o.name!r}; apply softmax first")
    name = low.emit(base, MKind.EINSUM, tuple(o.name for o in ops), out, spec=spec, **attrs)
    dtype = next((o.dtype for o in ops if o.dtype.is_floating_point), ops[0].dtype)
    return _T(name, out, tuple(range(len(out))), dtype)


def _matmul_spec(da: int, db: int) -> str:
    fixed = {(2, 2): "ik,kj->ij", (3, 3): "bik,bkj->bij", (3, 2): "bik,kj->bij", (1, 2): "k,kj->j",
             (2, 1): "ik,k->i", (1, 1): "k,k->", (4, 4): "abik,abkj->abij", (4, 2): "abik,kj->abij",
             (2, 3): "ik,bkj->bij"}
    if (da, db) not in fixed:
        raise _Unsupported(f"matmul of a {da}-D and a {db}-D tensor")
    return fixed[(da, db)]


def _matmul(low, a, b):
    a, b = _full(low, a, "matmul operand"), _full(low, b, "matmul operand")
    spec = _matmul_spec(len(a.shape), len(b.shape))
    return _einsum_node(low, spec, [a, b], "matmul")


def _sparse_mm(low, a, b):
    a = _full(low, a, "sparse.mm operand")
    if low.kind_of(a.name) is MKind.INPUT and a.name not in low.s.formats:
        raise FrontendError(f"{low.src}: torch.sparse.mm reads {a.name!r} as its sparse operand, but "
                            f"{a.name!r} is a dense tensor without a format annotation; pass a torch "
                            f"sparse CSR/COO tensor or formats={{{a.name!r}: 'csr'}}")
    return _matmul(low, a, b)


def _addmm(low, bias, a, b, beta=1, alpha=1):
    y = _matmul(low, a, b)
    if alpha != 1:
        y = _scale(low, y, alpha)
    if beta == 0:
        return y
    if beta != 1:
        bias = binary(low, "mul", bias, beta)
    return binary(low, "add", y, bias)


def _linear(low, x, w, bias=None):
    x, w = _full(low, x, "linear input"), _full(low, w, "linear weight")
    if len(x.shape) < 1 or len(w.shape) != 2 or x.shape[-1] != w.shape[1]:
        raise FrontendError(f"{low.src}: shape mismatch in linear: input {x.name} has shape {x.shape} "
                            f"but the weight {w.name} has shape {w.shape} (in_features {w.shape[-1]})")
    lead = _letters(len(x.shape) - 1, "kj")
    y = _einsum_node(low, f"{lead}k,jk->{lead}j", [x, w], "linear")
    if bias is None:
        return y
    b = _full(low, bias, "linear bias")
    return _T(low.emit("bias", MKind.ADD, (y.name, b.name), y.shape), y.shape, y.keep, y.dtype)


def _einsum(low, spec, operands):
    spec = spec.replace(" ", "")
    if "->" not in spec or "." in spec:
        raise _Unsupported(f"einsum {spec!r} without explicit output indices or with an ellipsis")
    ops = [_full(low, o, "einsum operand") for o in operands]
    return _einsum_node(low, spec, ops, "einsum")


# ----------------------------------------------------------------------------- reductions
def _dims(x, dims) -> list[int]:
    nd = len(x.shape)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(nd))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % nd for d in dims})


def reduce(low, x, dims, keepdim: bool, op: str, base: str) -> _T:
    """Sum / max / min of ``x`` over ``dims`` (an einsum over the stored ones; a virtual axis
    of a sum multiplies by its size)."""
    x = _plain(low, x, base)
    dims = _dims(x, dims)
    nd = len(x.shape)
    letters = _letters(nd)
    kept_red = [d for d in dims if d in x.keep]
    rest = [a for a in x.keep if a not in dims]
    name = x.name
    if kept_red:
        attrs = {"reduce": op} if op != "add" else {}
        spec = f"{''.join(letters[a] for a in x.keep)}->{''.join(letters[a] for a in rest)}"
        name = low.emit(base, MKind.EINSUM, (x.name,), tuple(x.shape[a] for a in rest), spec=spec, **attrs)
    factor = math.prod(x.shape[d] for d in dims if d not in x.keep)
    if op == "add" and factor != 1:
        name = low.emit(base, MKind.SCALE, (name,), tuple(x.shape[a] for a in rest), c=float(factor))
    if keepdim:
        shape = tuple(1 if a in dims else x.shape[a] for a in range(nd))
        keep = tuple(rest)
    else:
        shape = tuple(x.shape[a] for a in range(nd) if a not in dims)
        keep = tuple(sum(1 for d in range(a) if d not in dims) for a in rest)
    return _T(name, shape, keep, x.dtype)


def _sum(low, x, dim=None, keepdim=False, dtype=None):
    return reduce(low, x, dim, keepdim, "add", "sum")


def _mean(low, x, dim=None, keepdim=False, dtype=None):
    s = reduce(low, x, dim, keepdim, "add", "mean")
    n = math.prod(x.shape[d] for d in _dims(x, dim))
    return _scale(low, s, 1.0 / n, "mean")


def _amax(low, x, dim=None, keepdim=False):
    return reduce(low, x, dim, keepdim, "max", "amax")


def _amin(low, x, dim=None, keepdim=False):
    return reduce(low, x, dim, keepdim, "min", "amin")


def _var_args(args: tuple, kw: dict) -> tuple[Any, float, bool]:
    """(dims, correction, keepdim) of ``var.correction(x, dim, *, correction, keepdim)``,
    ``var.dim(x, dim, unbiased, keepdim)`` or ``var.default(x, unbiased)``."""
    args = list(args)
    dim = None
    if args and not isinstance(args[0], bool):
        dim = args.pop(0)
    dim = kw.get("dim", dim)
    unbiased = args.pop(0) if args else kw.get("unbiased", True)
    keepdim = args.pop(0) if args else kw.get("keepdim", False)
    correction = kw.get("correction", 1 if unbiased else 0)
    return dim, 1 if correction is None else correction, keepdim


def _var_any(low, x, *args, **kw):
    dim, correction, keepdim = _var_args(args, kw)
    return _var(low, x, dim, correction=correction, keepdim=keepdim)


def _std_any(low, x, *args, **kw):
    dim, correction, keepdim = _var_args(args, kw)
    return replace(_var(low, x, dim, correction=correction, keepdim=keepdim), sqrt=True)


def _var(low, x, dim=None, *, correction=1, keepdim=False):
    x = _plain(low, x, "var")
    dims = _dims(x, dim)
    n = math.prod(x.shape[d] for d in dims)
    mu = _mean(low, x, dims, True)
    xc = _tensor_tensor(low, "sub", x, mu)
    s = reduce(low, _tensor_tensor(low, "mul", xc, xc), dims, keepdim, "add", "var")
    corr = 1 if correction is None else correction
    if n - corr <= 0:
        raise _Unsupported(f"var over {n} element(s) with correction {corr}")
    return _scale(low, s, 1.0 / (n - corr), "var")


def _max_dim(low, k, x, dim, keepdim=False):
    if k != 0:
        raise _Unsupported("the index of a maximum (argmax) has no dataflow form")
    return _amax(low, x, [dim], keepdim)


def _min_dim(low, k, x, dim, keepdim=False):
    if k != 0:
        raise _Unsupported("the index of a minimum (argmin) has no dataflow form")
    return _amin(low, x, [dim], keepdim)


def _var_mean(low, k, x, *args, **kw):
    dim, correction, keepdim = _var_args(args, kw)
    return _var(low, x, dim, correction=correction, keepdim=keepdim) if k == 0 else \
        _mean(low, x, dim, keepdim)


# ----------------------------------------------------------------------------- row functions
def _softmax(low, x, dim, half_to_float=False):
    x = _full(low, x, "softmax", mask_ok=True)
    nd = len(x.shape)
    d = dim % nd
    if d == nd - 1:
        return _T(low.emit("softmax", MKind.SOFTMAX, (x.name,), x.shape), x.shape, x.keep, x.dtype)
    perm = [a for a in range(nd) if a != d] + [d]
    inv = [perm.index(a) for a in range(nd)]
    y = _permute_to(low, x, perm)
    y = _T(low.emit("softmax", MKind.SOFTMAX, (y.name,), y.shape), y.shape, y.keep, y.dtype)
    return _permute_to(low, y, inv)


def _layer_norm(low, k, x, shape, w=None, b=None, eps=1e-5):
    if k != 0:
        raise _Unsupported("the mean / rstd outputs of native_layer_norm")
    x = _full(low, x, "layer_norm")
    if len(shape) != 1 or shape[0] != x.shape[-1]:
        raise _Unsupported(f"layer_norm over {list(shape)} of a {list(x.shape)} tensor (only the last "
                           "dimension)")
    y = _T(low.emit("layernorm", MKind.LAYERNORM, (x.name,), x.shape, eps=float(eps)), x.shape, x.keep,
           x.dtype)
    if w is not None:
        wv = _full(low, w, "layer_norm weight")
        y = replace(y, name=low.emit("ln_scale", MKind.MUL, (y.name, wv.name), y.shape))
    if b is not None:
        bv = _full(low, b, "layer_norm bias")
        y = replace(y, name=low.emit("ln_shift", MKind.ADD, (y.name, bv.name), y.shape))
    return y


# ----------------------------------------------------------------------------- views
def _permute_to(low, x: _T, dims) -> _T:
    nd = len(x.shape)
    dims = [d % nd for d in dims]
    shape = tuple(x.shape[d] for d in dims)
    moved = [d for d in dims if d in x.keep]  # stored old axes in the new order
    keep = tuple(j for j, d in enumerate(dims) if d in x.keep)
    if moved == sorted(moved):
        return replace(x, shape=shape, keep=keep)
    if low.kind_of(x.name) is MKind.MASK:
        raise FrontendError(f"{low.src}: permute of the masked scores {x.name!r}; apply softmax first")
    src = _letters(len(x.keep))
    spec = f"{src}->{''.join(src[x.keep.index(d)] for d in moved)}"
    name = low.emit("permute", MKind.EINSUM, (x.name,), tuple(x.shape[d] for d in moved), spec=spec)
    return _T(name, shape, keep, x.dtype)


def _permute(low, x, dims):
    return _permute_to(low, _plain(low, x, "permute") if not x.inverted else x, dims)


def _transpose(low, x, d0, d1):
    nd = len(x.shape)
    perm = list(range(nd))
    perm[d0 % nd], perm[d1 % nd] = perm[d1 % nd], perm[d0 % nd]
    return _permute(low, x, perm)


def _t(low, x):
    return _permute(low, x, list(range(len(x.shape)))[::-1])


def _view(low, x, shape):
    x = low.tensor(x, "reshape") if not x.inverted else x
    numel = math.prod(x.shape)
    shape = list(shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = numel // known if known else 0
    shape = tuple(int(s) for s in shape)
    if shape == tuple(x.shape):
        return x
    big = [a for a in range(len(x.shape)) if x.shape[a] != 1]
    if all(a in x.keep for a in big) and [x.shape[a] for a in big] == [s for s in shape if s != 1]:
        x = low.squeeze_kept(x, [a for a in x.keep if x.shape[a] == 1])
        return replace(x, shape=shape, keep=tuple(j for j, s in enumerate(shape) if s != 1))
    x = low.materialise(_plain(low, x, "reshape"))
    name = low.emit("reshape", MKind.RESHAPE, (x.name,), shape, shape=shape)
    return _T(name, shape, tuple(range(len(shape))), x.dtype)


def _unsqueeze(low, x, dim):
    nd = len(x.shape) + 1
    d = dim % nd
    shape = x.shape[:d] + (1,) + x.shape[d:]
    return replace(x, shape=shape, keep=tuple(a + (a >= d) for a in x.keep))


def _squeeze(low, x, dims=None):
    nd = len(x.shape)
    dims = [a for a in (_dims(x, dims) if dims is not None else range(nd)) if x.shape[a] == 1]
    x = low.squeeze_kept(x, [a for a in dims if a in x.keep])
    shape = tuple(s for a, s in enumerate(x.shape) if a not in dims)
    keep = tuple(a - sum(1 for d in dims if d < a) for a in x.keep)
    return replace(x, shape=shape, keep=keep)


def _expand(low, x, sizes, implicit=False):
    lead = len(sizes) - len(x.shape)
    shape = tuple(int(x.shape[a - lead] if s == -1 else s) for a, s in enumerate(sizes))
    grown = [a for a in x.keep if x.shape[a] == 1 and shape[a + lead] != 1]
    x = low.squeeze_kept(x, grown)
    return replace(x, shape=shape, keep=tuple(a + lead for a in x.keep))


def _identity(low, x, *args, **kwargs):
    return x


def _to_copy(low, x, dtype=None, **kwargs):
    if dtype is None or dtype == x.dtype or (dtype.is_floating_point and x.dtype.is_floating_point):
        return x if dtype is None else replace(x, dtype=dtype)
    if dtype.is_floating_point and x.dtype == torch.bool and low.kind_of(x.name) is MKind.INPUT:
        return _mask_as_float(low, x)
    raise _Unsupported(f"conversion from {x.dtype} to {dtype}")


def _mask_as_float(low, m: _T) -> _T:
    """A boolean input (or its ~) as a 0/1 float input of the same format."""
    data = np.asarray(low.s.data[m.name]).astype(np.float64)
    if m.inverted:
        data = 1.0 - data
    fmt = low.s.formats.get(m.name) if not m.inverted else None
    name = low.const_input(f"{m.name}_{'not' if m.inverted else 'f'}", data, "csr" if fmt == "csr" else None)
    return _T(name, m.shape, m.keep, torch.float64)


def _dropout(low, x, p=0.5, train=False):
    if train:
        raise _Unsupported("dropout in training mode (random)")
    return x


def _native_dropout(low, k, x, p=0.5, train=False):
    if train or k != 0:
        raise _Unsupported("dropout in training mode (random)" if train else "the dropout mask")
    return x


def _selection(low, n: int, m: int, rows, cols) -> str:
    """A (n, m) 0/1 matrix with ones at (rows[k], cols[k]): CSR, at most one entry per row."""
    p = np.zeros((n, m))
    p[list(rows), list(cols)] = 1.0
    return low.const_input("sel", p, "csr")


def _slice_axis(low, x: _T, dim: int, rows: list[int]) -> _T:
    nd = len(x.shape)
    d = dim % nd
    shape = x.shape[:d] + (len(rows),) + x.shape[d + 1:]
    if rows == list(range(x.shape[d])):
        return x
    if d not in x.keep:
        return replace(x, shape=shape)
    x = _plain(low, x, "slice")
    letters = _letters(len(x.keep) + 1)
    src, new = letters[:-1], letters[-1]
    i = x.keep.index(d)
    out = src[:i] + new + src[i + 1:]
    p = _selection(low, x.shape[d], len(rows), rows, range(len(rows)))
    name = low.emit("slice", MKind.EINSUM, (x.name, p), tuple(shape[a] for a in x.keep),
                    spec=f"{src},{src[i]}{new}->{out}")
    return _T(name, shape, x.keep, x.dtype)


def _slice(low, x, dim=0, start=None, end=None, step=1):
    n = x.shape[dim % len(x.shape)]
    rows = list(range(n))[slice(start, end, step)]
    return _slice_axis(low, x, dim, rows)


def _select(low, x, dim, index):
    x = _plain(low, x, "select")
    nd = len(x.shape)
    d = dim % nd
    index = index % x.shape[d]
    shape = x.shape[:d] + x.shape[d + 1:]
    rest = tuple(a - (a > d) for a in x.keep if a != d)
    if d not in x.keep:
        return replace(x, shape=shape, keep=rest)
    onehot = np.zeros(x.shape[d])
    onehot[index] = 1.0
    v = low.const_input("onehot", onehot)
    src = _letters(len(x.keep))
    i = x.keep.index(d)
    name = low.emit("select", MKind.EINSUM, (x.name, v), tuple(shape[a] for a in rest),
                    spec=f"{src},{src[i]}->{src[:i] + src[i + 1:]}")
    return _T(name, shape, rest, x.dtype)


def _split_item(low, k, x, sizes, dim=0):
    n = x.shape[dim % len(x.shape)]
    if isinstance(sizes, int):
        sizes = [sizes] * ((n + sizes - 1) // sizes)
        sizes[-1] = n - sizes[0] * (len(sizes) - 1)
    start = sum(sizes[:k])
    return _slice_axis(low, x, dim, list(range(start, start + sizes[k])))


def _unbind_item(low, k, x, dim=0):
    return _select(low, x, dim, k)


def _cat(low, tensors, dim=0):
    vals = [_full(low, t, "cat operand") for t in tensors if 0 not in getattr(t, "value", t).shape]  # _T or _C
    if len(vals) == 1:
        return vals[0]
    out = _out_shape(low)
    nd = len(out)
    d = dim % nd
    total = out[d]
    letters = _letters(nd + 1)
    src, new = letters[:-1], letters[-1]
    dst = src[:d] + new + src[d + 1:]
    acc = None
    off = 0
    for v in vals:
        p = _selection(low, v.shape[d], total, range(v.shape[d]), range(off, off + v.shape[d]))
        off += v.shape[d]
        term = low.emit("cat", MKind.EINSUM, (v.name, p), out, spec=f"{src},{src[d]}{new}->{dst}")
        acc = term if acc is None else low.emit("cat", MKind.ADD, (acc, term), out)
    return _T(acc, out, tuple(range(nd)), vals[0].dtype)


def _stack(low, tensors, dim=0):
    nd = len(tensors[0].shape) + 1
    return _cat(low, [low.materialise(_unsqueeze(low, _plain(low, t, "stack operand"), dim)) for t in tensors],
                dim % nd)


# ----------------------------------------------------------------------------- masks
def _bitwise_not(low, x):
    if isinstance(x, _T) and x.dtype == torch.bool and low.kind_of(x.name) is MKind.INPUT:
        return replace(x, inverted=not x.inverted)
    raise _Unsupported("~ of a boolean tensor computed by the model")


def _mask(low, m: _T, x: _T) -> _T:
    if m.name not in low.s.formats:
        raise FrontendError(f"{low.src}: attention mask {m.name!r} has no sparse format annotation; give "
                            f"it as formats={{{m.name!r}: 'csr'}} (or a sparse layout) so that only its "
                            "entries are computed")
    x = _full(low, x, "masked scores")
    mv = np.asarray(low.s.data[m.name]).shape if not hasattr(low.s.data[m.name], "nnz") else \
        low.s.data[m.name].shape
    if tuple(x.shape[len(x.shape) - len(mv):]) != tuple(mv) or not m.full:
        raise FrontendError(f"{low.src}: shape mismatch: mask {m.name!r} {tuple(mv)} does not match the "
                            f"trailing dimensions of {x.name} {x.shape}")
    name = low.emit("masked", MKind.MASK, (m.name, x.name), x.shape)
    return _T(name, x.shape, x.keep, x.dtype)


def _is_neg_inf(v) -> bool:
    s = _scalar(v)
    return s is not None and math.isinf(s) and s < 0


def _where(low, cond, a, b):
    if not isinstance(cond, _T) or cond.dtype != torch.bool:
        raise _Unsupported("where with a condition that is not a boolean tensor")
    if low.kind_of(cond.name) is not MKind.INPUT:
        raise _Unsupported("where / masked_fill with a condition computed by the model")
    a, b = (_const_tensor(low, v) if isinstance(v, _C) and _scalar(v) is None else v for v in (a, b))
    if cond.inverted and _is_neg_inf(a) and isinstance(b, _T):
        return _mask(low, replace(cond, inverted=False), b)
    if not cond.inverted and _is_neg_inf(b) and isinstance(a, _T):
        return _mask(low, cond, a)
    if _is_neg_inf(a) or _is_neg_inf(b):
        raise FrontendError(f"{low.src}: the -inf fill must hit the entries outside the keep-mask: write "
                            f"masked_fill(~{cond.name}, -inf) or where({cond.name}, scores, -inf)")
    # where(c, a, b) = c·a + (1 − c)·b with 0/1 inputs made from the boolean input
    c = _mask_as_float(low, cond)
    cbar = _mask_as_float(low, replace(cond, inverted=not cond.inverted))
    terms = [binary(low, "mul", c, a) if _scalar(a) != 0 else None,
             binary(low, "mul", cbar, b) if _scalar(b) != 0 else None]
    terms = [t for t in terms if t is not None]
    if not terms:
        return binary(low, "mul", c, 0.0)
    return terms[0] if len(terms) == 1 else _tensor_tensor(low, "add", terms[0], terms[1])


def _masked_fill(low, x, mask, value):
    return _where(low, mask, value, x)


# ----------------------------------------------------------------------------- tables
DIRECT = {
    aten.linear.default: _linear, aten.matmul.default: _matmul, aten.einsum.default: _einsum,
    aten._sparse_mm.default: _sparse_mm,
}

BY_PACKET: dict[str, Any] = {
    "add": _add, "sub": _sub, "rsub": lambda low, a, b, alpha=1: _sub(low, b, a, alpha),
    "mul": lambda low, a, b: binary(low, "mul", a, b), "div": _div,
    "maximum": lambda low, a, b: binary(low, "maximum", a, b),
    "minimum": lambda low, a, b: binary(low, "minimum", a, b),
    "relu": _simple("relu"), "neg": _simple("neg"), "exp": _simple("exp"), "sigmoid": _simple("sigmoid"),
    "rsqrt": _simple("rsqrt"), "gelu": _gelu, "tanh": _tanh, "sqrt": _sqrt, "reciprocal": _reciprocal,
    "pow": _pow, "abs": _abs, "clamp": _clamp, "clamp_min": lambda low, x, m: _clamp(low, x, m, None),
    "clamp_max": lambda low, x, m: _clamp(low, x, None, m), "hardtanh": lambda low, x, a=-1.0, b=1.0: _clamp(low, x, a, b),
    "leaky_relu": _leaky_relu,
    "mm": _matmul, "bmm": _matmul, "addmm": _addmm,
    "sum": _sum, "mean": _mean, "amax": _amax, "amin": _amin, "var": _var_any, "std": _std_any,
    "max": lambda low, x, *a, **k: _Multi(low.node, (x, *a), k) if a or k else _amax(low, x),
    "min": lambda low, x, *a, **k: _Multi(low.node, (x, *a), k) if a or k else _amin(low, x),
    "var_mean": lambda low, x, *a, **k: _Multi(low.node, (x, *a), k),
    "_softmax": _softmax, "softmax": lambda low, x, dim, dtype=None: _softmax(low, x, dim),
    "native_layer_norm": lambda low, *a, **k: _Multi(low.node, a, k),
    "permute": _permute, "transpose": _transpose, "t": _t, "numpy_T": _t,
    "view": _view, "_unsafe_view": _view, "reshape": _view,
    "unsqueeze": _unsqueeze, "squeeze": _squeeze, "expand": _expand,
    "clone": _identity, "alias": _identity, "detach": _identity, "contiguous": _identity,
    "lift_fresh_copy": _identity, "to_dense": _identity, "_to_dense": _identity,
    "_to_copy": _to_copy, "to": _to_copy, "dropout": _dropout,
    "native_dropout": lambda low, *a, **k: _Multi(low.node, a, k),
    "slice": _slice, "select": _select, "cat": _cat, "concat": _cat, "stack": _stack,
    "split": lambda low, *a, **k: _Multi(low.node, a, k),
    "split_with_sizes": lambda low, *a, **k: _Multi(low.node, a, k),
    "unbind": lambda low, *a, **k: _Multi(low.node, a, k),
    "bitwise_not": _bitwise_not, "logical_not": _bitwise_not,
    "where": _where, "masked_fill": _masked_fill,
}

MULTI = {"native_layer_norm": _layer_norm, "max": _max_dim, "min": _min_dim, "var_mean": _var_mean,
         "native_dropout": _native_dropout, "split": _split_item, "split_with_sizes": _split_item,
         "unbind": _unbind_item}

# what each ATen op becomes (docs/models.md lists this table)
SUPPORTED = {
    "linear": "einsum x·Wᵀ (+ bias add)",
    "matmul, mm, bmm, _sparse_mm (torch.sparse.mm)": "einsum",
    "addmm": "einsum + add",
    "einsum (explicit output, no ellipsis)": "einsum",
    "add, sub, rsub, mul, div (Tensor / Scalar)": "add / sub / mul / division; by a number: scale / shift",
    "maximum, minimum": "maximum / minimum (by a number: relu of a shift)",
    "relu, neg, exp, sigmoid, rsqrt, gelu": "unary function",
    "gelu(approximate='tanh')": "x·σ(2√(2/π)(x + 0.044715x³))",
    "tanh": "2σ(2x) − 1",
    "abs, clamp, clamp_min, clamp_max, hardtanh, leaky_relu": "relu / neg / shift compositions",
    "pow (exponent 0.5, -0.5, 1, 2, 3, 4)": "products, rsqrt; 0.5: sqrt (see below)",
    "sqrt, reciprocal": "only as x / sqrt(y), 1 / sqrt(y): rsqrt; otherwise a host step",
    "sum, mean (dims or full, keepdim)": "einsum sum (+ scale)",
    "amax, amin, max.dim[0], min.dim[0], max, min": "einsum reduce='max' / 'min'",
    "var, std, var_mean (correction, keepdim)": "mean, sub, product, sum, scale (std: sqrt as above)",
    "_softmax (any dim)": "softmax row function (another dim: permutes around it)",
    "native_layer_norm[0] (last dim)": "layernorm row function + scale / shift",
    "permute, transpose, t": "einsum permute (or nothing if the stored axes keep their order)",
    "view, _unsafe_view, reshape": "host reshape (nothing when it only adds / drops size-1 axes)",
    "unsqueeze, squeeze, expand": "virtual axes (broadcast by einsum where read)",
    "slice, select, split, split_with_sizes, unbind": "einsum with a 0/1 selection matrix / vector",
    "cat, stack": "sum of einsums with 0/1 selection matrices",
    "clone, alias, detach, lift_fresh_copy, to_dense, _to_copy (float), dropout / native_dropout (eval)":
        "nothing (identity)",
    "bitwise_not / logical_not of a boolean input": "the mask's complement",
    "where, masked_fill with a boolean input": "-inf fill of a sparse keep-mask: masked scores; "
                                              "otherwise c·a + (1 − c)·b with 0/1 inputs",
}
