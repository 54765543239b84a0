"""The torch.export side of the PyTorch frontend: capture a module as a core-ATen graph and map
every ATen op to the model IR (:mod:`fuseflow.models.ir`).

:func:`capture` is :func:`fuseflow.models.frontend.trace`'s default path:

1. ``torch.export.export`` (non-strict) captures ``module(**inputs)``.  Torch sparse tensors
   (COO / CSR / CSC / BSR inputs, parameters and buffers) are replaced during the capture by
   dense *stand-ins* of their shape that take no memory (a zero expanded over the shape), so
   no op ever runs on a sparse tensor and nothing is densified; the IR keeps them as
   ``scipy.sparse`` arrays with their format.
2. ``ExportedProgram.run_decompositions`` lowers the graph with torch's core-ATen
   decomposition table, except the composite ops that are model-IR kinds themselves
   (:data:`PRESERVED`: ``linear``, ``matmul``, ``einsum``, ``_sparse_mm``): ``silu``,
   ``dropout`` (eval), ``layer_norm``, ``softmax``, ``reshape`` … reach the op table below as
   core ATen ops.
3. :class:`_Lower` walks the ATen graph once.  Shapes come from the export's fake tensors
   (``node.meta["val"]``), fusion regions from ``nn_module_stack``, source lines from
   ``stack_trace``.  Ops without a dataflow form become ``host`` nodes: graph breaks that run
   the ATen op in PyTorch between accelerated regions (:class:`~fuseflow.models.ir.MKind`
   ``HOST``, listed by ``CompiledModel.explain()``).

Values that are only views (``unsqueeze``, ``expand``, a ``keepdim`` reduction, a reshape
that adds or drops size-1 axes) are not materialised: a value carries the ATen axes its IR
tensor stores (``keep``); the other axes are *virtual* (the value is constant along them).
Elementwise ops broadcast over virtual axes with einsums (a product broadcasts directly, a sum
through an outer product with a ones vector), which is what keeps ``x - x.mean(-1,
keepdim=True)`` on dataflow.
"""

from __future__ import annotations

import math
import operator
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self

import numpy as np
import scipy.sparse as sp
import torch

from fuseflow.compiler import ProgramError, parse_format

from . import aten_idioms as _idioms
from . import aten_ops as _ops
from .aten_values import _C, _G, _T, _letters, _Multi, _scalar, _Unsupported
from .ir import FrontendError, MKind, MNode, ModelIR, check_format_names

__all__ = ["DENSE_LIMIT", "PRESERVED", "SUPPORTED_OPS", "ExportFailed", "capture", "decomposition_table"]

aten = torch.ops.aten

# a sparse tensor of more elements than this is never made dense (N-D sparse inputs)
DENSE_LIMIT = 1 << 24

# composite ops that are model-IR kinds themselves: the decomposition keeps them whole
PRESERVED = (aten.linear.default, aten.matmul.default, aten.einsum.default, aten._sparse_mm.default,
             aten.scaled_dot_product_attention.default)


class ExportFailed(FrontendError):
    """torch.export cannot capture the module (the message says why and where)."""

    def __init__(self, message: str, data_dependent: bool) -> None:
        super().__init__(message)
        self.data_dependent = data_dependent


_TABLE: dict | None = None


def decomposition_table():
    """torch's core-ATen decomposition table without the entries of :data:`PRESERVED`."""
    global _TABLE
    if _TABLE is None:
        table = torch.export.default_decompositions()
        for op in PRESERVED:
            table.pop(op, None)
        _TABLE = table
    return _TABLE


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def _source(node) -> str:
    """``file:line: code`` of the user frame that created an ATen node."""
    st = node.meta.get("stack_trace") or ""
    frames = [m for m in _FRAME.finditer(st) if "/torch/" not in m[1]]
    if not frames:
        return f"(ATen node {node.name})"
    m = frames[-1]
    return f"{m[1]}:{m[2]}: {m[4].strip()}"


def _np(value: torch.Tensor) -> np.ndarray:
    v = value.detach()
    if v.dtype == torch.bool:
        return v.numpy().copy()
    return v.to(torch.float64).numpy().copy()


# ----------------------------------------------------------------------------- sparse inputs
_LAYOUT_FORMATS = {torch.sparse_csr: "csr", torch.sparse_csc: "csc", torch.sparse_coo: "coo",
                   torch.sparse_bsr: "csr", torch.sparse_bsc: "csc"}


def sparse_value(t: torch.Tensor) -> tuple[Any, str, str | None]:
    """A torch sparse tensor as (``scipy.sparse`` array or, above order 2, a numpy array within
    :data:`DENSE_LIMIT`; its compiler format; a conversion note or None)."""
    layout = t.layout
    fmt = _LAYOUT_FORMATS.get(layout)
    if fmt is None:
        raise FrontendError(f"sparse layout {layout} is not supported (COO, CSR, CSC, BSR or BSC)")
    if t.dim() != 2:
        if layout is not torch.sparse_coo:
            raise FrontendError(f"a {layout} tensor of order {t.dim()}: only COO tensors may have an "
                                "order other than 2")
        if t.numel() > DENSE_LIMIT:
            raise FrontendError(f"a sparse COO tensor of shape {tuple(t.shape)} (over {DENSE_LIMIT} "
                                "elements): only matrices are kept in scipy form")
        return t.to_dense().to(torch.float64).numpy(), "coo", None
    note = None
    if layout in (torch.sparse_bsr, torch.sparse_bsc):
        blk = tuple(t.values().shape[1:3])
        note = (f"{layout} with {blk[0]}x{blk[1]} blocks converted to {fmt.upper()} on the host "
                "(the compiler's programs take no block operands; no dense copy)")
        t = t.to_sparse_coo()
        layout = torch.sparse_coo
    if layout is torch.sparse_coo:
        t = t.coalesce()
        r, c = t.indices().numpy()
        m = sp.coo_array((t.values().to(torch.float64).numpy(), (r, c)), shape=tuple(t.shape)).tocsr()
    elif layout is torch.sparse_csr:
        m = sp.csr_array((t.values().to(torch.float64).numpy().copy(), t.col_indices().numpy().copy(),
                          t.crow_indices().numpy().copy()), shape=tuple(t.shape))
    else:  # CSC
        m = sp.csc_array((t.values().to(torch.float64).numpy().copy(), t.row_indices().numpy().copy(),
                          t.ccol_indices().numpy().copy()), shape=tuple(t.shape)).tocsr()
    m.sum_duplicates()
    m.sort_indices()
    return m, fmt, note


def _stand_in(t: torch.Tensor) -> torch.Tensor:
    """A dense tensor of ``t``'s shape and dtype that takes one element of memory."""
    return torch.zeros((), dtype=t.dtype).expand(tuple(t.shape))


class _SparseSwap:
    """Within the ``with`` block, sparse parameters and buffers of ``module`` are dense
    stand-ins (torch.export cannot trace ops on sparse tensors); restored on exit."""

    def __init__(self, module) -> None:
        self.module = module
        self.saved: list[tuple[Any, str, str, Any]] = []
        self.originals: dict[str, torch.Tensor] = {}

    def __enter__(self) -> Self:
        for kind, items in (("_parameters", self.module.named_parameters()),
                            ("_buffers", self.module.named_buffers())):
            for qual, t in list(items):
                if t is None or t.layout == torch.strided:
                    continue
                owner_path, _, leaf = qual.rpartition(".")
                owner = self.module.get_submodule(owner_path) if owner_path else self.module
                self.saved.append((owner, kind, leaf, getattr(owner, kind)[leaf]))
                self.originals[qual] = t
                s = _stand_in(t)
                getattr(owner, kind)[leaf] = torch.nn.Parameter(s, requires_grad=False) \
                    if kind == "_parameters" else s
        return self

    def __exit__(self, *exc) -> None:
        for owner, kind, leaf, t in reversed(self.saved):
            getattr(owner, kind)[leaf] = t


_DATA_DEPENDENT = ("data-dependent", "data dependent", "GuardOnDataDependentSymNode",
                   "Could not guard on data-dependent", "Could not extract specialized integer",
                   "DataDependentOutputException", "Dynamic control flow",
                   "is not supported with data dependent", "_local_scalar_dense", "aten.nonzero", "item()")


def _export(module, inputs: Mapping[str, Any]):
    """``torch.export.export`` of ``module(**inputs)`` with sparse tensors as stand-ins, then
    the core-ATen decompositions: the ExportedProgram."""
    stand = {k: (_stand_in(v) if isinstance(v, torch.Tensor) and v.layout != torch.strided else v)
             for k, v in inputs.items()}
    sparse = [v for v in inputs.values() if isinstance(v, torch.Tensor) and v.layout != torch.strided]
    with _SparseSwap(module) as swap, _idioms.SparseIdioms(sparse + list(swap.originals.values())):
        return export_program(module, (), stand)


def export_program(module, args: tuple, kwargs: Mapping[str, Any]):
    """``torch.export.export(module, args, kwargs)`` (non-strict, torch's logging and prints
    silenced) lowered to core ATen: the ExportedProgram, or :class:`ExportFailed`."""
    with warnings.catch_warnings(), _quiet_torch():
        warnings.simplefilter("ignore")
        try:
            ep = torch.export.export(module, args, dict(kwargs), strict=False)
        except Exception as exc:  # noqa: BLE001 - export raises many exception types
            text = f"{type(exc).__name__}: {exc}"
            dd = any(k in text for k in _DATA_DEPENDENT)
            first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
            where = _user_line(exc)
            raise ExportFailed(f"torch.export cannot capture {type(module).__name__}"
                               f"{' at ' + where if where else ''}: {first[:300]}", dd) from None
        if any(n.op == "call_function" and hasattr(n.target, "_op") and n.target not in PRESERVED
               and _needs_decomposition(n.target) for n in ep.graph.nodes):
            ep = ep.run_decompositions(decomposition_table())
    return ep


class _quiet_torch:
    """Silence torch's loggers (graph dumps, symbolic-shape warnings) while capturing: a
    failure is reported as one line by the frontend."""

    NAMES = ("torch", "torch.export", "torch._dynamo", "torch.fx.experimental.symbolic_shapes",
             "torch._export", "torch._subclasses")

    def __enter__(self) -> None:
        import contextlib
        import io
        import logging

        self.out = contextlib.redirect_stdout(io.StringIO())
        self.err = contextlib.redirect_stderr(io.StringIO())
        self.out.__enter__()
        self.err.__enter__()
        self.levels = [(lg, lg.level) for lg in map(logging.getLogger, self.NAMES)]
        for lg, _ in self.levels:
            lg.setLevel(logging.CRITICAL)

    def __exit__(self, *exc) -> None:
        for lg, level in self.levels:
            lg.setLevel(level)
        self.err.__exit__(*exc)
        self.out.__exit__(*exc)


def _needs_decomposition(op) -> bool:
    """Whether ``op`` is not already a core-ATen op (or one the lowering maps directly)."""
    return op not in _DIRECT and torch.Tag.core not in getattr(op, "tags", ())


def _user_line(exc: BaseException) -> str:
    """The last user frame of ``exc``'s traceback (``file:line: code``), or ''."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/torch/" not in f.filename and "/fuseflow/models/" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename}:{f.lineno}: {(f.line or '').strip()}"


# ----------------------------------------------------------------------------- the lowering
@dataclass
class _State:
    nodes: list[MNode] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    region_of: dict[str, str] = field(default_factory=dict)
    count: int = 0


class _Lower:
    """Walks an ExportedProgram's graph, mapping each ATen node to IR nodes."""

    def __init__(self, ep, module, inputs: Mapping[str, Any], formats: Mapping[str, str],
                 originals: Mapping[str, torch.Tensor]) -> None:
        self.ep = ep
        self.module = module
        self.inputs = inputs
        self.user_formats = dict(formats)
        self.originals = originals
        self.s = _State()
        self.env: dict[str, Any] = {}
        self.node = None  # the ATen node being lowered
        self.src = ""
        self.region = "main"
        self.consts: dict[tuple, str] = {}
        self.int_inputs: dict[str, np.ndarray] = {}  # integer inputs compiled in as constants
        self.patterns: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # sparse patterns compiled in
        self.const_count = 0  # numbers the constants' names (never reused: drop_input)

    # ---- IR construction
    def fresh(self, base: str) -> str:
        self.s.count += 1
        return f"t{self.s.count}_{re.sub(r'[^A-Za-z0-9]', '_', base)}"

    def emit(self, base: str, kind: MKind, args: tuple[str, ...], out_shape: tuple[int, ...],
             **attrs: Any) -> str:
        name = self.fresh(base)
        self.s.nodes.append(MNode(name, kind, tuple(args), tuple(int(x) for x in out_shape), self.region,
                                  self.src, attrs))
        self.s.region_of[name] = self.region
        return name

    def add_input(self, name: str, value, fmt: str | None, note: str | None = None) -> str:
        name = name.replace(".", "_")
        if name in self.s.data:
            return name
        fmt = self.user_formats.get(name) or fmt
        if isinstance(value, torch.Tensor):
            value = _np(value)
        self.s.data[name] = value
        shape = tuple(int(x) for x in value.shape)
        if fmt is not None and fmt != "dense":
            try:
                parse_format(name, fmt, len(shape))
            except ProgramError as exc:
                raise FrontendError(f"formats annotation: {exc}") from None
            self.s.formats[name] = fmt
        if note:
            self.s.notes.append(f"{name}: {note}")
        self.s.nodes.append(MNode(name, MKind.INPUT, (), shape, "", "input"))
        self.s.region_of[name] = ""
        return name

    def const_input(self, base: str, array: np.ndarray, fmt: str | None = None) -> str:
        """A constant the lowering adds (ones vectors, selection matrices), deduplicated."""
        key = (base, array.shape, fmt, array.tobytes())
        if key not in self.consts:
            name = f"_{base}{self.const_count}"
            self.const_count += 1
            self.s.data[name] = sp.csr_array(array) if fmt == "csr" else array
            if fmt:
                self.s.formats[name] = fmt
            self.s.nodes.append(MNode(name, MKind.INPUT, (), tuple(array.shape), "", "frontend constant"))
            self.s.region_of[name] = ""
            self.consts[key] = name
        return self.consts[key]

    def const_sparse(self, base: str, m: sp.sparray) -> str:
        """A sparse constant matrix the lowering adds (a graph's adjacency made from
        ``edge_index``, a selection matrix), stored CSR, deduplicated."""
        m = sp.csr_array(m, dtype=np.float64)
        m.sum_duplicates()
        m.sort_indices()
        key = (base, m.shape, "csr", m.indptr.tobytes(), m.indices.tobytes(), m.data.tobytes())
        if key not in self.consts:
            name = f"_{base}{self.const_count}"
            self.const_count += 1
            self.s.data[name] = m
            self.s.formats[name] = "csr"
            self.s.nodes.append(MNode(name, MKind.INPUT, (), tuple(m.shape), "", "frontend constant"))
            self.s.region_of[name] = ""
            self.consts[key] = name
        return self.consts[key]

    def drop_input(self, name: str) -> None:
        """Remove a constant the lowering added that nothing reads any more."""
        self.s.nodes = [n for n in self.s.nodes if n.name != name]
        self.s.data.pop(name, None)
        self.s.formats.pop(name, None)
        self.s.region_of.pop(name, None)
        self.consts = {k: v for k, v in self.consts.items() if v != name}

    def ones(self, n: int) -> str:
        return self.const_input("ones", np.ones(n))

    def kind_of(self, name: str) -> MKind:
        for n in reversed(self.s.nodes):
            if n.name == name:
                return n.kind
        raise KeyError(name)

    # ---- driver
    def run(self) -> tuple[list[str], list[str]]:
        vals = self.run_graph(self.ep, self.placeholder)
        return [self.output(v) for v in vals], []

    def run_graph(self, ep, bind) -> list[Any]:
        """Lower one ExportedProgram; ``bind(node, spec)`` gives each placeholder's value.
        Returns the values of the graph's outputs."""
        self.ep = ep
        sig = ep.graph_signature
        specs = {s.arg.name: s for s in sig.input_specs if hasattr(s.arg, "name")}
        outputs: list[Any] = []
        for node in ep.graph.nodes:
            self.node = node
            self.src = _source(node)
            if node.op == "placeholder":
                self.env[node.name] = bind(node, specs.get(node.name))
            elif node.op == "output":
                outputs = [self.env[v.name] if hasattr(v, "meta") else v for v in node.args[0]]
            elif node.op == "call_function":
                if not node.users:  # dead (an unused output of a tuple-valued op)
                    continue
                self.region = self.region_for(node)
                self.env[node.name] = self.call(node)
            else:
                raise FrontendError(f"{self.src}: unexpected graph node {node.op} {node.target}")
        return outputs

    def placeholder(self, node, spec) -> Any:
        kind = spec.kind.name if spec is not None else "USER_INPUT"
        target = getattr(spec, "target", None) or node.target
        if kind == "CONSTANT_TENSOR":
            return _C(self.ep.constants[target])
        if kind in ("PARAMETER", "BUFFER"):
            t = self.originals.get(target)
            if t is None:
                t = self.ep.state_dict[target] if target in self.ep.state_dict else self.ep.constants[target]
            name = target
        else:
            name = node.target if node.target in self.inputs else node.name
            if name not in self.inputs:
                raise FrontendError(f"no example input for {name!r}")
            t = self.inputs[name]
        return self.input_value(name, t)

    def input_value(self, name: str, t) -> _T:
        """Model input / parameter / buffer ``name`` (a sparse one kept sparse)."""
        if not isinstance(t, torch.Tensor):
            raise FrontendError(f"input {name!r} must be a torch tensor, got {type(t).__name__}")
        note = None
        if t.layout == torch.strided and not t.dtype.is_floating_point and t.dtype != torch.bool:
            # an integer input (a graph's edge_index, an index list) is part of the model's
            # structure: a constant, so that what is computed from it (self loops, degrees,
            # normalisations) folds, and gathers / scatters by it become sparse matrices
            if name not in self.int_inputs:
                self.int_inputs[name] = t.detach().numpy().copy()
                self.s.notes.append(f"{name}: an integer input ({t.dtype}, shape {list(t.shape)}), compiled in "
                                    "as a constant (the gathers / scatters it indexes are sparse matrices "
                                    "made from its values; new values need a new trace)")
            return _C(t.detach().clone())
        if t.layout != torch.strided:
            value, fmt, note = sparse_value(t)
        else:
            value, fmt = _np(t), None
        ir_name = self.add_input(name, value, fmt, note)
        return _T(ir_name, tuple(t.shape), tuple(range(t.dim())), t.dtype)

    def output(self, v) -> str:
        v = self.env[v.name] if hasattr(v, "name") and not isinstance(v, _T | _G) else v
        v = self.gathered(v)
        if isinstance(v, _C) and v.value.is_floating_point():
            v = self.constant_output(v)
        if not isinstance(v, _T) or v.dtype == torch.bool:
            raise FrontendError(f"model output {v!r} is not a (float) tensor computed from the inputs")
        return self.materialise(v).name

    def constant_output(self, c: _C) -> _T:
        """A model output that does not depend on the input values (computed from empty
        tensors): made on the host."""
        fn = _HostCall(torch.clone, (c.value,), {}, None)
        shape = tuple(c.value.shape)
        name = self.emit("constant", MKind.HOST, (), shape, op="constant",
                         reason="the output does not depend on the input values (empty dimensions)",
                         fn=fn, bool_out=False)
        return _T(name, shape, tuple(range(len(shape))), c.value.dtype)

    def region_for(self, node) -> str:
        """The outermost submodule (not the root, a ModuleList / Sequential / ModuleDict) that
        made the op; a root op joins the latest region that produced one of its operands."""
        stack = node.meta.get("nn_module_stack") or {}
        for path, cls in stack.values():
            name = cls if isinstance(cls, str) else getattr(cls, "__qualname__", str(cls))
            path = re.sub(r"^L\['self'\]\.?", "", str(path))
            if not path or name.rsplit(".", 1)[-1] in ("ModuleList", "Sequential", "ModuleDict"):
                continue
            return path
        regions = [self.s.region_of.get(v.name) for v in _operand_tensors(node.args, self.env)]
        regions = [r for r in regions if r]
        if not regions:
            return "main"
        order = {r: k for k, r in reversed(list(enumerate(n.region for n in self.s.nodes)))}
        return max(regions, key=lambda r: order.get(r, -1))

    def call(self, node) -> Any:
        args = _load(node.args, self.env)
        kwargs = _load(node.kwargs, self.env)
        if node.target is operator.getitem:
            return self.getitem(args[0], args[1])
        packet = getattr(node.target, "__name__", "").split(".")[0]
        if packet == "index_put" and any(isinstance(i, _C) and i.value.numel() == 0 or
                                         isinstance(i, _C) and i.value.dtype == torch.bool and not bool(i.value.any())
                                         for i in args[1] if i is not None):
            return args[0]  # puts nothing (PyG's self loops where the graph has none)
        if any(isinstance(v, _G) for v in _flat_values((args, kwargs), {})):
            if packet in _G_PASS and isinstance(args[0], _G):
                return args[0]
            if packet not in _G_AWARE:
                args, kwargs = self.gathered((args, kwargs))
        if _empty_result(node) or (_empty_operand(args, kwargs) is not None and node.target is not aten.cat.default):
            return self.empty(node, args, kwargs)
        if all(not isinstance(v, _T | _G | _Multi) for v in _flat_values((args, kwargs), {})):
            return self.fold(node, args, kwargs)
        handler = _DIRECT.get(node.target) or _BY_PACKET.get(packet)
        try:
            if handler is None:
                raise _Unsupported(f"no dataflow form for {_opname(node)}")
            return handler(self, *args, **kwargs)
        except _Unsupported as why:
            return self.host(node, args, kwargs, str(why))
        except FrontendError:
            raise
        except (ProgramError, ValueError, TypeError, IndexError, KeyError) as exc:
            raise FrontendError(f"{self.src}: {_opname(node)}: {exc}") from None

    def gathered(self, a) -> Any:
        """``a`` with every pending gather (:class:`_G`) materialised."""
        if isinstance(a, _G):
            return _ops.materialise_gather(self, a)
        if isinstance(a, (list, tuple)):
            return type(a)(self.gathered(x) for x in a)
        if isinstance(a, dict):
            return {k: self.gathered(v) for k, v in a.items()}
        return a

    def fold(self, node, args, kwargs) -> Any:
        """An op on constants only: evaluated now (a constant of the graph)."""
        def real(a):
            if isinstance(a, _C):
                return a.value
            if isinstance(a, (list, tuple)):
                return type(a)(real(x) for x in a)
            return a
        out = node.target(*real(args), **{k: real(v) for k, v in kwargs.items()})
        if isinstance(out, torch.Tensor):
            return _C(out)
        if isinstance(out, (tuple, list)):
            return type(out)(_C(o) if isinstance(o, torch.Tensor) else o for o in out)
        return out

    def getitem(self, v, k) -> Any:
        if isinstance(v, _Multi):
            if v.parts is not None:
                return v.parts[k]
            return self.multi_item(v, k)
        return v[k]

    def multi_item(self, v: _Multi, k: int) -> Any:
        handler = _MULTI.get(v.node.target.__name__.split(".")[0])
        shape = _empty_operand(v.args, v.kwargs)
        if shape is not None:
            return self.host(v.node, v.args, v.kwargs, _empty_why(shape), index=k)
        if handler is not None:
            try:
                return handler(self, k, *v.args, **v.kwargs)
            except _Unsupported as why:
                return self.host(v.node, v.args, v.kwargs, str(why), index=k)
        return self.host(v.node, v.args, v.kwargs, f"no dataflow form for {_opname(v.node)}", index=k)

    # ---- empty dimensions
    def empty(self, node, args, kwargs) -> Any:
        """An op with a size-0 dimension in its result or a tensor operand (the compiler's
        tensors have positive dimensions).  An empty result has no values: a constant.  An op
        whose tensor operands are all empty (or constants) depends on their shapes only (a sum
        of nothing is 0): evaluated now, as PyTorch does it, into a constant.  Otherwise (an
        empty operand beside one with values) it runs on the host.  (``cat`` drops its empty
        operands itself.)"""
        val = node.meta.get("val")
        outs = [o for o in (val if isinstance(val, (tuple, list)) else (val,)) if isinstance(o, torch.Tensor)]
        if outs and all(0 in o.shape for o in outs):
            return _constant_like(val)
        shape = _empty_operand(args, kwargs)
        if any(isinstance(v, _T | _Multi) and (not isinstance(v, _T) or 0 not in v.shape)
               for v in _flat_values((args, kwargs), {})):
            return self.host(node, args, kwargs, _empty_why(shape))

        def zeros(a):
            if isinstance(a, _T):
                return torch.zeros(a.shape, dtype=a.dtype)
            if isinstance(a, _C):
                return a.value
            return type(a)(zeros(x) for x in a) if isinstance(a, (list, tuple)) else a
        try:
            with torch.no_grad():
                out = node.target(*zeros(args), **{k: zeros(v) for k, v in kwargs.items()})
        except Exception as exc:  # noqa: BLE001 - PyTorch refuses the op on empty tensors
            raise FrontendError(f"{self.src}: {_opname(node)} of a tensor of shape {list(shape or ())} "
                                f"(an empty dimension): {str(exc).strip().splitlines()[0]}") from None
        return _constant_like(out)

    # ---- graph breaks
    def host(self, node, args, kwargs, why: str, index: int | None = None) -> Any:
        """The op as a host node: it runs in PyTorch between accelerated regions."""
        val = node.meta.get("val")
        if isinstance(val, (tuple, list)) and index is None:
            return _Multi(node, args, kwargs)
        args, kwargs = self.gathered((args, kwargs))
        out = val[index] if index is not None else val
        if not isinstance(out, torch.Tensor):
            raise FrontendError(f"{self.src}: {_opname(node)} returns {type(out).__name__}, not a tensor: "
                                "only tensor-valued ops can run on the host between graphs")
        if not all(isinstance(d, int) for d in out.shape):
            raise FrontendError(f"{self.src}: {_opname(node)} has no dataflow form ({why}), and its result's "
                                f"shape {list(out.shape)} depends on the values of its operands, so it cannot "
                                "run on the host between graphs either")
        tensors: list[_T] = []

        def slot(a):
            if isinstance(a, _T):
                tensors.append(self.materialise(a))
                return _Slot(len(tensors) - 1, a.dtype)
            if isinstance(a, _C):
                return a.value
            if isinstance(a, (list, tuple)):
                return type(a)(slot(x) for x in a)
            if isinstance(a, _Multi):
                raise FrontendError(f"{self.src}: {_opname(node)} reads a tuple-valued op's result")
            return a

        targs = slot(args)
        tkw = {k: slot(v) for k, v in kwargs.items()}
        fn = _HostCall(node.target, targs, tkw, index)
        base = str(getattr(node.target, "__name__", "host")).split(".")[0].strip("_") or "host"
        name = self.emit(base, MKind.HOST,
                         tuple(t.name for t in tensors), tuple(out.shape), op=_opname(node), reason=why,
                         fn=fn, bool_out=out.dtype == torch.bool)
        return _T(name, tuple(out.shape), tuple(range(out.dim())), out.dtype)

    # ---- value helpers
    def materialise(self, v: _T) -> _T:
        """``v`` with every axis stored (virtual axes made real by outer products with ones; an
        inverted mask or a pending sqrt on the host)."""
        if v.inverted or v.sqrt:
            v = self.resolve(v)
        if v.full:
            return v
        nd = len(v.shape)
        letters = _letters(nd)
        missing = [a for a in range(nd) if a not in v.keep]
        ones = [self.ones(v.shape[a]) for a in missing]
        spec = ",".join([''.join(letters[a] for a in v.keep)] + [letters[a] for a in missing]) + "->" + letters
        name = self.emit("broadcast", MKind.EINSUM, (v.name, *ones), v.shape, spec=spec)
        return _T(name, v.shape, tuple(range(nd)), v.dtype)

    def resolve(self, v: _T) -> _T:
        """A pending ``~mask`` or ``sqrt`` made real on the host (nothing reads it on dataflow)."""
        if v.inverted:
            fn = _HostCall(torch.bitwise_not, (_Slot(0, torch.bool),), {}, None)
            name = self.emit("not", MKind.HOST, (v.name,), v.ir_shape, op="aten.bitwise_not",
                             reason="a boolean ~mask that is not an attention mask", fn=fn, bool_out=True)
            return replace(v, name=name, inverted=False)
        fn = _HostCall(torch.sqrt, (_Slot(0, torch.float64),), {}, None)
        name = self.emit("sqrt", MKind.HOST, (v.name,), v.ir_shape, op="aten.sqrt",
                         reason="sqrt has no dataflow form (only as a divisor: x / sqrt(y) = x * rsqrt(y))",
                         fn=fn, bool_out=False)
        return replace(v, name=name, sqrt=False)

    def squeeze_kept(self, v: _T, axes: list[int]) -> _T:
        """Drop stored size-1 axes ``axes`` (an einsum summing over a size-1 index)."""
        if not axes:
            return v
        letters = _letters(len(v.shape))
        keep = tuple(a for a in v.keep if a not in axes)
        spec = f"{''.join(letters[a] for a in v.keep)}->{''.join(letters[a] for a in keep)}"
        name = self.emit("squeeze", MKind.EINSUM, (v.name,), tuple(v.shape[a] for a in keep), spec=spec)
        return replace(v, name=name, keep=keep)

    def tensor(self, v, what: str, mask_ok: bool = False) -> _T:
        if not isinstance(v, _T):
            raise _Unsupported(f"{what} must be a tensor computed from the inputs")
        if v.dtype == torch.bool and not v.inverted and self.kind_of(v.name) is not MKind.INPUT:
            raise _Unsupported(f"{what} is a boolean tensor computed on the host")
        if self.kind_of(v.name) is MKind.MASK and not mask_ok:
            raise FrontendError(f"{self.src}: {what} reads the masked scores {v.name!r}; a masked "
                                "tensor (entries outside the mask are -inf) may only feed softmax")
        return v


class _Slot:
    """Where a host op's ``k``-th tensor operand goes, and its dtype."""

    def __init__(self, k: int, dtype) -> None:
        self.k = k
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"<operand {self.k}>"


class _HostCall:
    """A host node's function: numpy operands in, the ATen op in PyTorch, numpy out."""

    def __init__(self, op, args, kwargs, index: int | None) -> None:
        self.op = op
        self.args = args
        self.kwargs = kwargs
        self.index = index

    def __call__(self, *arrays: np.ndarray) -> np.ndarray:
        def fill(a):
            if isinstance(a, _Slot):
                arr = np.asarray(arrays[a.k])
                t = torch.from_numpy(np.ascontiguousarray(arr))
                return t != 0 if a.dtype == torch.bool else t.to(a.dtype)
            if isinstance(a, (list, tuple)):
                return type(a)(fill(x) for x in a)
            return a
        with torch.no_grad():
            out = self.op(*fill(self.args), **{k: fill(v) for k, v in self.kwargs.items()})
        if self.index is not None:
            out = out[self.index]
        if out.layout != torch.strided:  # a sparse tensor built on the host: its dense values
            out = out.to_dense()
        return out.detach().to(torch.float64).numpy()

    def __repr__(self) -> str:
        return f"<host call {getattr(self.op, '__name__', self.op)}>"


def _load(a, env):
    if hasattr(a, "op") and hasattr(a, "name") and hasattr(a, "meta"):
        return env[a.name]
    if isinstance(a, (tuple, list)):
        return type(a)(_load(x, env) for x in a)
    if isinstance(a, dict):
        return {k: _load(v, env) for k, v in a.items()}
    return a


def _flat_values(a, env):
    if hasattr(a, "op") and hasattr(a, "name") and hasattr(a, "meta"):
        yield env.get(a.name)
    elif isinstance(a, (tuple, list)):
        for x in a:
            yield from _flat_values(x, env)
    elif isinstance(a, dict):
        for x in a.values():
            yield from _flat_values(x, env)
    else:
        yield a


def _empty_operand(args, kwargs) -> tuple[int, ...] | None:
    """The shape of a tensor operand (a value or a constant) with a size-0 dimension, or None."""
    for v in _flat_values((args, kwargs), {}):
        shape = tuple(v.shape) if isinstance(v, _T) else tuple(v.value.shape) if isinstance(v, _C) else ()
        if 0 in shape:
            return shape
    return None


def _empty_result(node) -> bool:
    val = node.meta.get("val")
    # a data-dependent size (an unbacked symbol: the edges left after a boolean mask) is
    # not known to be 0 here; the fold of the op on constants computes the real shape
    return any(isinstance(o, torch.Tensor) and any(isinstance(s, int) and s == 0 for s in o.shape)
               for o in (val if isinstance(val, (tuple, list)) else (val,)))


def _empty_why(shape) -> str:
    return (f"an operand of shape {list(shape)} has an empty dimension (size 0) and another operand has "
            "values: computed on the host (the compiler's tensors have positive dimensions)")


def _constant_like(val) -> Any:
    """``val`` (a tensor, or a tuple of them, from the fake run or a real one) as constants;
    an empty one as zeros of its shape."""
    if isinstance(val, (tuple, list)):
        return type(val)(_constant_like(v) for v in val)
    if isinstance(val, torch.Tensor):
        return _C(torch.zeros(val.shape, dtype=val.dtype) if 0 in val.shape else val.detach())
    return val


def _operand_tensors(a, env):
    """The tensors ``a`` reads, through tuple-valued ops: the ``getitem`` of a ``_Multi``
    (``native_layer_norm``, ``max.dim``, ...) reads its op's tensor operands."""
    for v in _flat_values(a, env):
        if isinstance(v, _T):
            yield v
        elif isinstance(v, _G):
            yield v.src
        elif isinstance(v, _Multi):
            yield from _operand_tensors((v.args, v.kwargs, v.parts or ()), {})


def _opname(node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    name = getattr(t, "__name__", repr(t))
    if hasattr(t, "_op"):  # OpOverload: aten.add.Tensor (a custom op: fuseflow.sparse_part.default)
        ns = getattr(t, "namespace", "aten")
        return f"{ns}.{name}" if not name.startswith(ns) else name
    mod = getattr(t, "__module__", None) or ""
    return f"{mod + '.' if mod and mod != 'builtins' else ''}{name}"



_DIRECT: dict[Any, Callable] = {**_ops.DIRECT, **_idioms.DIRECT}
_G_AWARE = _ops.GATHER_AWARE
_G_PASS = _ops.GATHER_PASS
_BY_PACKET: dict[str, Callable] = _ops.BY_PACKET
_MULTI: dict[str, Callable] = _ops.MULTI
SUPPORTED_OPS: dict[str, str] = _ops.SUPPORTED


def capture(module, inputs: Mapping[str, Any], formats: Mapping[str, str] | None = None,
            name: str | None = None) -> ModelIR:
    """torch.export + core-ATen decompositions + the lowering: a :class:`ModelIR`.  Raises
    :class:`ExportFailed` when torch.export cannot capture the module."""
    fmts = {**getattr(module, "sparse_formats", {}), **(formats or {})}
    fmts = {k.replace(".", "_"): v for k, v in fmts.items()}
    check_format_names(module, inputs, fmts)
    for k, v in inputs.items():
        if not isinstance(v, torch.Tensor):
            raise FrontendError(f"input {k!r} must be a torch tensor, got {type(v).__name__}")
    originals = {q: t for q, t in list(module.named_parameters()) + list(module.named_buffers())
                 if t is not None and t.layout != torch.strided}
    ep = _export(module, inputs)
    low = _Lower(ep, module, inputs, fmts, originals)
    outs, _ = low.run()
    _check_masks(low.s.nodes)
    ir = ModelIR(name or type(module).__name__.lower(), low.s.nodes, low.s.data, low.s.formats, outs, {})
    ir.notes = low.s.notes
    ir.capture = "torch.export"
    ir.fixed_inputs = dict(low.int_inputs)
    ir.fixed_patterns = dict(low.patterns)
    return ir


def _check_masks(nodes: list[MNode]) -> None:
    for n in nodes:
        if n.kind is MKind.MASK:
            bad = [u for u in nodes if n.name in u.args and u.kind is not MKind.SOFTMAX]
            if bad:
                u = bad[0]
                raise FrontendError(f"{u.source}: {u.kind.value} reads the masked scores {n.name!r}; a "
                                    "masked tensor (entries outside the mask are -inf) may only feed "
                                    "softmax")


def _is_inf(v) -> bool:
    s = _scalar(v)
    return s is not None and math.isinf(s) and s < 0
