"""SAMML graph IR: typed nodes, ports and edges, a verifier, JSON and DOT.

This module is the contract shared by the compiler (which emits graphs), sw_sim and hw (which
run them from the graph data alone) and the tests.  The primitive table (:data:`PRIMITIVES`)
gives every node kind's ports, stream kinds, parameters, latency and initiation interval.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .tensor import Format, TensorData, TensorFormat

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
    "PortRef",
    "PrimitiveSpec",
    "ReduceOp",
    "Role",
    "StreamKind",
    "TensorSpec",
    "alu_latency",
    "node_latency",
]


class StreamKind(enum.Enum):
    CRD = "crd"
    REF = "ref"
    VAL = "val"
    REPSIG = "repsig"


class NodeKind(enum.Enum):
    ROOT = "root"
    SCAN = "scan"
    WRITE = "write"
    VALS_WRITE = "vals_write"
    REPSIG = "repsig"
    REPEAT = "repeat"
    INTERSECT = "intersect"
    UNION = "union"
    CRD_DROP = "crd_drop"
    CRD_HOLD = "crd_hold"
    ARRAY_LOAD = "array_load"
    ALU = "alu"
    REDUCE = "reduce"
    SPACC1 = "spacc1"
    SPACC2 = "spacc2"
    BROADCAST = "broadcast"
    CRD_MASK = "crd_mask"
    STKN_DROP = "stkn_drop"


class AluOp(enum.Enum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    MAX = "max"
    MIN = "min"
    DIV = "div"
    # unary (port ``a`` only); ``add_scalar`` / ``mul_scalar`` use the node's ``scalar``
    RELU = "relu"
    NEG = "neg"
    ADD_SCALAR = "add_scalar"
    MUL_SCALAR = "mul_scalar"
    EXP = "exp"
    RSQRT = "rsqrt"
    SIGMOID = "sigmoid"
    GELU = "gelu"


UNARY_ALU_OPS = frozenset({AluOp.RELU, AluOp.NEG, AluOp.ADD_SCALAR, AluOp.MUL_SCALAR, AluOp.EXP,
                           AluOp.RSQRT, AluOp.SIGMOID, AluOp.GELU})


def alu_latency(op: AluOp) -> int:
    """Pipeline stages of the binary ALU (its latency): 2 (operand and result registers), 4
    for ``mul`` (operands -> partial products -> summed product -> rounded / saturated result),
    so that a 32-bit multiply built from 18x18 DSP blocks is not one long path."""
    return 4 if op is AluOp.MUL else 2


class MaskPred(enum.Enum):
    """Coordinate-mask predicates: which (outer i, inner j) entries are *kept*."""

    CAUSAL = "causal"  # j <= i
    BAND = "band"  # i - before <= j <= i + after
    BLOCK = "block"  # pattern[i // block][j // block] != 0


class ReduceOp(enum.Enum):
    ADD = "add"
    MAX = "max"


class Role(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"


class GraphError(ValueError):
    """A graph that breaks the SAMML rules; the message lists every problem found."""


# ----------------------------------------------------------------------------- primitive table
Ports = dict[str, StreamKind]
C, R, V, RS = StreamKind.CRD, StreamKind.REF, StreamKind.VAL, StreamKind.REPSIG


@dataclass(frozen=True)
class PrimitiveSpec:
    """One row of the primitive table.

    ``latency``: cycles from popping an input token to pushing the first output it causes
    (0 = the same cycle).  Every output then takes one more cycle through its output FIFO
    before the consumer sees it.  ``ii``: initiation interval in steady state.
    """

    kind: NodeKind
    inputs: Callable[[Mapping[str, Any]], Ports]
    outputs: Callable[[Mapping[str, Any]], Ports]
    params: Mapping[str, type]  # required parameters and their types
    optional: Mapping[str, Any] = field(default_factory=dict)  # optional parameters: default
    latency: int = 0
    ii: int = 1
    summary: str = ""


def _fixed(ports: Ports) -> Callable[[Mapping[str, Any]], Ports]:
    return lambda params: dict(ports)


def _ref_kind(p, i: int) -> StreamKind:
    """Joiner ``ref<i>`` ports carry values for the inputs listed in ``val_refs`` (factored
    iteration joins a reducer's coordinates with its values riding along as references)."""
    return V if i in tuple(p.get("val_refs", ())) else R


def _nary_in(p):
    n = p["n"]
    return {**{f"crd{i}": C for i in range(n)}, **{f"ref{i}": _ref_kind(p, i) for i in range(n)}}


def _nary_out(p):
    return {"crd": C, **{f"ref{i}": _ref_kind(p, i) for i in range(p["n"])}}


def _alu_in(p) -> Ports:
    return {"a": V} if p.get("op") in UNARY_ALU_OPS else {"a": V, "b": V}


def _stream_kind_of(p, default: str) -> StreamKind:
    v = p.get("stream", default)
    return StreamKind(v) if isinstance(v, str) else v


def _stream_kind(p) -> StreamKind:
    return _stream_kind_of(p, "crd")


PRIMITIVES: dict[NodeKind, PrimitiveSpec] = {
    s.kind: s
    for s in [
        PrimitiveSpec(NodeKind.ROOT, _fixed({}), _fixed({"ref": R}), {},
                      summary="emits the root reference stream 0,D after start"),
        PrimitiveSpec(NodeKind.SCAN, _fixed({"ref": R}), _fixed({"crd": C, "ref": R}),
                      {"tensor": str, "level": int}, latency=2,
                      summary="level scanner (format from the tensor): ref -> fiber crd/ref"),
        PrimitiveSpec(NodeKind.WRITE, _fixed({"crd": C}), _fixed({}), {"tensor": str, "level": int},
                      {"skip_empty": False},
                      summary="level writer: fills seg/crd of a compressed level; skip_empty: a stop "
                              "closes a fiber only if a coordinate came since the last stop (use "
                              "under a compressed parent whose empty fibers were dropped)"),
        PrimitiveSpec(NodeKind.VALS_WRITE, _fixed({"val": V}), _fixed({}), {"tensor": str},
                      summary="values writer: fills vals"),
        PrimitiveSpec(NodeKind.REPSIG, lambda p: {"in": _stream_kind(p)}, _fixed({"repsig": RS}), {},
                      {"stream": "crd"}, summary="data -> R, stop -> S, D -> D"),
        PrimitiveSpec(NodeKind.REPEAT, lambda p: {"ref": _stream_kind_of(p, "ref"), "repsig": RS},
                      lambda p: {"ref": _stream_kind_of(p, "ref")}, {}, {"stream": "ref"},
                      summary="repeats each reference (or value, stream=val) once per R"),
        PrimitiveSpec(NodeKind.INTERSECT, _nary_in, _nary_out, {"n": int}, {"val_refs": ()},
                      summary="n-ary coordinate intersection (multiplication)"),
        PrimitiveSpec(NodeKind.UNION, _nary_in, _nary_out, {"n": int}, {"val_refs": ()},
                      summary="n-ary coordinate union (addition); missing refs become N"),
        PrimitiveSpec(NodeKind.CRD_DROP, _fixed({"outer": C, "inner": C}),
                      _fixed({"outer": C, "inner": C}), {},
                      summary="drops outer coordinates whose inner fiber is empty"),
        PrimitiveSpec(NodeKind.CRD_HOLD, _fixed({"outer": C, "inner": C}),
                      _fixed({"outer": C, "inner": C}), {},
                      summary="repeats each outer coordinate once per inner element"),
        PrimitiveSpec(NodeKind.ARRAY_LOAD, _fixed({"ref": R}), _fixed({"val": V}), {"tensor": str},
                      latency=2, summary="value load vals[ref] (block-RAM read, then a register); N -> 0"),
        PrimitiveSpec(NodeKind.ALU, _alu_in, _fixed({"val": V}), {"op": AluOp}, {"scalar": 0.0}, latency=2,
                      summary="ALU: binary over two aligned value streams (a, b) or unary (a); "
                              "latency by op (alu_latency)"),
        PrimitiveSpec(NodeKind.REDUCE, _fixed({"val": V}), _fixed({"val": V}), {"op": ReduceOp},
                      summary="reduces each innermost fiber to one value"),
        PrimitiveSpec(NodeKind.SPACC1, _fixed({"outer": C, "inner": C, "val": V}),
                      _fixed({"crd": C, "val": V}), {"dim": int}, {"op": ReduceOp.ADD},
                      summary="sparse accumulator, order 1 (inner dimension dim)"),
        PrimitiveSpec(NodeKind.BROADCAST, lambda p: {"in": _stream_kind(p)},
                      lambda p: {f"out{i}": _stream_kind(p) for i in range(p["n"])}, {"n": int},
                      {"stream": "crd"}, summary="fan-out of one stream to n consumers"),
        PrimitiveSpec(NodeKind.SPACC2, _fixed({"outer": C, "inner0": C, "inner1": C, "val": V}),
                      _fixed({"crd0": C, "crd1": C, "val": V}), {"dim0": int, "dim1": int}, {"op": ReduceOp.ADD},
                      summary="sparse accumulator, order 2 (inner dimensions dim0 x dim1)"),
        PrimitiveSpec(NodeKind.CRD_MASK, _fixed({"outer": C, "inner": C, "ref": R}),
                      _fixed({"crd": C, "ref": R}), {"pred": MaskPred},
                      {"before": 0, "after": 0, "block": 1, "pattern": ()},
                      summary="drops inner entries (crd + ref) whose (outer, inner) fails the predicate"),
        PrimitiveSpec(NodeKind.STKN_DROP, lambda p: {"in": _stream_kind(p)}, lambda p: {"out": _stream_kind(p)},
                      {}, {"stream": "crd"}, latency=1,
                      summary="prunes empty fibers: merges runs of stops into the highest, drops a leading run"),
    ]
}

# enum-typed parameters by name, for JSON round-trips and for validation
_ENUM_PARAMS: dict[str, type[enum.Enum]] = {"op": AluOp, "stream": StreamKind, "pred": MaskPred}


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
        return self.spec.optional[key]

    def all_params(self) -> dict[str, Any]:
        return {**self.spec.optional, **self.params}

    def inputs(self) -> Ports:
        return self.spec.inputs(self.all_params())

    def outputs(self) -> Ports:
        return self.spec.outputs(self.all_params())

    def __getitem__(self, port: str) -> PortRef:
        return PortRef(self.name, port)


def node_latency(node: Node) -> int:
    """Latency of ``node`` (the primitive table's, refined by the ALU op)."""
    op = node.params.get("op")
    if node.kind is NodeKind.ALU and op in set(AluOp) - UNARY_ALU_OPS:
        return alu_latency(op)
    return PRIMITIVES[node.kind].latency


@dataclass(frozen=True)
class Edge:
    src: PortRef
    dst: PortRef
    depth: int | None = None  # None: the graph's default FIFO depth

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    fmt: TensorFormat
    role: Role = Role.INPUT

    def level_dim(self, level: int) -> int:
        return self.shape[self.fmt.mode_order[level]]


class Graph:
    """A SAMML dataflow graph plus the specs of the tensors it reads and writes."""

    def __init__(self, name: str = "graph", fifo_depth: int = 2) -> None:
        self.name = name
        self.fifo_depth = fifo_depth
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.tensors: dict[str, TensorSpec] = {}
        self.discards: set[PortRef] = set()

    # ---------------------------------------------------------------- building
    def tensor(self, name: str, shape: Iterable[int], fmt: TensorFormat, role: Role = Role.INPUT) -> TensorSpec:
        if name in self.tensors:
            raise GraphError(f"tensor {name!r} is declared twice")
        spec = TensorSpec(name, tuple(int(s) for s in shape), fmt, role)
        if len(spec.shape) != fmt.order:
            raise GraphError(f"tensor {name!r}: shape {spec.shape} does not match format {fmt}")
        self.tensors[name] = spec
        return spec

    def add(self, kind: NodeKind, name: str, **params: Any) -> Node:
        if name in self.nodes:
            raise GraphError(f"node {name!r} already exists")
        if "." in name:
            raise GraphError(f"node name {name!r} must not contain '.'")
        params = {k: _coerce_param(kind, k, v) for k, v in params.items()}
        node = Node(name, kind, params)
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

    def depth(self, edge: Edge) -> int:
        return edge.depth if edge.depth is not None else self.fifo_depth

    def input_tensors(self) -> list[str]:
        return [t for t, s in self.tensors.items() if s.role is Role.INPUT]

    def output_tensors(self) -> list[str]:
        return [t for t, s in self.tensors.items() if s.role is Role.OUTPUT]

    def topo_order(self) -> list[str]:
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from((e.src.node, e.dst.node) for e in self.edges)
        return list(nx.lexicographical_topological_sort(g))

    # ---------------------------------------------------------------- verification
    def verify(self, data: Mapping[str, TensorData] | None = None) -> None:
        """Raise :class:`GraphError` listing every problem; ``data`` also checks tensor data."""
        problems: list[str] = []
        for node in self.nodes.values():
            problems += _check_params(self, node)
        driven: dict[PortRef, Edge] = {}
        used: dict[PortRef, Edge] = {}
        for e in self.edges:
            ok = True
            for end, side in ((e.src, "outputs"), (e.dst, "inputs")):
                n = self.nodes.get(end.node)
                if n is None:
                    problems.append(f"edge {e}: no node named {end.node!r}")
                    ok = False
                    continue
                try:
                    ports = getattr(n, side)()
                except (KeyError, TypeError, ValueError):
                    ok = False
                    continue
                if end.port not in ports:
                    kindword = "output" if side == "outputs" else "input"
                    problems.append(
                        f"edge {e}: node {end.node!r} ({n.kind.value}) has no {kindword} port "
                        f"{end.port!r}; it has {sorted(ports)}"
                    )
                    ok = False
            if not ok:
                continue
            if e.dst in driven:
                problems.append(f"input port {e.dst} is driven twice: by {driven[e.dst].src} and {e.src}")
            driven[e.dst] = e
            if e.src in used:
                problems.append(
                    f"output port {e.src} feeds both {used[e.src].dst} and {e.dst}: "
                    "fan-out needs a broadcast node"
                )
            used[e.src] = e
            sk = self.nodes[e.src.node].outputs()[e.src.port]
            dk = self.nodes[e.dst.node].inputs()[e.dst.port]
            if sk is not dk:
                problems.append(f"edge {e}: a {sk.value} stream drives a {dk.value} port")
            if e.depth is not None and e.depth < 1:
                problems.append(f"edge {e}: FIFO depth {e.depth} must be at least 1")
        for node in self.nodes.values():
            try:
                ins, outs = node.inputs(), node.outputs()
            except (KeyError, TypeError, ValueError):
                continue
            for p in ins:
                if node[p] not in driven:
                    problems.append(f"input port {node[p]} is not driven (dangling)")
            for p in outs:
                if node[p] not in used and node[p] not in self.discards:
                    problems.append(
                        f"output port {node[p]} is not connected (dangling); connect it or discard it"
                    )
        for d in self.discards:
            if d in used:
                problems.append(f"output port {d} is both discarded and connected")
        if data is not None:
            problems += _check_data(self, data)
        if problems:
            raise GraphError(f"graph {self.name!r} is invalid:\n  - " + "\n  - ".join(problems))

    # ---------------------------------------------------------------- serialisation
    def to_json(self) -> dict:
        return {
            "name": self.name,
            "fifo_depth": self.fifo_depth,
            "tensors": {
                n: {"shape": list(s.shape), "format": s.fmt.to_json(), "role": s.role.value}
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
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], *, source: str = "graph JSON") -> Graph:
        try:
            g = cls(d.get("name", "graph"), int(d.get("fifo_depth", 2)))
            for name, t in d.get("tensors", {}).items():
                g.tensor(name, t["shape"], TensorFormat.from_json(t["format"]), Role(t.get("role", "input")))
            for n in d["nodes"]:
                try:
                    kind = NodeKind(n["kind"])
                except ValueError:
                    raise GraphError(
                        f"{source}: node {n.get('name')!r} has unknown kind {n['kind']!r}; "
                        f"known kinds: {[k.value for k in NodeKind]}"
                    ) from None
                g.add(kind, n["name"], **n.get("params", {}))
            for e in d.get("edges", []):
                g.connect(e["src"], e["dst"], e.get("depth"))
            for p in d.get("discard", []):
                g.discard(p)
        except KeyError as exc:
            raise GraphError(f"{source}: missing field {exc}") from None
        return g

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Graph:
        p = Path(path)
        try:
            d = json.loads(p.read_text())
        except FileNotFoundError:
            raise GraphError(f"graph file {str(p)!r} does not exist") from None
        except json.JSONDecodeError as exc:
            raise GraphError(f"graph file {str(p)!r} is not valid JSON: {exc}") from None
        return cls.from_json(d, source=str(p))

    def to_dot(self) -> str:
        colors = {StreamKind.CRD: "darkgreen", StreamKind.REF: "blue", StreamKind.VAL: "red",
                  StreamKind.REPSIG: "gray40"}
        lines = [f'digraph "{self.name}" {{', "  rankdir=TB;", '  node [shape=box, fontname="Helvetica"];']
        for n in self.nodes.values():
            detail = " ".join(f"{k}={_param_json(v)}" for k, v in n.params.items())
            lines.append(f'  "{n.name}" [label="{n.name}\\n{n.kind.value} {detail}"];')
        for e in self.edges:
            k = self.edge_kind(e) if e.src.node in self.nodes and e.src.port in self.nodes[e.src.node].outputs() else StreamKind.CRD
            lines.append(
                f'  "{e.src.node}" -> "{e.dst.node}" [label="{e.src.port}->{e.dst.port}", '
                f'color={colors[k]}, fontcolor={colors[k]}];'
            )
        lines.append("}")
        return "\n".join(lines) + "\n"

    def structure_hash(self) -> str:
        """A hash of everything that changes the hardware (not the tensor contents)."""
        import hashlib

        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]


def _coerce_param(kind: NodeKind, key: str, value: Any) -> Any:
    if key == "val_refs" and isinstance(value, list | tuple):
        return tuple(int(v) for v in value)
    if key in _ENUM_PARAMS and isinstance(value, str):
        enum_cls = _ENUM_PARAMS[key]
        if key == "op" and kind in (NodeKind.REDUCE, NodeKind.SPACC1, NodeKind.SPACC2):
            enum_cls = ReduceOp
        try:
            return enum_cls(value)
        except ValueError:
            return value  # left for verify() to report with the node's name
    return value


def _param_json(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    return v.value if isinstance(v, enum.Enum) else v


def _check_params(g: Graph, node: Node) -> list[str]:
    spec = node.spec
    out: list[str] = []
    where = f"node {node.name!r} ({node.kind.value})"
    for key, typ in spec.params.items():
        if key not in node.params:
            out.append(f"{where}: missing parameter {key!r}")
            continue
        v = node.params[key]
        if key == "op":
            want = ReduceOp if node.kind in (NodeKind.REDUCE, NodeKind.SPACC1, NodeKind.SPACC2) else AluOp
            if not isinstance(v, want):
                out.append(f"{where}: op {_param_json(v)!r} is not one of {[o.value for o in want]}")
        elif not isinstance(v, typ):
            out.append(f"{where}: parameter {key!r} must be {typ.__name__}, got {v!r}")
    for key in node.params:
        if key not in spec.params and key not in spec.optional:
            out.append(f"{where}: unknown parameter {key!r}")
    if "stream" in node.params and not isinstance(node.params["stream"], StreamKind):
        out.append(f"{where}: stream {node.params['stream']!r} is not one of {[s.value for s in StreamKind]}")
    elif node.kind is NodeKind.REPEAT and node.param("stream") not in ("ref", StreamKind.REF, StreamKind.VAL):
        out.append(f"{where}: a repeat carries a ref or val stream, not {_param_json(node.param('stream'))!r}")
    if "val_refs" in node.params:
        bad = [i for i in node.params["val_refs"] if not 0 <= i < node.params.get("n", 0)]
        if bad:
            out.append(f"{where}: val_refs {list(node.params['val_refs'])} names inputs outside 0..n-1")
    if out:
        return out
    if "n" in spec.params and node.params["n"] < (2 if node.kind in (NodeKind.INTERSECT, NodeKind.UNION) else 1):
        out.append(f"{where}: n={node.params['n']} is too small")
    if "tensor" in spec.params:
        t = g.tensors.get(node.params["tensor"])
        if t is None:
            out.append(f"{where}: tensor {node.params['tensor']!r} is not declared in the graph")
            return out
        writes = node.kind in (NodeKind.WRITE, NodeKind.VALS_WRITE)
        if writes and t.role is not Role.OUTPUT:
            out.append(f"{where}: writes tensor {t.name!r}, which is not an output")
        if not writes and t.role is not Role.INPUT:
            out.append(f"{where}: reads tensor {t.name!r}, which is an output")
        if "level" in spec.params and not 0 <= node.params["level"] < t.fmt.order:
            out.append(f"{where}: level {node.params['level']} out of range for tensor {t.name!r} {t.fmt}")
    return out


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
    for name in data:
        if name not in g.tensors:
            out.append(f"data given for tensor {name!r}, which the graph does not declare")
    return out


def level_format(spec: TensorSpec, level: int) -> Format:
    return spec.fmt.levels[level]
