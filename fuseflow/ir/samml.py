"""SAMML graph IR: typed nodes, ports and edges, a verifier, JSON and DOT.

This module is the contract shared by the compiler (which emits graphs), sw_sim and hw (which
run them from the graph data alone) and the tests.  What a node kind is — its ports, stream
kinds, typed parameters, tensor use, latency and initiation interval — comes from its
declaration in :mod:`fuseflow.ir.primitives` (:data:`PRIMITIVES`); the verifier, JSON load/save
and DOT labels here are derived from those declarations.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from .json_file import JsonFileError, read_json
from .primitives import (
    PRIMITIVES,
    UNARY_ALU_OPS,
    AluOp,
    MaskPred,
    NodeKind,
    ParamError,
    Ports,
    PrimitiveSpec,
    ReduceOp,
    ScalarPort,
    StreamKind,
    StreamType,
    TensorUse,
    alu_latency,
)
from .tensor import Blocking, Format, TensorData, TensorFormat

__all__ = [
    "PRIMITIVES",
    "UNARY_ALU_OPS",
    "AluOp",
    "Edge",
    "Graph",
    "GraphError",
    "MaskPred",
    "Node",
    "NodeKind",
    "ParamError",
    "PortRef",
    "PrimitiveSpec",
    "ReduceOp",
    "Role",
    "ScalarPort",
    "StreamKind",
    "StreamType",
    "TensorSpec",
    "TensorUse",
    "alu_latency",
    "node_latency",
]


class Role(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"


class GraphError(ValueError):
    """A graph that breaks the SAMML rules; the message lists every problem found."""


# ----------------------------------------------------------------------------- graph objects
@dataclass(frozen=True)
class PortRef:
    node: str
    port: str

    def __str__(self) -> str:
        return f"{self.node}.{self.port}"

    @classmethod
    def parse(cls, text: str | PortRef) -> PortRef:
        if isinstance(text, PortRef):
            return text
        node, dot, port = text.rpartition(".")
        if not dot or not node or not port:
            raise GraphError(f"port reference {text!r} must read 'node.port'")
        return cls(node, port)


@dataclass
class Node:
    name: str
    kind: NodeKind
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> PrimitiveSpec:
        return PRIMITIVES[self.kind]

    def param(self, key: str) -> Any:
        if key in self.params:
            return self.params[key]
        return self.spec.defaults[key]

    def all_params(self) -> dict[str, Any]:
        return {**self.spec.defaults, **self.params}

    def typed(self) -> Any:
        """The parameters as the kind's declared dataclass (:class:`ParamError` if invalid)."""
        return self.spec.typed(self.params)

    def inputs(self) -> Ports:
        return self.spec.ports(self.params)[0]

    def outputs(self) -> Ports:
        return self.spec.ports(self.params)[1]

    def input_types(self) -> dict[str, StreamType]:
        """The input ports' stream types (kind and lanes)."""
        return self.spec.port_types(self.params)[0]

    def output_types(self) -> dict[str, StreamType]:
        """The output ports' stream types (kind and lanes)."""
        return self.spec.port_types(self.params)[1]

    def __getitem__(self, port: str) -> PortRef:
        return PortRef(self.name, port)


def node_latency(node: Node) -> int:
    """Latency of ``node`` (its declaration's, which may depend on the parameters)."""
    return node.spec.node_latency(node.params)


@dataclass(frozen=True)
class Edge:
    src: PortRef
    dst: PortRef
    depth: int | None = None  # None: the graph's default FIFO depth

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}"


@dataclass(frozen=True)
class TensorSpec:
    """A tensor of the graph: the shape and format it is stored in (what the nodes scan, load
    and write) and, for a tensor in a block format, ``block``: its original shape and block
    format (``shape`` / ``fmt`` are then the stored higher-order tensor's)."""

    name: str
    shape: tuple[int, ...]
    fmt: TensorFormat
    role: Role = Role.INPUT
    block: Blocking | None = None

    def level_dim(self, level: int) -> int:
        return self.shape[self.fmt.mode_order[level]]

    @property
    def operand_shape(self) -> tuple[int, ...]:
        """The shape of the tensor's operand arrays: the original shape of a blocked tensor."""
        return self.block.shape if self.block is not None else self.shape

    def data(self, value) -> TensorData:
        """An operand (a dense array or ``scipy.sparse`` matrix of :attr:`operand_shape`) as the
        level arrays of this tensor (blocked when it has a block format)."""
        b = self.block
        if b is None:
            return TensorData.from_array(value, self.fmt)
        if tuple(value.shape) != b.shape:
            raise ValueError(f"tensor {self.name!r}: an operand of shape {tuple(value.shape)}, the tensor is "
                             f"{'x'.join(map(str, b.shape))} (in blocks: {b.fmt})")
        whole = b.padded == b.shape  # a declared shape that is not whole blocks is padded (explicitly)
        if hasattr(value, "tobsr") and b.fmt.order == 2 and b.fmt.outer.mode_order == (0, 1) and whole:
            return TensorData.from_bsr(value.tobsr(blocksize=b.fmt.block), b.fmt, name=self.name)  # stays sparse
        return TensorData.from_blocks(value.toarray() if hasattr(value, "toarray") else value, b.fmt,
                                      name=self.name, pad=not whole)


class Graph:
    """A SAMML dataflow graph plus the specs of the tensors it reads and writes."""

    def __init__(self, name: str = "graph", fifo_depth: int = 2) -> None:
        self.name = name
        self.fifo_depth = fifo_depth
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.tensors: dict[str, TensorSpec] = {}
        self.discards: set[PortRef] = set()
        # index variable -> the coordinate streams of that index (the output of its join, or
        # of its one scanner; one per independent iteration of it): where ``--par`` splits
        self.indices: dict[str, list[PortRef]] = {}
        # what the graph computes, as the compiler's statements (plain JSON, read by
        # fuseflow.compiler.program_json): the reference a run on any data is checked against
        self.reference: dict | None = None
        # banked outputs (the ``par`` pass): output tensor -> its bank tensors, bank k written by
        # lane k; fuseflow.ir.banks assembles the tensor from them (the banks are parts, not
        # outputs of their own: ``output_tensors`` leaves them out)
        self.banks: dict[str, list[str]] = {}

    # ---------------------------------------------------------------- building
    def tensor(self, name: str, shape: Iterable[int], fmt: TensorFormat, role: Role = Role.INPUT,
               block: Blocking | None = None) -> TensorSpec:
        """Declare a tensor stored in ``shape`` / ``fmt``; ``block``: it is a tensor of
        ``block.shape`` in block format ``block.fmt`` (``shape`` / ``fmt`` must be its stored
        tensor's)."""
        if name in self.tensors:
            raise GraphError(f"tensor {name!r} is declared twice")
        spec = TensorSpec(name, tuple(int(s) for s in shape), fmt, role, block)
        if len(spec.shape) != fmt.order:
            raise GraphError(f"tensor {name!r}: shape {spec.shape} does not match format {fmt}")
        if block is not None and (block.fmt.stored() != fmt or block.fmt.stored_shape(block.shape) != spec.shape):
            raise GraphError(f"tensor {name!r}: blocked as {block.fmt} of shape {block.shape}, it is stored as "
                             f"{block.fmt.stored()} of shape {block.fmt.stored_shape(block.shape)}, not {fmt} of "
                             f"shape {spec.shape}")
        self.tensors[name] = spec
        return spec

    def add(self, kind: NodeKind, name: str, **params: Any) -> Node:
        if name in self.nodes:
            raise GraphError(f"node {name!r} already exists")
        if "." in name:
            raise GraphError(f"node name {name!r} must not contain '.'")
        if not _NODE_NAME.fullmatch(name):
            raise GraphError(f"node name {name!r}: use letters, digits, '_', '-' or '$' (it becomes a signal "
                             "name in the generated Verilog, where spaces and other characters break the netlist)")
        node = Node(name, kind, _checked_params(name, kind, params))
        self.nodes[name] = node
        return node

    def connect(self, src: PortRef | str, dst: PortRef | str, depth: int | None = None) -> Edge:
        edge = Edge(PortRef.parse(src), PortRef.parse(dst), depth)
        self.edges.append(edge)
        return edge

    def discard(self, port: PortRef | str) -> None:
        """Mark an output port as intentionally unused."""
        self.discards.add(PortRef.parse(port))

    # ---------------------------------------------------------------- queries
    def driver(self) -> dict[PortRef, Edge]:
        return {e.dst: e for e in self.edges}

    def consumers(self) -> dict[PortRef, Edge]:
        return {e.src: e for e in self.edges}

    def edge_kind(self, edge: Edge) -> StreamKind:
        return self.nodes[edge.src.node].outputs()[edge.src.port]

    def edge_type(self, edge: Edge) -> StreamType:
        """The stream type of ``edge`` (its producer's output port: kind and lanes)."""
        return self.nodes[edge.src.node].output_types()[edge.src.port]

    def depth(self, edge: Edge) -> int:
        return edge.depth if edge.depth is not None else self.fifo_depth

    def input_tensors(self) -> list[str]:
        return [t for t, s in self.tensors.items() if s.role is Role.INPUT]

    def output_tensors(self) -> list[str]:
        """The graph's outputs (a banked output once, not its banks)."""
        parts = {b for bs in self.banks.values() for b in bs}
        return [t for t, s in self.tensors.items() if s.role is Role.OUTPUT and t not in parts]

    def is_feedback(self, edge: Edge) -> bool:
        """``edge`` drives a feedback input (declared by the consumer's kind, e.g. a scanner's
        ``skip``): a hint sent back upstream, which closes a loop."""
        node = self.nodes.get(edge.dst.node)
        return node is not None and edge.dst.port in node.spec.feedback

    def forward_edges(self) -> list[Edge]:
        """The edges without the feedback edges: an acyclic graph in a valid SAMML graph."""
        return [e for e in self.edges if not self.is_feedback(e)]

    def topo_order(self) -> list[str]:
        """Node names in topological order of the forward edges (feedback edges left out)."""
        g = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from((e.src.node, e.dst.node) for e in self.forward_edges())
        return list(nx.lexicographical_topological_sort(g))

    # ---------------------------------------------------------------- verification
    def verify(self, data: Mapping[str, TensorData] | None = None) -> None:
        """Raise :class:`GraphError` listing every problem; ``data`` also checks tensor data."""
        problems = [p for node in self.nodes.values() for p in _check_params(self, node)]
        driven: dict[PortRef, Edge] = {}
        used: dict[PortRef, Edge] = {}
        for e in self.edges:
            problems += self._check_edge(e, driven, used)
        problems += self._check_dangling(driven, used)
        problems += self._check_cycles()
        if data is not None:
            problems += _check_data(self, data)
        if problems:
            raise GraphError(f"graph {self.name!r} is invalid:\n  - " + "\n  - ".join(problems))

    def _end_problems(self, e: Edge) -> list[str] | None:
        """Problems with the nodes and ports at the two ends of ``e``; ``None`` when a node's
        ports cannot be computed (its parameters are reported by :func:`_check_params`)."""
        out: list[str] = []
        for end, outputs in ((e.src, True), (e.dst, False)):
            n = self.nodes.get(end.node)
            if n is None:
                out.append(f"edge {e}: no node named {end.node!r}")
                continue
            ports = _ports_or_none(n, outputs)
            if ports is None:
                return None
            if end.port not in ports:
                out.append(f"edge {e}: node {end.node!r} ({n.kind.value}) has no "
                           f"{'output' if outputs else 'input'} port {end.port!r}; it has {sorted(ports)}")
        return out

    def _check_edge(self, e: Edge, driven: dict[PortRef, Edge], used: dict[PortRef, Edge]) -> list[str]:
        """One edge's problems; records the ports it drives and uses."""
        out = self._end_problems(e)
        if out is None or out:
            return out or []
        if e.dst in driven:
            out.append(f"input port {e.dst} is driven twice: by {driven[e.dst].src} and {e.src}")
        driven[e.dst] = e
        if e.src in used:
            out.append(f"output port {e.src} feeds both {used[e.src].dst} and {e.dst}: "
                       "fan-out needs a broadcast node")
        used[e.src] = e
        src, dst = self.nodes[e.src.node], self.nodes[e.dst.node]
        st, dt = src.output_types()[e.src.port], dst.input_types()[e.dst.port]
        if st.kind is not dt.kind:
            out.append(f"edge {e}: a {st.kind.value} stream drives a {dt.kind.value} port")
        elif st.lanes != dt.lanes:
            out.append(f"edge {e}: lanes differ: output {e.src.port} of {_where(src.name, src.kind)} carries "
                       f"{st.lanes} lane{'s' * (st.lanes > 1)}, input {e.dst.port} of {_where(dst.name, dst.kind)} "
                       f"takes {dt.lanes}")
        if e.depth is not None and e.depth < 1:
            out.append(f"edge {e}: FIFO depth {e.depth} must be at least 1")
        return out

    def _check_dangling(self, driven: dict[PortRef, Edge], used: dict[PortRef, Edge]) -> list[str]:
        out: list[str] = []
        for node in self.nodes.values():
            ins, outs = _ports_or_none(node, False), _ports_or_none(node, True)
            if ins is None or outs is None:
                continue
            out += [f"input port {node[p]} is not driven (dangling)" for p in ins if node[p] not in driven]
            out += [f"output port {node[p]} is not connected (dangling); connect it or discard it"
                    for p in outs if node[p] not in used and node[p] not in self.discards]
        out += [f"output port {d} is both discarded and connected" for d in self.discards if d in used]
        return out

    def _check_cycles(self) -> list[str]:
        """Only feedback edges may close a loop."""
        g = nx.DiGraph()
        g.add_edges_from((e.src.node, e.dst.node) for e in self.forward_edges()
                         if e.src.node in self.nodes and e.dst.node in self.nodes)
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            return []
        path = " -> ".join([a for a, _ in cycle] + [cycle[0][0]])
        why = "only edges into feedback inputs (a scanner's skip) may close one"
        return [f"the edges form a loop ({path}); {why}"]

    # ---------------------------------------------------------------- serialisation
    def to_json(self) -> dict:
        return {
            "name": self.name,
            "fifo_depth": self.fifo_depth,
            "tensors": {
                n: {"shape": list(s.shape), "format": s.fmt.to_json(), "role": s.role.value,
                    **({"block": s.block.to_json()} if s.block is not None else {})}
                for n, s in self.tensors.items()
            },
            "nodes": [
                {"name": n.name, "kind": n.kind.value, "params": {k: _param_json(v) for k, v in n.params.items()}}
                for n in self.nodes.values()
            ],
            "edges": [
                {"src": str(e.src), "dst": str(e.dst), **({"depth": e.depth} if e.depth is not None else {})}
                for e in self.edges
            ],
            "discard": sorted(str(d) for d in self.discards),
            **({"indices": {i: [str(p) for p in ps] for i, ps in self.indices.items()}}
               if self.indices else {}),
            **({"banks": {t: list(bs) for t, bs in self.banks.items()}} if self.banks else {}),
            **({"reference": self.reference} if self.reference is not None else {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], *, source: str = "graph JSON") -> Graph:
        try:
            g = cls(d.get("name", "graph"), int(d.get("fifo_depth", 2)))
            for name, t in d.get("tensors", {}).items():
                block = Blocking.from_json(t["block"]) if t.get("block") is not None else None
                g.tensor(name, t["shape"], TensorFormat.from_json(t["format"]), Role(t.get("role", "input")), block)
            problems: list[str] = []
            for n in d["nodes"]:
                try:
                    kind = NodeKind(n["kind"])
                except ValueError:
                    raise GraphError(
                        f"{source}: node {n.get('name')!r} has unknown kind {n['kind']!r}; "
                        f"known kinds: {[k.value for k in NodeKind]}"
                    ) from None
                try:
                    g.add(kind, n["name"], **n.get("params", {}))
                except GraphError as exc:
                    problems.append(str(exc))
            if problems:
                raise GraphError(f"{source}: " + "\n  ".join(problems))
            for e in d.get("edges", []):
                g.connect(e["src"], e["dst"], e.get("depth"))
            for p in d.get("discard", []):
                g.discard(p)
            for index, ports in d.get("indices", {}).items():
                g.indices[str(index)] = [PortRef.parse(p) for p in ports]
            g.reference = d.get("reference")
            g.banks = {str(t): [str(b) for b in bs] for t, bs in d.get("banks", {}).items()}
            for t, bs in g.banks.items():
                missing = [x for x in (t, *bs) if x not in g.tensors or g.tensors[x].role is not Role.OUTPUT]
                if missing:
                    raise GraphError(f"{source}: banks of {t!r}: {', '.join(map(repr, missing))} not "
                                     f"declared as output tensors")
        except KeyError as exc:
            raise GraphError(f"{source}: missing field {exc}") from None
        return g

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Graph:
        p = Path(path)
        try:
            d = read_json(p, "graph file")
        except JsonFileError as exc:
            raise GraphError(str(exc)) from None
        return cls.from_json(d, source=str(p))

    def to_dot(self) -> str:
        colors = {StreamKind.CRD: "darkgreen", StreamKind.REF: "blue", StreamKind.VAL: "red",
                  StreamKind.REPSIG: "gray40"}
        lines = [f'digraph "{self.name}" {{', "  rankdir=TB;", '  node [shape=box, fontname="Helvetica"];']
        for n in self.nodes.values():
            detail = " ".join(f"{k}={_param_json(v)}" for k, v in n.params.items())
            lines.append(f'  "{n.name}" [label="{n.name}\\n{n.kind.value} {detail}"];')
        for e in self.edges:
            known = e.src.node in self.nodes and e.src.port in self.nodes[e.src.node].outputs()
            t = self.edge_type(e) if known else StreamType(StreamKind.CRD)
            k = t.kind
            style = ", style=dashed, constraint=false" if self.is_feedback(e) else ""
            lanes = f" x{t.lanes}" if t.lanes > 1 else ""
            lines.append(
                f'  "{e.src.node}" -> "{e.dst.node}" [label="{e.src.port}->{e.dst.port}{lanes}", '
                f'color={colors[k]}, fontcolor={colors[k]}{style}];'
            )
        lines.append("}")
        return "\n".join(lines) + "\n"

    def structure_hash(self) -> str:
        """A hash of everything that changes the hardware (not the tensor contents)."""
        d = self.to_json()
        d.pop("reference", None)  # what it computes, not how: the hardware is the same
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


# node names: legal in every backend's signal names once the generator prefixes them
_NODE_NAME = re.compile(r"[A-Za-z0-9_$-]+")


def _where(name: str, kind: NodeKind) -> str:
    return f"node {name!r} ({kind.value})"


def _checked_params(name: str, kind: NodeKind, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` in their declared types; :class:`GraphError` names the node and every unknown,
    ill-typed or missing parameter and every broken value rule of the declaration."""
    spec = PRIMITIVES[kind]
    values, problems = spec.coerce(params)
    if not problems:
        try:
            spec.typed(values)
        except ParamError as exc:
            problems = exc.problems
    if problems:
        where = _where(name, kind)
        raise GraphError("; ".join(f"{where}: {p}" for p in problems))
    return values


def _ports_or_none(node: Node, outputs: bool) -> Ports | None:
    try:
        return node.outputs() if outputs else node.inputs()
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _param_json(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_param_json(x) for x in v]
    return v.value if isinstance(v, enum.Enum) else v


def _check_params(g: Graph, node: Node) -> list[str]:
    """The declaration's parameter rules (again: params may have been edited since ``add``)
    and the rules of the tensor the node names."""
    where = _where(node.name, node.kind)
    try:
        node.typed()
    except ParamError as exc:
        return [f"{where}: {p}" for p in exc.problems]
    use = node.spec.tensor
    if use is None:
        return _graph_rules(g, node)
    t = g.tensors.get(node.params["tensor"])
    if t is None:
        return [f"{where}: tensor {node.params['tensor']!r} is not declared in the graph"]
    out = []
    if use.writes and t.role is not Role.OUTPUT:
        out.append(f"{where}: writes tensor {t.name!r}, which is not an output")
    if not use.writes and t.role is not Role.INPUT:
        out.append(f"{where}: reads tensor {t.name!r}, which is an output")
    if use.level and not 0 <= node.params["level"] < t.fmt.order:
        out.append(f"{where}: level {node.params['level']} out of range for tensor {t.name!r} {t.fmt}")
    return out or _graph_rules(g, node)


def _graph_rules(g: Graph, node: Node) -> list[str]:
    """The declaration's rules on the graph around ``node`` (once its own are met)."""
    check = node.spec.graph_check
    return [f"{_where(node.name, node.kind)}: {p}" for p in check(g, node)] if check else []


def _check_data(g: Graph, data: Mapping[str, TensorData]) -> list[str]:
    out = []
    for name in g.input_tensors():
        spec = g.tensors[name]
        td = data.get(name)
        if td is None:
            out.append(f"input tensor {name!r} has no data")
            continue
        if tuple(td.shape) != spec.shape:
            out.append(f"tensor {name!r}: data shape {tuple(td.shape)} != declared {spec.shape}")
        if td.fmt != spec.fmt:
            out.append(f"tensor {name!r}: data format {td.fmt} != declared {spec.fmt}")
        if spec.block is not None and td.blocking is not None and td.blocking != spec.block:
            out.append(f"tensor {name!r}: data blocked as {td.blocking.fmt} of shape {td.blocking.shape}, "
                       f"declared {spec.block.fmt} of shape {spec.block.shape}")
    for name in data:
        if name not in g.tensors:
            out.append(f"data given for tensor {name!r}, which the graph does not declare")
    return out


def level_format(spec: TensorSpec, level: int) -> Format:
    return spec.fmt.levels[level]
