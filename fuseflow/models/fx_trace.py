"""The torch.fx side of the PyTorch frontend: runs a traced module and fills the model IR.

:func:`trace_module` is :func:`fuseflow.models.frontend.trace`; that module holds the IR and
the list of supported ops and imports this one (and torch with it) only when it traces.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import fx, nn

from fuseflow.compiler import ProgramError, parse_format

from .ir import FrontendError, MKind, MNode, ModelIR, check_format_names

__all__ = ["trace_module"]


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def _source(node) -> str:
    """``file:line: code`` of the user frame that created an fx node."""
    st = getattr(node, "stack_trace", None) or ""
    frames = [m for m in _FRAME.finditer(st) if "/torch/" not in m[1]]
    if not frames:
        return f"(fx node {node.name})"
    m = frames[-1]
    return f"{m[1]}:{m[2]}: {m[4].strip()}"


def _letters(n: int, skip: str = "") -> str:
    return "".join(c for c in "abcdefghijklmnopqrstuvwxyz" if c not in skip)[:n]


def _canon_format(name: str, fmt: str, order: int) -> str:
    try:
        parse_format(name, fmt, order)
    except ProgramError as exc:
        raise FrontendError(f"formats annotation: {exc}") from None
    return fmt


class _Builder:
    """Maps fx nodes to model-IR nodes while an interpreter runs them."""

    def __init__(self, formats: Mapping[str, str]) -> None:
        self.nodes: list[MNode] = []
        self.data: dict[str, np.ndarray] = {}
        self.formats: dict[str, str] = {}
        self.user_formats = dict(formats)
        self.reference: dict[str, np.ndarray] = {}
        self.region_of: dict[str, str] = {}
        self.inverted: set[str] = set()  # names of ~mask values (bool)

    def add(self, name: str, kind: MKind, args: tuple[str, ...], value, region: str, source: str,
            **attrs: Any) -> str:
        shape = tuple(int(s) for s in value.shape)
        self.nodes.append(MNode(name, kind, args, shape, region, source, attrs))
        self.reference[name] = _np(value)
        self.region_of[name] = region
        return name

    def add_input(self, name: str, value, layout_fmt: str | None) -> str:
        name = name.replace(".", "_")
        if name in self.data:
            return name
        fmt = self.user_formats.get(name) or layout_fmt
        self.data[name] = _np(value)
        if fmt is not None and fmt != "dense":
            self.formats[name] = _canon_format(name, fmt, len(value.shape))
        self.nodes.append(MNode(name, MKind.INPUT, (), tuple(int(s) for s in value.shape), "", "input"))
        self.reference[name] = self.data[name]
        self.region_of[name] = ""
        return name


def _np(value) -> np.ndarray | sp.csr_array:
    """A traced value as numpy; a torch sparse matrix as a ``scipy.sparse`` CSR array (never
    densified: its level arrays are cut from the CSR arrays)."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            return _scipy(value)
        return value.detach().to(torch.float64).numpy().copy() if value.dtype != torch.bool else \
            value.detach().numpy().copy()
    return np.asarray(value)


def _scipy(t: torch.Tensor) -> sp.csr_array:
    if t.dim() != 2 or t.layout not in (torch.sparse_csr, torch.sparse_coo):
        raise FrontendError(f"sparse input of layout {t.layout} and order {t.dim()}: only sparse CSR "
                            "or COO matrices are supported")
    if t.layout is torch.sparse_coo:
        t = t.coalesce()
        r, c = t.indices().numpy()
        m = sp.coo_array((t.values().to(torch.float64).numpy(), (r, c)), shape=tuple(t.shape)).tocsr()
    else:
        m = sp.csr_array((t.values().to(torch.float64).numpy().copy(), t.col_indices().numpy().copy(),
                          t.crow_indices().numpy().copy()), shape=tuple(t.shape))
    m.sum_duplicates()
    m.sort_indices()
    return m


# a sparse operand of more elements than this is never made dense to evaluate an einsum
DENSE_LIMIT = 1 << 24


def _einsum_value(spec: str, ts: list[torch.Tensor]) -> torch.Tensor:
    """``torch.einsum(spec, *ts)`` where sparse operands stay sparse: a 2-D sparse matrix in a
    contraction of two matrices over one index is multiplied by scipy (``A·B``, ``Aᵀ·B``, …);
    any other einsum densifies its sparse operands, up to :data:`DENSE_LIMIT` elements."""
    sparse = [t.layout != torch.strided for t in ts]
    if not any(sparse):
        return torch.einsum(spec, *ts)
    ins, out = spec.split("->")
    terms = ins.split(",")
    if len(ts) == 2 and all(len(x) == 2 for x in terms) and len(out) == 2:
        shared = set(terms[0]) & set(terms[1])
        if len(shared) == 1 and len(set(out)) == 2 and set(out) == set(terms[0] + terms[1]) - shared:
            k = shared.pop()
            a = _scipy(ts[0]) if sparse[0] else ts[0].numpy()
            b = _scipy(ts[1]) if sparse[1] else ts[1].numpy()
            a = a if terms[0][1] == k else a.T  # (free, k)
            b = b if terms[1][0] == k else b.T  # (k, free)
            prod = a @ b
            if sp.issparse(prod) and math.prod(prod.shape) > DENSE_LIMIT:
                raise FrontendError(f"einsum {spec!r} of two sparse matrices has a {prod.shape} dense "
                                    f"result, over {DENSE_LIMIT} elements")
            prod = prod.toarray() if sp.issparse(prod) else np.asarray(prod)
            fa = terms[0].replace(k, "")
            return torch.from_numpy(np.ascontiguousarray(prod if out[0] == fa else prod.T))
    for t, s in zip(ts, sparse):
        if s and t.numel() > DENSE_LIMIT:
            raise FrontendError(f"einsum {spec!r} reads a sparse operand of shape {tuple(t.shape)}: only "
                                "the contraction of two matrices keeps it sparse, and it is too large "
                                f"(over {DENSE_LIMIT} elements) to make dense")
    return torch.einsum(spec, *[t.to_dense() if s else t for t, s in zip(ts, sparse)])


def _layout_format(value) -> str | None:
    if not isinstance(value, torch.Tensor) or value.layout == torch.strided:
        return None
    if value.layout in (torch.sparse_csr, torch.sparse_coo):
        if value.dim() != 2:
            return "compressed"
        return "csr"
    raise FrontendError(f"input layout {value.layout} is not supported: use a sparse CSR or COO "
                        "tensor, or a dense tensor plus a formats= annotation")


def trace_module(module, inputs: Mapping[str, Any], formats: Mapping[str, str] | None = None,
                 name: str | None = None) -> ModelIR:
    """:func:`fuseflow.models.frontend.trace` (see there)."""
    fmts = {**getattr(module, "sparse_formats", {}), **(formats or {})}
    fmts = {k.replace(".", "_"): v for k, v in fmts.items()}
    tracer = fx.Tracer()
    tracer.record_stack_traces = True
    try:
        graph = tracer.trace(module)
    except Exception as exc:  # noqa: BLE001 - torch.fx raises many exception types
        raise FrontendError(f"torch.fx cannot trace {type(module).__name__}: {exc}") from None
    gm = fx.GraphModule(tracer.root, graph)
    b = _Builder(fmts)
    check_format_names(module, inputs, fmts)
    interp = _Interp(gm, b)
    placeholders = [n.target for n in graph.nodes if n.op == "placeholder"]
    missing = [p for p in placeholders if p not in inputs]
    if missing:
        raise FrontendError(f"no example input for {missing} of {type(module).__name__}.forward")
    with torch.no_grad():
        out = interp.run(*[inputs[p] for p in placeholders])
    outs = out if isinstance(out, (tuple, list)) else (out,)
    out_names = []
    for o in outs:
        if not isinstance(o, _Val):
            raise FrontendError(f"model output {o!r} is not a tensor computed by the model")
        out_names.append(o.name)
    _check_masks(b)
    return ModelIR(name or type(module).__name__.lower(), b.nodes, b.data, b.formats, out_names,
                   b.reference)


def _check_masks(b: _Builder) -> None:
    for n in b.nodes:
        if n.kind is MKind.MASK:
            users = [u for u in b.nodes if n.name in u.args]
            bad = [u for u in users if u.kind is not MKind.SOFTMAX]
            if bad:
                u = bad[0]
                raise FrontendError(f"{u.source}: {u.kind.value} reads the masked scores {n.name!r}; a "
                                    "masked tensor (entries outside the mask are -inf) may only feed "
                                    "softmax")


@dataclass
class _Val:
    """An interpreter value: the model-IR name plus the real torch tensor."""

    name: str
    t: Any

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.t.shape)


class _Interp:
    """Runs the fx graph node by node, translating each node (see :meth:`call`)."""

    def __init__(self, gm, b: _Builder) -> None:
        self.gm = gm
        self.b = b
        self.env: dict[str, Any] = {}
        self.count = 0

    def run(self, *args):
        it = iter(args)
        result = None
        for node in self.gm.graph.nodes:
            src = _source(node)
            if node.op == "placeholder":
                v = next(it)
                if not isinstance(v, torch.Tensor):
                    raise FrontendError(f"input {node.target!r} must be a torch tensor, got {type(v).__name__}")
                self.env[node.name] = _Val(self.b.add_input(node.target, v, _layout_format(v)), v)
            elif node.op == "get_attr":
                v = _fetch_attr(self.gm, node.target)
                self.env[node.name] = _Val(self.b.add_input(node.target, v, _layout_format(v)), v)
            elif node.op == "output":
                result = self._load(node.args[0])
            else:
                args = self._load(node.args)
                kwargs = self._load(node.kwargs)
                region = _region(node, args, self.b)
                try:
                    self.env[node.name] = self.call(node, args, kwargs, region, src)
                except FrontendError:
                    raise
                except (RuntimeError, ValueError, TypeError, IndexError) as exc:
                    raise FrontendError(f"{src}: {_opname(node)} failed on the example inputs "
                                        f"(shape mismatch?): {exc}") from None
        return result

    def _load(self, a):
        if isinstance(a, fx.Node):
            return self.env[a.name]
        if isinstance(a, (tuple, list)):
            return type(a)(self._load(x) for x in a)
        if isinstance(a, dict):
            return {k: self._load(v) for k, v in a.items()}
        return a

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"t{self.count}_{re.sub(r'[^A-Za-z0-9]', '_', base)}"

    # ------------------------------------------------------------------ op translation
    def call(self, node, args, kw, region: str, src: str) -> Any:
        """Translate one ``call_module`` / ``call_method`` / ``call_function`` node."""
        if node.op == "call_module":
            return self._call_module(node.target, args, region, src)
        if node.op == "call_method":
            return self._call_method(node.target, args, kw, region, src)
        for targets, handler in _FUNCTIONS:
            if node.target in targets:
                return handler(self, node, args, kw, region, src)
        raise FrontendError(f"{src}: unsupported op {_opname(node)}; supported: linear, matmul/mm/bmm/"
                            "einsum/sparse.mm, add/sub/mul/div, relu, gelu, softmax, layer_norm, "
                            "masked_fill/where with a mask, transpose/permute/reshape/view, sum/max/mean")

    def _call_module(self, tgt: str, args, region: str, src: str) -> Any:
        mod = self.gm.get_submodule(tgt)
        if isinstance(mod, nn.Linear):
            w = self._param(f"{tgt}.weight", mod.weight)
            bias = self._param(f"{tgt}.bias", mod.bias) if mod.bias is not None else None
            return self.linear(args[0], w, bias, region, src, tgt)
        if isinstance(mod, nn.ReLU):
            return self.unary("relu", args[0], region, src)
        if isinstance(mod, nn.GELU) and mod.approximate == "none":
            return self.unary("gelu", args[0], region, src)
        if isinstance(mod, nn.Softmax):
            return self.softmax(args[0], mod.dim, region, src)
        if isinstance(mod, nn.LayerNorm):
            w = self._param(f"{tgt}.weight", mod.weight) if mod.weight is not None else None
            bias = self._param(f"{tgt}.bias", mod.bias) if mod.bias is not None else None
            return self.layernorm(args[0], tuple(mod.normalized_shape), w, bias, mod.eps, region, src)
        raise FrontendError(f"{src}: unsupported module {type(mod).__name__} ({tgt}); supported: "
                            "Linear, ReLU, GELU, Softmax, LayerNorm")

    def _call_method(self, tgt: str, args, kw, region: str, src: str) -> Any:
        self_v, rest = args[0], args[1:]
        if tgt in ("matmul", "mm", "bmm"):
            return self.matmul(self_v, rest[0], region, src)
        if tgt in ("add", "sub", "mul", "div"):
            return self.binary(tgt, self_v, rest[0], region, src)
        if tgt == "relu":
            return self.unary("relu", self_v, region, src)
        if tgt == "softmax":
            return self.softmax(self_v, rest[0] if rest else kw["dim"], region, src)
        if tgt in ("transpose", "permute", "t"):
            return self.permute(tgt, self_v, rest, region, src)
        if tgt in ("reshape", "view"):
            shape = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
            return self.reshape(self_v, tuple(shape), region, src)
        if tgt == "contiguous":
            return self_v
        if tgt in ("sum", "mean", "max"):
            return self.reduce(tgt, self_v, rest[0] if rest else kw.get("dim"), region, src)
        if tgt == "masked_fill":
            return self.masked_fill(self_v, rest[0], rest[1], region, src)
        raise FrontendError(f"{src}: unsupported op Tensor.{tgt}")

    # ``call_function`` targets, one handler each (see _FUNCTIONS below the class)
    def _fn_matmul(self, node, args, kw, region: str, src: str) -> _Val:
        if node.target is torch.sparse.mm:
            self._check_sparse_operand(_opname(node), args[0], src)
        return self.matmul(args[0], args[1], region, src)

    def _fn_einsum(self, node, args, kw, region: str, src: str) -> _Val:
        return self.einsum_call(args[0], list(args[1:]), region, src)

    def _fn_linear(self, node, args, kw, region: str, src: str) -> _Val:
        bias = args[2] if len(args) > 2 else kw.get("bias")
        return self.linear(args[0], args[1], bias, region, src, "linear")

    def _fn_binary(self, node, args, kw, region: str, src: str) -> _Val:
        return self.binary(_BINOPS[node.target], args[0], args[1], region, src)

    def _fn_relu(self, node, args, kw, region: str, src: str) -> _Val:
        return self.unary("relu", args[0], region, src)

    def _fn_gelu(self, node, args, kw, region: str, src: str) -> _Val:
        if kw.get("approximate", "none") != "none":
            raise FrontendError(f"{src}: gelu(approximate={kw['approximate']!r}) is not supported; "
                                "use the exact (erf) gelu")
        return self.unary("gelu", args[0], region, src)

    def _fn_neg(self, node, args, kw, region: str, src: str) -> _Val:
        return self.binary("mul", args[0], -1, region, src)

    def _fn_softmax(self, node, args, kw, region: str, src: str) -> _Val:
        return self.softmax(args[0], args[1] if len(args) > 1 else kw.get("dim"), region, src)

    def _fn_layer_norm(self, node, args, kw, region: str, src: str) -> _Val:
        w = args[2] if len(args) > 2 else kw.get("weight")
        bias = args[3] if len(args) > 3 else kw.get("bias")
        eps = args[4] if len(args) > 4 else kw.get("eps", 1e-5)
        return self.layernorm(args[0], tuple(args[1]), w, bias, eps, region, src)

    def _fn_permute(self, node, args, kw, region: str, src: str) -> _Val:
        return self.permute(node.target.__name__, args[0], args[1:], region, src)

    def _fn_reshape(self, node, args, kw, region: str, src: str) -> _Val:
        return self.reshape(args[0], tuple(args[1]), region, src)

    def _fn_reduce(self, node, args, kw, region: str, src: str) -> _Val:
        dim = args[1] if len(args) > 1 else kw.get("dim")
        return self.reduce(node.target.__name__, args[0], dim, region, src)

    def _fn_invert(self, node, args, kw, region: str, src: str) -> _Val:
        v = args[0]
        if not isinstance(v, _Val) or v.t.dtype != torch.bool:
            raise FrontendError(f"{src}: ~ is supported only on boolean attention masks")
        self.b.inverted.add(v.name)
        return _Val(f"~{v.name}", ~v.t)

    def _fn_where(self, node, args, kw, region: str, src: str) -> _Val:
        return self.where(args[0], args[1], args[2], region, src)

    def _param(self, qual: str, p) -> _Val:
        return _Val(self.b.add_input(qual, p, _layout_format(p)), p)

    def _check_sparse_operand(self, op: str, a: _Val, src: str) -> None:
        n = self.b.nodes[[x.name for x in self.b.nodes].index(a.name)]
        if n.kind is MKind.INPUT and a.name not in self.b.formats:
            raise FrontendError(f"{src}: {op} reads {a.name!r} as its sparse operand, but {a.name!r} is a "
                                "dense tensor without a format annotation; pass a torch sparse CSR/COO "
                                f"tensor or formats={{{a.name!r}: 'csr'}}")

    def _emit(self, base: str, kind: MKind, args: tuple[str, ...], value, region: str, src: str,
              **attrs: Any) -> _Val:
        name = self.fresh(base)
        self.b.add(name, kind, args, value, region, src, **attrs)
        return _Val(name, value)

    def _tensor(self, v: Any, what: str, src: str) -> _Val:
        if not isinstance(v, _Val):
            raise FrontendError(f"{src}: {what} must be a tensor, got {v!r}")
        if v.name.startswith("~"):
            raise FrontendError(f"{src}: the inverted mask {v.name!r} can only be the mask of masked_fill")
        return v

    def einsum(self, spec: str, ops: list[_Val], region: str, src: str, base: str) -> _Val:
        value = _einsum_value(spec, [o.t for o in ops])
        for o in ops:
            if self.b.nodes and self._kind(o.name) is MKind.MASK:
                raise FrontendError(f"{src}: {base} reads the masked scores {o.name!r}; apply softmax first")
        return self._emit(base, MKind.EINSUM, tuple(o.name for o in ops), value, region, src, spec=spec)

    def _kind(self, name: str) -> MKind:
        for n in reversed(self.b.nodes):
            if n.name == name:
                return n.kind
        raise KeyError(name)

    def linear(self, x: Any, w: Any, bias: Any, region: str, src: str, what: str) -> _Val:
        x = self._tensor(x, f"{what} input", src)
        w = self._tensor(w, f"{what} weight", src)
        if x.t.dim() < 1 or x.shape[-1] != w.shape[1]:
            raise FrontendError(f"{src}: shape mismatch in {what}: input {x.name} has shape {x.shape} "
                                f"but the weight {w.name} has shape {w.shape} (in_features {w.shape[1]})")
        lead = _letters(x.t.dim() - 1, "kj")
        y = self.einsum(f"{lead}k,jk->{lead}j", [x, w], region, src, "linear")
        if bias is None:
            return y
        b = self._tensor(bias, f"{what} bias", src)
        return self._emit("bias", MKind.ADD, (y.name, b.name), y.t + b.t, region, src)

    def matmul(self, a: Any, b: Any, region: str, src: str) -> _Val:
        a = self._tensor(a, "matmul operand", src)
        b = self._tensor(b, "matmul operand", src)
        da, db = a.t.dim(), b.t.dim()
        if da < 2 or db < 2 or max(da, db) > 3 or (db == 3 and da == 2):
            raise FrontendError(f"{src}: matmul of shapes {a.shape} and {b.shape} is not supported "
                                "(2-D @ 2-D, 3-D @ 3-D or 3-D @ 2-D)")
        if a.shape[-1] != b.shape[-2] or (da == db == 3 and a.shape[0] != b.shape[0]):
            raise FrontendError(f"{src}: shape mismatch in matmul: {a.name} {a.shape} @ {b.name} {b.shape}")
        spec = {(2, 2): "ik,kj->ij", (3, 3): "bik,bkj->bij", (3, 2): "bik,kj->bij"}[(da, db)]
        return self.einsum(spec, [a, b], region, src, "matmul")

    def einsum_call(self, spec: str, ops: list[Any], region: str, src: str) -> _Val:
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = list(ops[0])
        ts = [self._tensor(o, "einsum operand", src) for o in ops]
        spec = spec.replace(" ", "")
        if "->" not in spec or "." in spec:
            raise FrontendError(f"{src}: einsum {spec!r}: write the output indices explicitly ('ik,kj->ij'); "
                                "ellipses are not supported")
        return self.einsum(spec, ts, region, src, "einsum")

    def binary(self, op: str, a: Any, b: Any, region: str, src: str) -> _Val:
        num = (int, float)
        if isinstance(a, num) and isinstance(b, _Val) and op in ("add", "mul"):
            a, b = b, a
        if isinstance(b, num) and not isinstance(b, bool):
            a = self._tensor(a, f"{op} operand", src)
            if op == "div":
                if b == 0:
                    raise FrontendError(f"{src}: division by zero")
                op, b = "mul", 1.0 / b
            if op == "sub":
                op, b = "add", -b
            if op == "mul":
                return self._emit("scale", MKind.SCALE, (a.name,), a.t * b, region, src, c=b)
            return self._emit("add_scalar", MKind.ADD_SCALAR, (a.name,), a.t + b, region, src, c=b)
        if isinstance(a, num):
            raise FrontendError(f"{src}: {op} with a number on the left ({a} {op} tensor) is not supported; "
                                "rewrite it as tensor * -1 + number")
        a = self._tensor(a, f"{op} operand", src)
        b = self._tensor(b, f"{op} operand", src)
        if op == "div":
            raise FrontendError(f"{src}: division by a tensor ({a.name} / {b.name}) is not supported; only "
                                "division by a number")
        try:
            value = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op](a.t, b.t)
        except RuntimeError as exc:
            raise FrontendError(f"{src}: shape mismatch in {op}: {a.name} {a.shape} and {b.name} {b.shape}: "
                                f"{exc}") from None
        big, small = (a, b) if a.t.dim() >= b.t.dim() else (b, a)
        if tuple(value.shape) != big.shape or big.shape[big.t.dim() - small.t.dim():] != small.shape:
            raise FrontendError(f"{src}: {op} broadcasts {a.name} {a.shape} with {b.name} {b.shape}; only "
                                "trailing-axis broadcasting of a lower-order operand is supported")
        for v in (a, b):
            if self._kind(v.name) is MKind.MASK:
                raise FrontendError(f"{src}: {op} reads the masked scores {v.name!r}; apply softmax first")
        kind = {"add": MKind.ADD, "sub": MKind.SUB, "mul": MKind.MUL}[op]
        return self._emit(op, kind, (a.name, b.name), value, region, src)

    def unary(self, op: str, a: Any, region: str, src: str) -> _Val:
        a = self._tensor(a, op, src)
        value = a.t.relu() if op == "relu" else F.gelu(a.t)
        return self._emit(op, MKind.UNARY, (a.name,), value, region, src, op=op)

    def _last_dim(self, a: _Val, dim: Any, what: str, src: str) -> None:
        nd = a.t.dim()
        if dim is None or not isinstance(dim, int) or dim not in (-1, nd - 1):
            raise FrontendError(f"{src}: {what} over dim={dim!r} of a {nd}-D tensor: only the last "
                                "dimension (dim=-1) is supported")

    def softmax(self, a: Any, dim: Any, region: str, src: str) -> _Val:
        a = self._tensor(a, "softmax", src)
        self._last_dim(a, dim, "softmax", src)
        return self._emit("softmax", MKind.SOFTMAX, (a.name,), torch.softmax(a.t, -1), region, src)

    def layernorm(self, x: Any, shape: tuple[int, ...], w: Any, bias: Any, eps: float, region: str,
                  src: str) -> _Val:
        x = self._tensor(x, "layer_norm", src)
        if len(shape) != 1 or shape[0] != x.shape[-1]:
            raise FrontendError(f"{src}: layer_norm over {shape} of {x.name} {x.shape}: only the last "
                                "dimension is supported")
        y = self._emit("layernorm", MKind.LAYERNORM, (x.name,), F.layer_norm(x.t, shape, eps=eps),
                       region, src, eps=float(eps))
        if w is not None:
            wv = self._tensor(w, "layer_norm weight", src)
            y = self._emit("ln_scale", MKind.MUL, (y.name, wv.name), y.t * wv.t, region, src)
        if bias is not None:
            bv = self._tensor(bias, "layer_norm bias", src)
            y = self._emit("ln_shift", MKind.ADD, (y.name, bv.name), y.t + bv.t, region, src)
        return y

    def permute(self, how: str, a: Any, rest: tuple, region: str, src: str) -> _Val:
        a = self._tensor(a, how, src)
        nd = a.t.dim()
        if how in ("t",):
            perm = list(range(nd))[::-1]
        elif how == "transpose":
            d0, d1 = (x % nd for x in rest[:2])
            perm = list(range(nd))
            perm[d0], perm[d1] = perm[d1], perm[d0]
        else:
            perm = list(rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest)
            perm = [p % nd for p in perm]
        src_l = _letters(nd)
        spec = f"{src_l}->{''.join(src_l[p] for p in perm)}"
        if self._kind(a.name) is MKind.MASK:
            raise FrontendError(f"{src}: {how} of the masked scores {a.name!r}; apply softmax first")
        return self._emit("permute", MKind.EINSUM, (a.name,), a.t.permute(*perm), region, src, spec=spec)

    def reshape(self, a: Any, shape: tuple, region: str, src: str) -> _Val:
        a = self._tensor(a, "reshape", src)
        value = a.t.reshape(*shape)
        return self._emit("reshape", MKind.RESHAPE, (a.name,), value, region, src,
                          shape=tuple(int(s) for s in value.shape))

    def reduce(self, how: str, a: Any, dim: Any, region: str, src: str) -> _Val:
        a = self._tensor(a, how, src)
        nd = a.t.dim()
        if how == "max":
            self._last_dim(a, dim, "max", src)
            return self._emit("max", MKind.MAX, (a.name,), a.t.max(dim=-1).values, region, src)
        if not isinstance(dim, int):
            raise FrontendError(f"{src}: {how}(dim={dim!r}): give one dimension to reduce")
        d = dim % nd
        src_l = _letters(nd)
        spec = f"{src_l}->{src_l[:d] + src_l[d + 1:]}"
        s = self._emit(how, MKind.EINSUM, (a.name,), torch.sum(a.t, dim=d), region, src, spec=spec)
        if how == "mean":
            s = self._emit("mean", MKind.SCALE, (s.name,), s.t / a.shape[d], region, src, c=1.0 / a.shape[d])
        return s

    def _mask_input(self, m: Any, src: str, inverted: bool) -> str:
        if not isinstance(m, _Val) or m.t.dtype != torch.bool:
            raise FrontendError(f"{src}: the mask must be a boolean tensor")
        name = m.name.removeprefix("~")
        if m.name.startswith("~") != inverted:
            raise FrontendError(f"{src}: the fill must hit the entries outside the keep-mask: write "
                                f"masked_fill(~{name}, -inf) or where({name}, scores, -inf)")
        if self._kind(name) is not MKind.INPUT or name not in self.b.formats:
            raise FrontendError(f"{src}: attention mask {name!r} has no sparse format annotation; give it "
                                f"as formats={{{name!r}: 'csr'}} (or a sparse layout) so that only its entries "
                                "are computed")
        return name

    def _masked(self, x: _Val, mname: str, value, region: str, src: str) -> _Val:
        mv = self.b.data[mname]
        xs = x.shape
        if tuple(xs[len(xs) - mv.ndim:]) != tuple(mv.shape):
            raise FrontendError(f"{src}: shape mismatch: mask {mname!r} {mv.shape} does not match the "
                                f"trailing dimensions of {x.name} {xs}")
        return self._emit("masked", MKind.MASK, (mname, x.name), value, region, src)

    def _fill_target(self, x: Any, what: str, fill: Any, bad_fill: str, src: str) -> _Val:
        """The tensor a mask fills, checked together with the fill value (only -inf)."""
        x = self._tensor(x, what, src)
        if not (isinstance(fill, float) and math.isinf(fill) and fill < 0):
            raise FrontendError(f"{src}: {bad_fill}")
        return x

    def masked_fill(self, x: Any, m: Any, fill: Any, region: str, src: str) -> _Val:
        x = self._fill_target(x, "masked_fill input", fill, f"masked_fill with value {fill!r}: only "
                              "-inf fills (attention masks) are supported", src)
        mname = self._mask_input(m, src, inverted=True)
        return self._masked(x, mname, x.t.masked_fill(m.t, fill), region, src)

    def where(self, m: Any, x: Any, fill: Any, region: str, src: str) -> _Val:
        x = self._fill_target(x, "where input", fill, f"where(mask, x, {fill!r}): only a -inf fill "
                              "(attention masks) is supported", src)
        mname = self._mask_input(m, src, inverted=False)
        return self._masked(x, mname, torch.where(m.t, x.t, fill), region, src)


_BINOPS = {operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub",
           operator.mul: "mul", torch.mul: "mul", operator.truediv: "div", torch.div: "div"}

# call_function targets -> handler, tried in this order
_FUNCTIONS: tuple[tuple[tuple[Any, ...], Any], ...] = (
    ((torch.matmul, operator.matmul, torch.mm, torch.bmm, torch.sparse.mm), _Interp._fn_matmul),
    ((torch.einsum,), _Interp._fn_einsum),
    ((F.linear,), _Interp._fn_linear),
    (tuple(_BINOPS), _Interp._fn_binary),
    ((torch.relu, F.relu), _Interp._fn_relu),
    ((F.gelu,), _Interp._fn_gelu),
    ((operator.neg,), _Interp._fn_neg),
    ((torch.softmax, F.softmax), _Interp._fn_softmax),
    ((F.layer_norm,), _Interp._fn_layer_norm),
    ((torch.transpose, torch.permute, torch.t), _Interp._fn_permute),
    ((torch.reshape,), _Interp._fn_reshape),
    ((torch.sum, torch.mean, torch.max), _Interp._fn_reduce),
    ((operator.invert,), _Interp._fn_invert),
    ((torch.where,), _Interp._fn_where),
)


def _fetch_attr(gm, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _opname(node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    mod = getattr(t, "__module__", None) or ""
    return f"{mod + '.' if mod and mod != 'builtins' else ''}{getattr(t, '__name__', repr(t))}"


def _region(node, args, b: _Builder) -> str:
    """Fusion-region tag: the outermost submodule (with its ModuleList index) that made the op;
    an op made by the root module joins the latest region (in the order regions first appear)
    that produced one of its tensor operands, so a region never reads a later region's output
    (``self.a(x) + self.b(y)`` goes with ``b``)."""
    stack = node.meta.get("nn_module_stack") or {}
    for path, (_, cls) in stack.items():
        if isinstance(cls, type) and issubclass(cls, (nn.ModuleList, nn.Sequential)):
            continue
        return str(path)
    operands = [b.region_of.get(a.name.lstrip("~")) for a in (args if isinstance(args, (tuple, list)) else ())
                if isinstance(a, _Val)]
    regions = [r for r in operands if r]
    if not regions:
        return "main"
    order = {r: k for k, r in reversed(list(enumerate(n.region for n in b.nodes)))}
    return max(regions, key=lambda r: order.get(r, -1))
