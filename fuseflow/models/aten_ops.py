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
import scipy.sparse as sp
import torch

from .aten_values import _C, _G, _T, _letters, _Multi, _scalar, _Unsupported
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
    if isinstance(a, _G) or isinstance(b, _G):
        g = _scaled_gather(kind, a, b)
        if g is not None:
            return g
        if kind == "div" and isinstance(b, _G) and b.weight is None and _softmax_normaliser(low.node):
            # exp(s) / sum[dst] with sum = Σ exp(s) over the edges into dst (+ eps) > 0:
            # times (rsqrt(sum)²)[dst], the reciprocal made where the sum is (the nodes)
            r = _unary(low, _plain(low, b.src, "div operand"), "rsqrt")
            return binary(low, "mul", a, _G(_tensor_tensor(low, "mul", r, r), b.index))
        a, b = low.gathered(a), low.gathered(b)
    if kind == "div" and isinstance(a, _T) and isinstance(b, _C) and b.value.is_floating_point():
        r = _row_normalised(low, a, b.value)
        if r is not None:
            return r
    sa, sb = _scalar(a), _scalar(b)
    if isinstance(a, _T) and sb is not None and (not isinstance(b, _C) or b.value.dim() <= len(a.shape)):
        return _scalar_op(low, kind, a, sb, left=False)
    if isinstance(b, _T) and sa is not None and (not isinstance(a, _C) or a.value.dim() <= len(b.shape)):
        if kind in ("add", "mul", "maximum", "minimum"):
            return _scalar_op(low, kind, b, sa, left=False)
        return _scalar_op(low, kind, b, sa, left=True)
    if kind == "add" and isinstance(a, _T) != isinstance(b, _T) and (neg_inf_entries(a) or neg_inf_entries(b)):
        return masked_add(low, a, b) if isinstance(a, _T) else masked_add(low, b, a)
    a = _const_tensor(low, a) if isinstance(a, _C) else a
    b = _const_tensor(low, b) if isinstance(b, _C) else b
    if isinstance(a, int | float):
        a = _const_tensor(low, _C(torch.tensor(float(a))))
    if isinstance(b, int | float):
        b = _const_tensor(low, _C(torch.tensor(float(b))))
    if kind == "div" and isinstance(b, _T) and not b.sqrt and _is_gather(low, b):
        b = _dense_stored(low, b)
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


def const_operand(low, v):
    """A constant matrix operand of a product (a sparse tensor built from constants, a folded
    adjacency) as a constant input: CSR when at most half of it is nonzero, else dense."""
    if not isinstance(v, _C) or not (v.value.is_floating_point() or v.value.layout != torch.strided):
        return v
    t = v.value.to_dense() if v.value.layout != torch.strided else v.value
    arr = t.detach().to(torch.float64).numpy()
    if arr.ndim == 2 and (v.value.layout != torch.strided or np.count_nonzero(arr) <= arr.size / 2):
        name = low.const_sparse("const", sp.csr_array(arr))
    else:
        name = low.const_input("const", arr.copy())
    return _T(name, tuple(arr.shape), tuple(range(arr.ndim)), torch.float64)


def _matmul(low, a, b):
    a, b = const_operand(low, a), const_operand(low, b)
    a, b = _full(low, a, "matmul operand"), _full(low, b, "matmul operand")
    spec = _matmul_spec(len(a.shape), len(b.shape))
    return _einsum_node(low, spec, [a, b], "matmul")


def _sparse_mm(low, a, b):
    a = _full(low, const_operand(low, a), "sparse.mm operand")
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
    vals = [_full(low, _const_tensor(low, t) if isinstance(t, _C) else t, "cat operand")
            for t in tensors if 0 not in getattr(t, "value", t).shape]  # _T or _C
    if len(vals) == 1:
        return vals[0]
    nd = len(vals[0].shape)
    d = dim % nd
    # the operands' shapes (the traced one may be symbolic: edges left by a mask on edge_index)
    total = sum(v.shape[d] for v in vals)
    out = tuple(vals[0].shape[:d]) + (total,) + tuple(vals[0].shape[d + 1:])
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
    if isinstance(cond, _C) and cond.value.dtype == torch.bool:
        return _where_const(low, cond.value, a, b)
    if not isinstance(cond, _T) or cond.dtype != torch.bool:
        raise _Unsupported("where with a condition that is not a boolean tensor")
    if low.kind_of(cond.name) is not MKind.INPUT:
        if _is_neg_inf(a) or _is_neg_inf(b):
            raise FrontendError(f"{low.src}: where / masked_fill with a -inf fill and a condition computed by the "
                                "model (a comparison): the -inf entries cannot reach the accelerator; give the "
                                "mask as a boolean input (mask.bool() outside the model) or fill with a large "
                                "negative number (-1e9)")
        raise _Unsupported("where / masked_fill with a condition computed by the model")
    if _is_neg_inf(a) != _is_neg_inf(b) and all(_constant(v) for v in (a, b)):
        # where(mask, -inf, 0) / where(mask, 0, -inf): an additive attention mask made from a boolean
        # input (nn.MultiheadAttention's attn_mask / key_padding_mask, SDPA's boolean mask): a
        # constant of the trace (the mask is fixed), so that the scores it is added to become masked
        # scores over its kept entries
        keep = fixed_bool_input(low, cond)
        return _C(torch.where(keep, _as_tensor(a), _as_tensor(b)).to(torch.float64))
    a, b = (_const_tensor(low, v) if isinstance(v, _C) and _scalar(v) is None else v for v in (a, b))
    if cond.inverted and _is_neg_inf(a) and isinstance(b, _T):
        return _mask(low, replace(cond, inverted=False), b)
    if not cond.inverted and _is_neg_inf(b) and isinstance(a, _T):
        return _mask(low, cond, a)
    if _is_neg_inf(a) or _is_neg_inf(b):  # masked_fill(mask, -inf): the mask's complement is kept
        return _where_const(low, fixed_bool_input(low, cond), a, b)
    # where(c, a, b) = c·a + (1 − c)·b with 0/1 inputs made from the boolean input
    c = _mask_as_float(low, cond)
    cbar = _mask_as_float(low, replace(cond, inverted=not cond.inverted))
    terms = [binary(low, "mul", c, a) if _scalar(a) != 0 else None,
             binary(low, "mul", cbar, b) if _scalar(b) != 0 else None]
    terms = [t for t in terms if t is not None]
    if not terms:
        return binary(low, "mul", c, 0.0)
    return terms[0] if len(terms) == 1 else _tensor_tensor(low, "add", terms[0], terms[1])


def _where_const(low, keep: torch.Tensor, a, b):
    """``where(keep, a, b)`` with a constant condition (folded from integer inputs, or a fixed
    boolean input): a -inf fill makes masked scores (:func:`masked_add`), otherwise
    ``keep·a + (1 − keep)·b`` with constant 0/1 tensors."""
    ia, ib = _is_neg_inf(a), _is_neg_inf(b)
    if ia or ib:
        x = b if ia else a
        if ia == ib or not isinstance(x, _T):
            raise FrontendError(f"{low.src}: where / masked_fill with -inf: only a -inf fill of a tensor is "
                                "supported (masked attention scores)")
        inf = torch.tensor(float("-inf"), dtype=torch.float64)
        zero = torch.zeros((), dtype=torch.float64)
        return masked_add(low, x, _C(torch.where(keep, inf, zero) if ia else torch.where(keep, zero, inf)))
    terms = []
    for v, k in ((a, keep), (b, ~keep)):
        sv = _scalar(v)
        if sv == 0:
            continue
        ones = k.to(torch.float64)
        terms.append(_C(ones * sv) if sv is not None else binary(low, "mul", v, _C(ones)))
    if not terms:
        return _C(torch.zeros(keep.shape, dtype=torch.float64))
    return terms[0] if len(terms) == 1 else binary(low, "add", terms[0], terms[1])


def _constant(v) -> bool:
    return isinstance(v, _C) or (isinstance(v, int | float) and not isinstance(v, bool))


def _as_tensor(v) -> torch.Tensor:
    return v.value if isinstance(v, _C) else torch.tensor(float(v), dtype=torch.float64)


def fixed_bool_input(low, cond: _T) -> torch.Tensor:
    """The traced values of the boolean input ``cond`` (its complement if inverted), which the
    model now depends on as a constant: recorded as fixed (new values need a new trace)."""
    name = cond.name
    data = low.s.data[name]
    arr = np.asarray(data.toarray() if hasattr(data, "toarray") else data) != 0
    if name not in low.int_inputs:
        low.int_inputs[name] = arr.copy()
        low.s.notes.append(f"{name}: a boolean mask made into an additive -inf mask, compiled in as a constant "
                           "(the scores it masks are computed only at its kept entries; new mask values need "
                           "a new trace)")
    t = torch.from_numpy(arr.copy())
    return ~t if cond.inverted else t


def neg_inf_entries(v) -> bool:
    """Whether ``v`` is a float constant holding -inf entries (an additive attention mask)."""
    return isinstance(v, _C) and v.value.is_floating_point() and v.value.numel() > 1 and \
        bool(torch.isneginf(v.value).any())


def masked_add(low, x, c: _C, safe: bool = False) -> _T:
    """``x + c`` with ``c`` a constant additive mask (0 or a finite bias where kept, -inf
    elsewhere): the finite part added, then masked scores over the kept entries (a sparse
    constant keep-mask), which only a softmax may read.  ``safe``: a row with no kept entry is
    0 after the softmax (SDPA's safe softmax); otherwise PyTorch gives NaN there: refused."""
    x = _full(low, x, "masked scores")
    out = tuple(torch.broadcast_shapes(tuple(x.shape), tuple(c.value.shape)))
    if out != tuple(x.shape):
        raise _Unsupported("an additive -inf mask that broadcasts the scores to a larger shape")
    full = torch.broadcast_to(c.value.to(torch.float64), out)
    keep = ~torch.isneginf(full)
    finite = torch.where(keep, full, torch.zeros((), dtype=torch.float64))
    if not bool(keep.any(-1).all()):
        if not safe:
            raise FrontendError(f"{low.src}: the additive -inf mask masks every entry of a row: PyTorch's softmax "
                                "gives NaN there; keep at least one entry per row")
        note = (f"{low.src}: the attention mask keeps no entry of {int((~keep.any(-1)).sum())} score rows: their "
                "attention is 0, as F.scaled_dot_product_attention gives (PyTorch's fused fast paths in eval, "
                "e.g. nn.TransformerEncoderLayer's, give NaN there)")
        if note not in low.s.notes:
            low.s.notes.append(note)
    if bool((finite != 0).any()):
        x = binary(low, "add", x, _C(finite))
    if bool(keep.all()):
        return x
    nd = len(out)
    t = min(2, nd)
    while t < nd:
        k = keep.reshape((-1,) + out[nd - t:])
        if bool((k == k[0]).all()):
            break
        t += 1
    k = keep.reshape((-1,) + out[nd - t:])[0].to(torch.float64).numpy()
    if k.ndim == 2:
        m = low.const_sparse("keep", sp.csr_array(k))
    else:
        m = low.const_input("keep", k, "compressed")
    name = low.emit("masked", MKind.MASK, (m, x.name), x.shape)
    return _T(name, x.shape, x.keep, x.dtype)


def _masked_fill(low, x, mask, value):
    return _where(low, mask, value, x)


# ----------------------------------------------------------------------------- message passing
# Gathers by a constant index (an integer input such as edge_index, and what is computed from
# it, is a constant: see export_trace.input_value) are pending values (_G); a scatter of one by
# a constant destination index is one einsum with the sparse matrix A[dst[e], src[e]] += w[e]
# (PyG's propagate with sum / mean aggregation: an SpMM over the adjacency).  Any other use of
# a gather materialises it as a product with a sparse (E, N) selection matrix, and a scatter
# of any per-edge tensor is a product with the sparse (N, E) transposed selection: both on
# dataflow.


def _const_index(v, what: str) -> np.ndarray:
    if not isinstance(v, _C) or v.value.dtype.is_floating_point or v.value.dtype == torch.bool:
        raise _Unsupported(f"{what} by an index computed from the input values (only an index made from "
                           "integer inputs or constants, such as edge_index, becomes a sparse matrix)")
    return v.value.detach().reshape(-1).to(torch.int64).numpy()


def _check_range(idx: np.ndarray, n: int, what: str, low) -> None:
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise FrontendError(f"{low.src}: {what}: index {int(idx.max() if idx.max() >= n else idx.min())} is out of "
                  f"range for a dimension of size {n}")


def select_rows(low, x: _T, d: int, idx: np.ndarray, weight: np.ndarray | None = None) -> _T:
    """``x`` indexed by ``idx`` along axis ``d`` (each selected slice times ``weight``): an
    einsum with the sparse (E, n) selection matrix."""
    x = _full(low, x, "gather input")
    n = x.shape[d]
    idx = np.where(idx < 0, idx + n, idx)
    e = len(idx)
    vals = np.ones(e) if weight is None else np.asarray(weight, dtype=np.float64)
    sel = low.const_sparse("gather", sp.coo_array((vals, (np.arange(e), idx)), shape=(e, n)))
    nd = len(x.shape)
    letters = _letters(nd + 1)
    src, new = letters[:nd], letters[nd]
    out = src[:d] + new + src[d + 1:]
    shape = x.shape[:d] + (e,) + x.shape[d + 1:]
    name = low.emit("gather", MKind.EINSUM, (sel, x.name), shape, spec=f"{new}{src[d]},{src}->{out}")
    return _T(name, shape, tuple(range(nd)), x.dtype)


def _row_normalised(low, a: _T, d: torch.Tensor) -> _T | None:
    """``(A · x) / d`` with ``d`` constant along every axis but the rows (a mean aggregation
    divided by the in-degree, as PyG's mean does it) as ``(D⁻¹ A) · x``: the aggregation's
    adjacency with its rows scaled; None when ``a`` is not an aggregation read only here."""
    arg = low.node.args[0] if low.node is not None else None
    if getattr(arg, "op", None) != "call_function" or len(arg.users) != 1 or not a.full:
        return None
    made = next((n for n in reversed(low.s.nodes) if n.name == a.name), None)
    if made is None or made.kind is not MKind.EINSUM or not made.name.endswith("_aggregate") or \
            "reduce" in made.attrs or not made.args[0].startswith(("_adj", "_scatter")):
        return None
    try:
        full = torch.broadcast_to(d.to(torch.float64), a.shape)
    except RuntimeError:
        return None
    rows = full.reshape(a.shape[0], -1)
    if torch.broadcast_shapes(d.shape, a.shape) != torch.Size(a.shape) or not bool((rows == rows[:, :1]).all()) \
            or not bool((rows[:, 0] != 0).all()):
        return None
    old = made.args[0]
    adj = sp.csr_array(low.s.data[old])
    scaled = low.const_sparse("adj" if old.startswith("_adj") else "scatter", sp.diags_array(1.0 / rows[:, 0].numpy()) @ adj)
    low.s.nodes.remove(made)
    if not any(old in n.args for n in low.s.nodes):  # the unscaled adjacency is read no more
        low.drop_input(old)
    name = low.emit("aggregate", MKind.EINSUM, (scaled, *made.args[1:]), made.shape, **made.attrs)
    return replace(a, name=name)


def _is_gather(low, v: _T) -> bool:
    return v.name.endswith("_gather") and low.kind_of(v.name) is MKind.EINSUM


def _dense_stored(low, v: _T) -> _T:
    """A gathered divisor (``x / sum[dst]``, a softmax over edges) stored dense: the product
    with the selection matrix is stored compressed, and the compiler divides only by a dense
    tensor.  ``(v + 1) - 1`` visits every coordinate (a shift of a sparse tensor is dense) and is
    exact in fixed point."""
    return _shift(low, _shift(low, v, 1.0), -1.0)


def materialise_gather(low, g: _G) -> _T:
    return select_rows(low, g.src, 0, g.index.numpy(), None if g.weight is None else g.weight.numpy())


def _index_select(low, x, dim, index):
    idx = _const_index(index, "index_select")
    x = _plain(low, low.gathered(x), "index_select input")
    d = dim % len(x.shape)
    _check_range(idx, x.shape[d], "index_select", low)
    if d not in x.keep:  # constant along the gathered axis: the same value, E long
        return replace(x, shape=x.shape[:d] + (len(idx),) + x.shape[d + 1:])
    x = low.materialise(x)
    if d == 0:
        n = x.shape[0]
        return _G(x, torch.from_numpy(np.where(idx < 0, idx + n, idx)))
    return select_rows(low, x, d, idx)


def _index(low, x, indices):
    """``x[idx]`` / ``x[:, idx]``: one integer index tensor, the other axes whole."""
    tensors = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(tensors) != 1:
        raise _Unsupported("indexing with several index tensors")
    d, i = tensors[0]
    if isinstance(i, _C) and i.value.dtype == torch.bool and i.value.dim() == 1:
        # a constant mask (made from edge_index: PyG's self-loop handling keeps the weights of
        # the edges that are not loops) is the gather of its true positions
        i = _C(torch.nonzero(i.value).reshape(-1))
    elif isinstance(i, _C) and i.value.dtype == torch.bool:
        raise _Unsupported("indexing with a boolean mask of more than one dimension")
    if isinstance(i, _C) and i.value.dim() != 1:
        raise _Unsupported(f"indexing with a {i.value.dim()}-D index tensor")
    return _index_select(low, x, d, i)


def _scaled_gather(kind: str, a, b) -> _G | None:
    """A gather times / divided by a number or a constant per-edge column (``w.view(-1, 1) *
    x_j``): the gather with its weights scaled; None for anything else."""
    g, c = (a, b) if isinstance(a, _G) else (b, a)
    if kind not in ("mul", "div") or (kind == "div" and g is not a) or isinstance(c, _G):
        return None
    s = _scalar(c)
    e = g.index.numel()
    if s is not None:
        col = torch.full((e,), s, dtype=torch.float64)
    elif isinstance(c, _C) and c.value.dim() == len(g.shape) and c.value.shape[0] == e and \
            all(k == 1 for k in c.value.shape[1:]) and c.value.dtype != torch.bool:
        col = c.value.detach().reshape(e).to(torch.float64)
    else:
        return None
    if kind == "div":
        if bool((col == 0).any()):
            return None
        col = 1.0 / col
    w = col if g.weight is None else g.weight * col
    return replace(g, weight=w)


def _zero_const(v) -> bool:
    return isinstance(v, _C) and not bool(v.value.any())


def _scatter(low, out_rows: int, dst: np.ndarray, src, extra: np.ndarray | None = None,
             reduce: str = "add") -> _T:
    """Σ over edges e (or max) into row ``dst[e]`` of ``extra[e]``·``src[e]``: an einsum with
    the sparse adjacency (``src`` a pending gather) or the transposed selection matrix."""
    e = len(dst)
    _check_range(dst, out_rows, "scatter", low)
    dst = np.where(dst < 0, dst + out_rows, dst)
    w = np.ones(e) if extra is None else extra
    if isinstance(src, _G) and reduce == "add":
        x = src.src
        if src.weight is not None:
            w = w * src.weight.numpy()
        a = low.const_sparse("adj", sp.coo_array((w, (dst, src.index.numpy())), shape=(out_rows, x.shape[0])))
        base = "aggregate"
    else:
        x = _full(low, low.gathered(src), "scatter source")
        a = low.const_sparse("scatter", sp.coo_array((w, (dst, np.arange(e))), shape=(out_rows, e)))
        base = "aggregate" if reduce == "add" else "aggregate_max"
    nd = len(x.shape)
    letters = _letters(nd + 1)
    rows, rest, new = letters[0], letters[1:nd], letters[nd]
    shape = (out_rows,) + tuple(x.shape[1:])
    attrs = {"reduce": "max"} if reduce == "max" else {}
    name = low.emit(base, MKind.EINSUM, (a, x.name), shape, spec=f"{new}{rows},{rows}{rest}->{new}{rest}",
                    **attrs)
    return _T(name, shape, tuple(range(nd)), x.dtype)


def _with_self(low, out: _T, self_v, what: str) -> _T:
    if _zero_const(self_v):
        return out
    if isinstance(self_v, _C | _T):
        return binary(low, "add", self_v, out)
    raise _Unsupported(f"{what} into {self_v!r}")


def _scatter_index(index, src, dim: int, what: str) -> np.ndarray:
    """The destination of each row of ``src`` from scatter's ``index`` (``src``'s shape, the
    destination broadcast over the other axes, as PyG makes it)."""
    iv = index.value if isinstance(index, _C) else None
    _const_index(index, what)
    if dim != 0:
        raise _Unsupported(f"{what} along dim {dim} (only along the first axis, the nodes)")
    if tuple(iv.shape) != tuple(src.shape):
        raise _Unsupported(f"{what} with an index of shape {list(iv.shape)} for a source of shape "
                           f"{list(src.shape)}")
    flat = iv.reshape(iv.shape[0], -1)
    if flat.shape[1] and not bool((flat == flat[:, :1]).all()):
        raise _Unsupported(f"{what} whose index differs across the feature axes (not a message-passing "
                           "scatter)")
    return flat[:, 0].to(torch.int64).numpy() if flat.shape[1] else np.zeros(0, dtype=np.int64)


def _out_rows(self_v) -> int:
    return int(self_v.shape[0] if isinstance(self_v, _T) else self_v.value.shape[0])


def _scatter_add(low, self_v, dim, index, src):
    nd = len(src.shape)
    dst = _scatter_index(index, src, dim % nd, "scatter_add")
    return _with_self(low, _scatter(low, _out_rows(self_v), dst, src), self_v, "scatter_add")


def _index_put(low, self_v, indices, values, accumulate=False):
    tensors = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(tensors) != 1 or tensors[0][0] != 0:
        raise _Unsupported("index_put / index_add_ other than along the first axis with one index")
    i = tensors[0][1]
    if isinstance(i, _C) and i.value.dtype == torch.bool and i.value.dim() == 1:
        i = _C(torch.nonzero(i.value).reshape(-1))
    dst = _const_index(i, "index_put")
    if isinstance(values, _C | int | float):
        raise _Unsupported("index_put of constant values")
    rows = _out_rows(self_v)
    if accumulate:
        return _with_self(low, _scatter(low, rows, dst, values), self_v, "index_add_")
    # assignment at distinct constant positions (PyG's self-loop weights): the other rows of
    # self, plus the values scattered into their rows
    pos = np.where(dst < 0, dst + rows, dst)
    if len(np.unique(pos)) != len(pos) or len(values.shape) != (len(self_v.shape)):
        raise _Unsupported("index_put (assignment) with repeated positions")
    keep = np.ones(rows)
    keep[pos] = 0.0
    shape = (rows,) + (1,) * (len(self_v.shape) - 1)
    kept = binary(low, "mul", self_v, _C(torch.from_numpy(keep).reshape(shape))) if isinstance(self_v, _T) \
        else _C(self_v.value * torch.from_numpy(keep).reshape(shape).to(self_v.value.dtype))
    return _with_self(low, _scatter(low, rows, dst, values), kept, "index_put")


def _index_add(low, self_v, dim, index, source, alpha=1):
    if dim % len(source.shape) != 0:
        raise _Unsupported("index_add_ along an axis other than the first")
    dst = _const_index(index, "index_add_")
    extra = None if alpha == 1 else np.full(len(dst), float(alpha))
    return _with_self(low, _scatter(low, _out_rows(self_v), dst, source, extra), self_v, "index_add_")


def _scatter_reduce(low, self_v, dim, index, src, reduce, include_self=True):
    nd = len(src.shape)
    what = f"scatter_reduce(reduce={reduce!r})"
    dst = _scatter_index(index, src, dim % nd, what)
    rows = _out_rows(self_v)
    if reduce == "sum":
        if not include_self and not _zero_const(self_v):
            raise _Unsupported(f"{what} with include_self=False into a tensor that is not zero")
        return _with_self(low, _scatter(low, rows, dst, src), self_v, what)
    if reduce == "mean":
        if not _zero_const(self_v):
            raise _Unsupported(f"{what} into a tensor that is not zero")
        count = np.bincount(np.where(dst < 0, dst + rows, dst), minlength=rows).astype(np.float64)
        count += 1.0 if include_self else 0.0
        return _scatter(low, rows, dst, src, 1.0 / np.maximum(count, 1.0)[np.where(dst < 0, dst + rows, dst)])
    if reduce in ("amax", "amin"):
        if reduce == "amax" and _softmax_shift(low.node) and _zero_const(self_v):
            # any value constant per destination is an exact shift: the maximum over all edges
            # (a max over E coordinates, where a max over each node's edges would iterate the
            # dense (N, E) space), kept virtual along the nodes
            g = _amax(low, _full(low, low.gathered(src), "softmax scores"), [0])
            return replace(g, shape=(rows,) + tuple(g.shape), keep=tuple(a + 1 for a in g.keep))
        raise FrontendError(
            f"{low.src}: {what} over an index (a max / min aggregation over neighbours) is refused: the "
            "compiler's max / min reduction runs over every coordinate, implicit zeros included, so a "
            "maximum over the stored edges has no dataflow form; use sum or mean aggregation (only the "
            "shift of a softmax over edges, exp(s - max[dst]), is compiled, as the maximum over all edges)")
    raise _Unsupported(f"{what}")


_THROUGH = ("detach", "alias", "clone", "lift_fresh_copy", "contiguous")


def _op_name(n) -> str:
    return getattr(n.target, "__name__", str(n.target)).split(".")[0]


def _behind(n):
    """``n`` without identity ops in front of it."""
    while getattr(n, "op", None) == "call_function" and _op_name(n) in _THROUGH:
        n = n.args[0]
    return n


def _softmax_shift(node) -> bool:
    """Whether a scatter max ``m`` of scores ``s`` is only the shift of a softmax over edges
    (PyG's ``softmax``): every use is ``exp(s - m[dst])``, and each exp is normalised by a
    division.  Any shift constant per destination gives the same softmax there."""
    scores = _behind(node.args[3])
    for u in node.users:
        if _op_name(u) not in ("index_select", "index"):
            return False
        for sub in u.users:
            if _op_name(sub) != "sub" or _behind(sub.args[0]) is not scores:
                return False
            for ex in sub.users:
                if _op_name(ex) != "exp":
                    return False
                uses = {_op_name(x) for x in ex.users}
                if "div" not in uses or not uses <= {"div", "scatter_add", "scatter_reduce", "index_put",
                                                     "index_add", "mul"}:
                    return False
    return bool(node.users)


def _softmax_normaliser(node) -> bool:
    """Whether a division ``node`` is ``e / sum[dst]`` of a softmax over edges: ``e`` is an
    ``exp``, and the divisor gathers a scatter-sum of that same ``e`` (plus a positive number):
    a positive divisor."""
    num = _behind(node.args[0])
    if getattr(num, "op", None) != "call_function" or _op_name(num) != "exp":
        return False
    g = _behind(node.args[1])
    if getattr(g, "op", None) != "call_function" or _op_name(g) not in ("index_select", "index"):
        return False
    t = _behind(g.args[0])
    if _op_name(t) == "add" and len(t.args) == 2 and isinstance(t.args[1], int | float) and t.args[1] > 0:
        t = _behind(t.args[0])
    if _op_name(t) == "scatter_add" or (_op_name(t) == "scatter_reduce" and t.args[4] == "sum"):
        return _behind(t.args[3]) is num
    if _op_name(t) in ("index_put", "index_add"):
        return _behind(t.args[2]) is num
    return False


def _like(value: float | None):
    def handler(low, x, *args, dtype=None, **kw):
        fill = value if value is not None else args[0]
        shape = tuple(x.shape)
        return _C(torch.full(shape, fill, dtype=dtype or x.dtype))
    return handler


def _new(value: float | None):
    def handler(low, x, size, *args, dtype=None, **kw):
        fill = value if value is not None else args[0]
        return _C(torch.full(tuple(size), fill, dtype=dtype or x.dtype))
    return handler


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
    "index_select": _index_select, "index": _index, "scatter_add": _scatter_add, "index_put": _index_put,
    "index_add": _index_add, "scatter_reduce": _scatter_reduce,
    "sym_size": lambda low, x, d: int(x.shape[d]), "sym_numel": lambda low, x: int(math.prod(x.shape)),
    "full_like": _like(None), "zeros_like": _like(0.0), "ones_like": _like(1.0), "empty_like": _like(0.0),
    "new_zeros": _new(0.0), "new_ones": _new(1.0), "new_full": _new(None), "new_empty": _new(0.0),
}

# ops that take a pending gather (_G) as it is; any other op materialises it first
GATHER_AWARE = frozenset({"mul", "div", "scatter_add", "index_put", "index_add", "scatter_reduce", "sym_size",
                          "sym_numel"})
GATHER_PASS = frozenset({"clone", "alias", "detach", "contiguous", "lift_fresh_copy"})

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
    "where, masked_fill with a boolean input or a constant condition":
        "-inf fill: masked scores (a sparse-annotated keep-mask stays an input; another boolean input, or "
        "mask == 0 of an integer input, is compiled in as a constant); otherwise c·a + (1 − c)·b with 0/1 inputs",
    "scaled_dot_product_attention (F.scaled_dot_product_attention, nn.MultiheadAttention)":
        "einsums + softmax; a boolean, causal or -inf mask: masked scores (only the kept entries; a row "
        "without one is 0); a finite float mask: add; dropout_p > 0: a host step",
    "sparse_softmax (the frontend's op for torch.sparse.softmax of a sparse input)":
        "masked scores over the stored entries + softmax (dim 0: on the transpose)",
    "_sparse_coo_tensor_with_dims_and_tensors (torch.sparse_coo_tensor) of constant indices":
        "einsum R·diag(values)·Cᵀ with sparse 0/1 selections (built from indices computed from values: host)",
    "_sparse_addmm (torch.sparse.addmm)": "einsum + add",
    "sparse_part (the frontend's op for .values(), .indices(), .crow_indices(), .col_indices() of a sparse input)":
        "index arrays: constants (the sparsity pattern is fixed); values(): einsum with sparse 0/1 "
        "selections of the stored coordinates",
    "index_select, index (x[idx]) by a constant index (edge_index)":
        "pending gather; read by anything but a scatter: einsum with a sparse selection matrix",
    "scatter_add, index_put (accumulate: index_add_), index_add, scatter_reduce sum / mean":
        "of a gather: einsum with the sparse adjacency A[dst, src] (SpMM; mean: rows scaled by "
        "1 / in-degree); of another per-edge tensor: einsum with the sparse transposed selection",
    "scatter_reduce amax": "only as a softmax's shift exp(s − max[dst]): the max over all edges (einsum "
                           "reduce='max'); otherwise refused (error)",
    "full_like, zeros_like, ones_like, new_zeros, new_ones, new_full": "a constant",
}
