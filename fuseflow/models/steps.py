"""What a compiled model is: its steps (compiled programs, ML subgraphs, host steps,
conversions) and the record of a run (:class:`ModelRun`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from fuseflow import compiler as fc
from fuseflow.compiler import (
    CompiledProgram,
    Options,
    Program,
    parse_format,
    reference_all,
)
from fuseflow.ir.numerics import Mode, Numerics
from fuseflow.ir.overflow import Overflow
from fuseflow.ir.samml import Graph
from fuseflow.ir.tensor import Format, TensorData, TensorFormat

from .ir import MKind, MNode, ModelIR

FUSIONS = ("unfused", "partial", "full")
_COMPILER = {MKind.EINSUM, MKind.ADD, MKind.SUB, MKind.MUL, MKind.MASK, MKind.DIV, MKind.MAXIMUM,
             MKind.MINIMUM}
WORD_BYTES = 4  # a stored word (value, coordinate or segment entry) a host step reads or writes
_ELEMENTWISE = {MKind.SCALE, MKind.ADD_SCALAR, MKind.UNARY}  # compiler or ML subgraph
_ML = {MKind.SCALE, MKind.ADD_SCALAR, MKind.UNARY, MKind.SOFTMAX, MKind.LAYERNORM, MKind.MAX}


def compiler_has_unary() -> bool:
    """Whether the Program API has elementwise functions (relu, gelu) and float scalars."""
    return all(hasattr(fc, f) for f in ("relu", "gelu"))


def compiler_has_row_functions() -> bool:
    """Whether the Program API has the row functions softmax and layernorm."""
    return all(hasattr(fc, f) for f in ("softmax", "layernorm"))


@dataclass
class CompilerStep:
    nodes: list[MNode]
    compiled: CompiledProgram
    inputs: list[str]
    outputs: list[str]
    options: Options | None = None  # what it was compiled with (schedule ranking recompiles)
    converted: dict[str, TensorFormat] = field(default_factory=dict)  # inputs a ConvertStep made

    @property
    def graphs(self) -> list[Graph]:
        return self.compiled.graphs

    def label(self) -> str:
        return f"einsum program [{', '.join(n.name for n in self.nodes)}] -> {len(self.graphs)} graph(s)"


@dataclass
class MLStep:
    nodes: list[MNode]
    graph: Graph
    input: str
    output: str
    in_fmt: TensorFormat

    @property
    def graphs(self) -> list[Graph]:
        return [self.graph]

    def label(self) -> str:
        return f"ML subgraph [{', '.join(f'{n.kind.value}' for n in self.nodes)}] {self.input} -> {self.output}"


class _OnHost:
    """A step computed on the host: no dataflow graphs."""

    @property
    def graphs(self) -> list[Graph]:
        return []


@dataclass
class HostStep(_OnHost):
    """A reshape, or a transpose next to a reshape / of a materialised input: host data movement."""

    node: MNode
    fmt: TensorFormat | None = None  # the result's format (None: dense); a sparse matrix stays sparse
    kind = "data movement"

    @property
    def reads(self) -> list[str]:
        return [self.node.args[0]]

    @property
    def sparse(self) -> bool:
        return self.fmt is not None and Format.COMPRESSED in self.fmt.levels

    def label(self) -> str:
        what = "reshape" if self.node.kind is MKind.RESHAPE else f"permute {self.node.attrs['spec']}"
        kept = f", kept sparse ({self.fmt})" if self.sparse else ""
        return f"host {what} {self.node.args[0]} -> {self.node.name} {list(self.node.shape)}{kept} (fusion barrier)"

    def run(self, tensors: Mapping[str, TensorData], num: Numerics) -> TensorData:
        """The step on the host: a sparse matrix transposed through ``scipy.sparse`` (no dense
        copy), anything else through a dense array (raw values: the numerics do not matter)."""
        n = self.node
        src = tensors[n.args[0]]
        if self.sparse and self.fmt is not None:
            lhs, out = n.attrs["spec"].split("->")
            m = src.to_scipy()
            return TensorData.from_scipy(m.T if lhs != out else m, self.fmt)
        arr = src.to_dense()
        arr = np.einsum(n.attrs["spec"], arr) if n.kind is MKind.EINSUM else arr.reshape(n.shape)
        return TensorData.from_dense(arr, TensorFormat((Format.DENSE,) * len(n.shape)))


@dataclass
class HostOpStep(_OnHost):
    """A graph break: a node without a dataflow form (an ATen op the frontend made a host node,
    or a node the compiler rejected) computed on the host between accelerated regions; its
    operands are materialised dense and its result is dense (masked scores: stored at the
    keep-mask's entries, so that the softmax after them stays masked).  ``why`` says why it is
    not on dataflow, ``sparse_reads`` which operands are stored sparse (densified here)."""

    node: MNode
    why: str
    sparse_reads: list[str] = field(default_factory=list)
    program: Program | None = None  # a rejected compiler node: evaluated as this one-statement program
    kind = "graph break"

    @property
    def reads(self) -> list[str]:
        return list(dict.fromkeys(self.node.args))

    def label(self) -> str:
        n = self.node
        what = n.attrs.get("op", n.kind.value)
        dense = f"; reads sparse {', '.join(self.sparse_reads)} as dense arrays" if self.sparse_reads else ""
        return (f"host {what} ({', '.join(n.args)}) -> {n.name} {list(n.shape)}: graph break, {self.why}"
                f"{dense}")

    def run(self, tensors: Mapping[str, TensorData], num: Numerics) -> TensorData:
        """On the host in float64: operands dequantised, the result quantised again."""
        n = self.node
        arrays = [np.asarray(num.dequantize(tensors[a].to_dense()), dtype=np.float64) for a in n.args]
        if self.program is not None:
            env = reference_all(self.program, {a: tensors[a] if num.mode is Mode.FLOAT else
                                               TensorData.from_dense(arr, tensors[a].fmt)
                                               for a, arr in zip(n.args, arrays)}, np.float64)
            out = env[n.name]
        else:
            out = n.attrs["fn"](*arrays)
        out = np.asarray(out, dtype=np.float64).reshape(n.shape)
        out = num.quantize(out) if num.mode is not Mode.FLOAT else out
        if n.kind is MKind.MASK:  # the masked scores store the mask's coordinates, zeros included
            keep = np.broadcast_to(arrays[0] != 0, out.shape)
            return TensorData._from_present(out, keep, _masked_format(len(n.shape)), out.shape)
        return TensorData.from_dense(out, TensorFormat((Format.DENSE,) * len(n.shape)))


def _masked_format(order: int) -> TensorFormat:
    """The format of masked scores computed on the host: rows of the keep-mask's entries."""
    return TensorFormat((Format.DENSE,) * (order - 1) + (Format.COMPRESSED,))


@dataclass
class ConvertStep(_OnHost):
    """A format conversion on the host (CSR ↔ CSC, DCSR → CSR, COO → CSR, …) that a compiled
    step needs: the order its program can iterate, or the levels its consumer reads.  Sparse
    stays sparse (``TensorData.convert`` goes through ``scipy.sparse``)."""

    tensor: str
    src: TensorFormat
    dst: TensorFormat
    why: str
    kind = "conversion"

    @property
    def reads(self) -> list[str]:
        return [self.tensor]

    @property
    def output(self) -> str:
        return converted_name(self.tensor, self.dst)

    def label(self) -> str:
        return f"host conversion {self.tensor}: {self.src} -> {self.dst} ({self.why})"

    def run(self, tensors: Mapping[str, TensorData], num: Numerics) -> TensorData:
        return tensors[self.tensor].convert(self.dst)


def converted_name(tensor: str, fmt: TensorFormat) -> str:
    """The name of ``tensor`` converted to ``fmt`` (a program reads it under this name)."""
    letters = "".join(f.letter for f in fmt.levels)
    order = "".join(str(m) for m in fmt.mode_order)
    return f"{tensor}__{letters}{order}"


Step = CompilerStep | MLStep | HostStep | HostOpStep | ConvertStep


@dataclass
class CompiledModel:
    ir: ModelIR
    fusion: str
    steps: list[Step]
    seconds: float  # compile time (planning + FuseFlow compiler + subgraph building)
    notes: list[str] = field(default_factory=list)  # fusion fallbacks
    consts: dict[str, np.ndarray] = field(default_factory=dict)  # inputs added by lowering (ones)

    @property
    def graphs(self) -> list[Graph]:
        return [g for s in self.steps for g in s.graphs]

    def largest_graph(self) -> Graph:
        return max(self.graphs, key=lambda g: len(g.nodes))

    @property
    def host_steps(self) -> list[Step]:
        """Steps that run on the host: graph breaks, format conversions, data movement."""
        return [s for s in self.steps if isinstance(s, HostStep | HostOpStep | ConvertStep)]

    @property
    def breaks(self) -> list[HostOpStep]:
        return [s for s in self.steps if isinstance(s, HostOpStep)]

    def explain(self) -> str:
        """Every step with the model nodes it computes and their source lines; per graph the
        fused Einsum and the legend of its fused indices (``u0`` is index ``k`` of …)."""
        kinds: dict[str, int] = {}
        for s in self.host_steps:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        host = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) or "none"
        lines = [(f"model {self.ir.name} (captured with {self.ir.capture}), fusion {self.fusion}: "
                  f"{len(self.steps)} steps, {len(self.graphs)} graphs, host steps: {host}; compiled in "
                  f"{self.seconds * 1e3:.1f} ms")]
        for k, s in enumerate(self.steps):
            lines.append(f"  {k:2d}. {s.label()}")
            lines += _step_details(s)
        lines += _mask_lines(self.steps)
        lines += [f"  note: {n}" for n in self.ir.notes + self.notes]
        return "\n".join(lines)


def _mask_lines(steps: list[Step]) -> list[str]:
    """One line per keep-mask taken from the code (``masked_fill(~M, -inf)`` / ``where(M, x,
    -inf)`` before a softmax, rewritten into ``M ⊙ x``): masking is the semantics there only."""
    out = []
    for s in steps:
        nodes = s.nodes if isinstance(s, CompilerStep | MLStep) else [s.node] if hasattr(s, "node") else []
        for n in nodes:
            if n.kind is MKind.MASK:
                out.append(f"  mask taken from the code: {n.name} keeps the scores {n.args[1]} at the entries "
                           f"of {n.args[0]} only (a -inf fill outside them: the softmax after it runs over "
                           f"those entries, implicit zeros of the scores inside the mask count as 0)  "
                           f"<- {n.source}")
    return out


def _node_line(n: MNode) -> str:
    what = {MKind.EINSUM: f"einsum {n.attrs.get('spec')}" + (f" reduce={n.attrs['reduce']}" if n.attrs.get("reduce") else ""),
            MKind.UNARY: n.attrs.get("op", "unary"), MKind.SCALE: f"scale {n.attrs.get('c')}",
            MKind.ADD_SCALAR: f"shift {n.attrs.get('c')}",
            MKind.HOST: str(n.attrs.get("op"))}.get(n.kind, n.kind.value)
    return f"{n.name} = {what}({', '.join(n.args)})  <- {n.source}"


def _step_details(s: Step) -> list[str]:
    """The lines under a step in :meth:`CompiledModel.explain`."""
    out: list[str] = []
    if isinstance(s, CompilerStep):
        for cg in s.compiled.groups:  # what --par can split, and what it did
            out.append(f"      graph {cg.graph.name}: indices {', '.join(cg.graph.indices) or 'none'}")
            out += [f"        fused: {line}" for line in cg.group.fused_einsum().splitlines()]
            out += [f"        {i} is {what}" for i, what in cg.group.origins.items()]
            out += [f"        parallel: {r.describe()}" for r in cg.parallel]
            out += [f"        note: {n}" for n in cg.group.notes]  # densified iterations, ...
        for pc in s.compiled.permuted:
            out.append(f"      conversion (compiler's permuted copy): {pc.name} = {pc.source} stored as "
                       f"{pc.fmt} ({pc.reason})")
        nodes = s.nodes
    elif isinstance(s, MLStep):
        nodes = s.nodes
    elif isinstance(s, ConvertStep):
        return []
    else:
        nodes = [s.node]
    out += [f"      {_node_line(n)}" for n in nodes]
    return out


@dataclass
class ModelRun:
    outputs: dict[str, np.ndarray]
    cycles: list[tuple[str, int]]  # (graph name, cycles) in run order
    wall_seconds: float
    tensors: dict[str, TensorData] = field(default_factory=dict)
    counters: list[tuple[str, dict]] = field(default_factory=list)  # (graph, sw_sim counters)
    saturated: dict[str, int] = field(default_factory=dict)  # values clamped per input (saturate=True)
    overflows: dict[str, int] = field(default_factory=dict)  # "graph/node" -> results saturated in sw_sim
    overflow_records: list[Overflow] = field(default_factory=list)  # the same, with magnitudes and format
    # host steps (graph breaks, conversions, data movement) as materialisations: kind, bytes read / written
    host: list[dict] = field(default_factory=list)

    @property
    def materialised_bytes(self) -> int:
        """Bytes the host steps read and wrote (every one a round trip through memory)."""
        return sum(h["bytes_read"] + h["bytes_written"] for h in self.host)

    @property
    def total_cycles(self) -> int:
        return sum(c for _, c in self.cycles)


def _input_format(ir: ModelIR, n: MNode) -> TensorFormat:
    """The annotated format; an unannotated dense weight read as ``x·Wᵀ`` (a linear layer) is
    stored column-major, i.e. as ``Wᵀ`` in row-major order, the order the product reads it."""
    if n.name in ir.formats:
        return parse_format(n.name, ir.formats[n.name], len(n.shape))
    if len(n.shape) == 2 and any(u.kind is MKind.EINSUM and len(u.args) == 2 and u.args[1] == n.name
                                 and u.attrs["spec"].split("->")[0].split(",")[1] == "jk"
                                 for u in ir.users(n.name)):
        return TensorFormat((Format.DENSE, Format.DENSE), (1, 0))
    return parse_format(n.name, "dense", len(n.shape))
