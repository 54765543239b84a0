"""A small builder of SAMML graphs with deterministic node names: the compiler's composite
lowerings, the model planner and the hand-built kernels write their graphs with it."""

from __future__ import annotations

from .samml import AluOp, Graph, NodeKind, PortRef, StreamKind

__all__ = ["GraphBuilder"]


class GraphBuilder:
    """Thin helper over :class:`Graph` with deterministic node names."""

    def __init__(self, name: str) -> None:
        self.g = Graph(name)
        self._count: dict[str, int] = {}

    def _name(self, base: str) -> str:
        n = self._count.get(base, 0)
        self._count[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def node(self, kind: NodeKind, base: str, inputs: dict[str, PortRef] | None = None, **params):
        node = self.g.add(kind, self._name(base), **params)
        for port, src in (inputs or {}).items():
            self.g.connect(src, node[port])
        return node

    def link(self, src: PortRef, dst: PortRef, depth: int | None = None) -> None:
        """Connect ``src`` to ``dst`` with a FIFO of ``depth`` slots (default: the graph's)."""
        self.g.connect(src, dst, depth)

    def root(self, tensor: str) -> PortRef:
        return self.node(NodeKind.ROOT, f"root_{tensor}")["ref"]

    def scan(self, tensor: str, level: int, ref: PortRef) -> tuple[PortRef, PortRef]:
        n = self.node(NodeKind.SCAN, f"scan_{tensor}{level}", {"ref": ref}, tensor=tensor, level=level)
        return n["crd"], n["ref"]

    def bcast(self, src: PortRef, n: int, kind: StreamKind) -> list[PortRef]:
        b = self.node(NodeKind.BROADCAST, f"bc_{src.node}_{src.port}", {"in": src}, n=n, stream=kind.value)
        return [b[f"out{i}"] for i in range(n)]

    def repeat(self, ref: PortRef, by: PortRef, stream: StreamKind = StreamKind.CRD) -> PortRef:
        rs = self.node(NodeKind.REPSIG, f"repsig_{by.node}", {"in": by}, stream=stream.value)
        return self.node(NodeKind.REPEAT, f"repeat_{ref.node}", {"ref": ref, "repsig": rs["repsig"]})["ref"]

    def join(self, kind: NodeKind, pairs: list[tuple[PortRef, PortRef]]) -> tuple[PortRef, list[PortRef]]:
        ins = {}
        for i, (c, r) in enumerate(pairs):
            ins[f"crd{i}"], ins[f"ref{i}"] = c, r
        j = self.node(kind, kind.value, ins, n=len(pairs))
        return j["crd"], [j[f"ref{i}"] for i in range(len(pairs))]

    def load(self, tensor: str, ref: PortRef) -> PortRef:
        return self.node(NodeKind.ARRAY_LOAD, f"vals_{tensor}", {"ref": ref}, tensor=tensor)["val"]

    def alu(self, op: AluOp, a: PortRef, b: PortRef) -> PortRef:
        return self.node(NodeKind.ALU, op.value, {"a": a, "b": b}, op=op.value)["val"]

    def write(self, tensor: str, level: int, crd: PortRef) -> None:
        self.node(NodeKind.WRITE, f"write_{tensor}{level}", {"crd": crd}, tensor=tensor, level=level)

    def write_vals(self, tensor: str, val: PortRef) -> None:
        self.node(NodeKind.VALS_WRITE, f"write_{tensor}_vals", {"val": val}, tensor=tensor)
