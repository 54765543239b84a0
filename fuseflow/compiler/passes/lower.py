"""Graph generation from fusion tables (the ``lower`` pass), and the records of a compiled
program (:class:`CompiledGroup`, :class:`CompiledProgram`).

:func:`emit_graph` evaluates each output's table starting from the output cells: a cell's
node is created the first time a reference to it is evaluated (memoised), so reference cells
may name cells that had not been materialised yet.  Then tensor construction is added: level
writers per output level (with coordinate droppers between compressed levels) and a values
writer.  Streams used more than once get a broadcast node; unused outputs are discarded.

FIFO depths are the ``fifo`` pass's (:mod:`fuseflow.compiler.pipeline`), which runs next.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...ir.samml import (
    AluOp,
    Graph,
    NodeKind,
    PortRef,
    ReduceOp,
    Role,
    StreamKind,
)
from ...ir.tensor import Format, TensorFormat
from ...options import Kind, Option, Source
from ..fused import Group, PermutedCopy, VAccess, VBin, VExpr, VNamed, VUn
from ..fusion import Fusion
from ..lowering import row_layernorm, row_softmax
from ..program import Op, Program, Rejected, UnOp, VectorLayout
from ..semantics import iteration_only
from ..table_exprs import _own
from ..table_records import ROOT, VAL, CellKind, CellRef, FusionTable, Join, JoinKind
from .base import GroupIR, Pass, ProgramIR, graph_pass_text
from .fifo import set_accumulator_buffers
from .locate import located_levels
from .skip import explain_skipping

__all__ = ["PASS", "SPACC_BUFFERS", "CompiledGroup", "CompiledProgram", "emit_graph"]

_ALU = {Op.ADD: AluOp.ADD, Op.SUB: AluOp.SUB, Op.MUL: AluOp.MUL, Op.DIV: AluOp.DIV,
        Op.MAX: AluOp.MAX, Op.MIN: AluOp.MIN}
_UNARY_ALU = {UnOp.RELU: AluOp.RELU, UnOp.NEG: AluOp.NEG, UnOp.EXP: AluOp.EXP,
              UnOp.SIGMOID: AluOp.SIGMOID, UnOp.GELU: AluOp.GELU, UnOp.RSQRT: AluOp.RSQRT,
              UnOp.SCALE: AluOp.MUL_SCALAR, UnOp.SHIFT: AluOp.ADD_SCALAR}


# scanners and joins make an index's coordinates; a factored intermediate's accumulator hands
# its output coordinates to the consumer's pipeline
_COORDINATE_SOURCES = (NodeKind.SCAN, NodeKind.INTERSECT, NodeKind.UNION, NodeKind.SPACC1,
                       NodeKind.SPACC2)


def _ident(name: str) -> str:
    return name.replace("'", "p").replace("~", "_c")


class _Emitter:
    """Creates nodes with deterministic names and records stream uses (fan-out resolved later)."""

    def __init__(self, graph: Graph, prefix: str) -> None:
        self.g = graph
        self.prefix = prefix
        self.uses: dict[PortRef, list[PortRef]] = {}
        self.order: list[PortRef] = []
        self.depths: dict[PortRef, int] = {}  # input port -> FIFO depth asked for
        self.src_depths: dict[PortRef, int] = {}  # output port -> FIFO depth of its first edge
        self.lanes: dict[PortRef, int] = {}  # value output port -> its lanes (vectors > 1)

    def node(self, kind: NodeKind, base: str, inputs: Mapping[str, PortRef] | None = None, **params):
        name = self.prefix + base
        k = 1
        while name in self.g.nodes:
            name = f"{self.prefix}{base}_{k}"
            k += 1
        inputs = inputs or {}
        params = {**params, **self._vector_params(kind, inputs, params)}
        n = self.g.add(kind, name, **params)
        for port, src in inputs.items():
            self.use(src, n[port])
        w = int(params.get("lanes", 1)) if kind is not NodeKind.LANE_REDUCE else 1
        for port, what in n.outputs().items():
            self.order.append(n[port])
            if w > 1 and what is StreamKind.VAL:
                self.lanes[n[port]] = w
        return n

    def _vector_params(self, kind: NodeKind, inputs: Mapping[str, PortRef], params: Mapping) -> dict:
        """``lanes`` (and an ALU's ``scalar_port``) of a node whose value inputs carry vectors
        (the blocking pass): the lanes of those inputs; a binary ALU with one scalar operand
        uses it for every lane.  Nothing for scalar streams, so scalar graphs are unchanged."""
        if "lanes" in params or kind in (NodeKind.ARRAY_LOAD, NodeKind.LANE_REDUCE):
            return {}
        width = {port: self.lanes.get(src, 1) for port, src in inputs.items()
                 if self.kind(src) is StreamKind.VAL}
        w = max(width.values(), default=1)
        if w == 1:
            return {}
        if kind is NodeKind.ALU and len(width) == 2 and len(set(width.values())) == 2:
            return {"lanes": w, "scalar_port": min(width, key=width.get)}
        if len(set(width.values())) > 1:
            raise AssertionError(f"{kind.value} node over vectors of different lanes {width}")
        return {"lanes": w}

    def coordinates(self, index: str, port: PortRef) -> PortRef:
        """Record ``port`` as a coordinate stream of ``index`` (``Graph.indices``) when a
        scanner or a join makes it; return it."""
        if self.g.nodes[port.node].kind in _COORDINATE_SOURCES:
            ports = self.g.indices.setdefault(index, [])
            if port not in ports:
                ports.append(port)
        return port

    def kind(self, port: PortRef) -> StreamKind:
        """The stream kind an output port carries."""
        return self.g.nodes[port.node].outputs()[port.port]

    def kind_param(self, port: PortRef, key: str) -> dict[str, StreamKind]:
        """``{key: val}`` when ``port`` carries values (routing primitives default to ref)."""
        return {key: StreamKind.VAL} if self.kind(port) is StreamKind.VAL else {}

    def use(self, src: PortRef, dst: PortRef) -> None:
        self.uses.setdefault(src, []).append(dst)

    # the builder interface of fuseflow.compiler.lowering (row functions): fan-out is resolved here
    def link(self, src: PortRef, dst: PortRef, depth: int | None = None) -> None:
        self.use(src, dst)
        if depth is not None:
            self.depths[dst] = depth

    def bcast(self, src: PortRef, n: int, kind: StreamKind) -> list[PortRef]:
        return [src] * n

    def alu(self, op: AluOp, a: PortRef, b: PortRef) -> PortRef:
        return self.node(NodeKind.ALU, op.value, {"a": a, "b": b}, op=op)["val"]

    def finish(self) -> None:
        for src in self.order:
            dsts = self.uses.get(src, [])
            if not dsts:
                self.g.discard(src)
            elif len(dsts) == 1:
                asked = [d for d in (self.depths.get(dsts[0]), self.src_depths.get(src)) if d]
                self.g.connect(src, dsts[0], max(asked) if asked else None)
            else:
                kind = self.g.nodes[src.node].outputs()[src.port]
                vec = {"lanes": self.lanes[src]} if self.lanes.get(src, 1) > 1 else {}
                b = self.g.add(NodeKind.BROADCAST, f"bc_{src.node}_{src.port}", n=len(dsts),
                               stream=kind, **vec)
                self.g.connect(src, b["in"], self.src_depths.get(src))
                for i, d in enumerate(dsts):
                    self.g.connect(b[f"out{i}"], d, self.depths.get(d))


class _TableLowering:
    def __init__(self, t: FusionTable, em: _Emitter, parent: _TableLowering | None = None) -> None:
        self.t = t
        self.em = em
        self.memo: dict[tuple, object] = {}
        self.order = [r for r in t.rows if r != VAL]
        # a nested factored intermediate: the rows ``t.ext`` (and the references of its operand
        # levels there) come from the enclosing table's lowering
        self.parent = parent
        self.ext = set(t.ext)
        # factored intermediates: their own pipelines, lowered first (coordinates per output
        # index, values aligned with the innermost one); nested ones when first used, as they
        # read this table's streams
        self.bundles = {name: _TableLowering(ct, em).bundle() for name, ct in t.children.items()
                        if name not in t.nested}

    def bundle_of(self, name: str) -> tuple[dict[str, PortRef], PortRef]:
        if name not in self.bundles:
            self.bundles[name] = _TableLowering(self.t.children[name], self.em, self).bundle()
        return self.bundles[name]

    # ------------------------------------------------------------------ coordinate / ref streams
    def prev_row(self, row: str) -> str | None:
        k = self.order.index(row)
        return self.order[k - 1] if k else None

    def ref(self, cref: CellRef) -> PortRef:
        """The reference stream of column ``cref.col`` after row ``cref.row``."""
        key = ("ref", cref)
        if key in self.memo:
            return self.memo[key]
        if cref.col == ROOT:
            raise AssertionError("root refs are created per column")
        cell = self.t.cells.get((cref.row, cref.col))
        if cref.row in self.ext and (cell is None or cell.kind is CellKind.DRIVEN):
            assert self.parent is not None
            out = self.parent.ref(cref)  # handed down by an enclosing joiner
            self.memo[key] = out
            return out
        assert cell is not None, cref
        if cell.kind is CellKind.CHILD:
            # the "reference" of a factored intermediate at its innermost row is its value
            if cref.row in self.t.joins and cref.col in self.t.joins[cref.row].members():
                out = self.join(cref.row)[1][cref.col]
            else:
                out = self.bundle_of(cref.col)[1]
            self.memo[key] = out
            return out
        if cell.kind is CellKind.LOCATE:
            out = self.join(cref.row)[1][cref.col]
        elif cell.kind is CellKind.SCAN:
            if cref.row in self.t.joins and cref.col in self.t.joins[cref.row].members():
                out = self.join(cref.row)[1][cref.col]
            else:
                out = self.scan(cref.col, cref.row)["ref"]
        else:
            parent = self.parent_ref(cref.col, cref.row)
            rs = self.em.node(NodeKind.REPSIG, f"repsig_{cref.row}", {"in": self.crd(cref.row)},
                              stream=StreamKind.CRD)
            # a factored intermediate's value repeated over the consumer's later rows
            out = self.em.node(NodeKind.REPEAT, f"repeat_{_ident(cref.col)}_{cref.row}",
                               {"ref": parent, "repsig": rs["repsig"]},
                               **self.em.kind_param(parent, "stream"))["ref"]
        self.memo[key] = out
        return out

    def parent_ref(self, col: str, row: str) -> PortRef:
        prev = self.prev_row(row) if row else None
        if prev is None and col in self.t.children:
            return self.bundle_of(col)[1]  # a 0-d factored intermediate: its one value
        if prev is None:
            key = ("root", col)
            if key not in self.memo:
                self.memo[key] = self.em.node(NodeKind.ROOT, f"root_{_ident(col)}")["ref"]
            return self.memo[key]
        return self.ref(CellRef(col, prev))

    def scan(self, col: str, row: str):
        key = ("scan", col, row)
        if key not in self.memo:
            v = self.t.views[col]
            cell = self.t.cells[(row, col)]
            self.memo[key] = self.em.node(NodeKind.SCAN, f"scan_{_ident(col)}_{row}",
                                          {"ref": self.parent_ref(col, row)},
                                          tensor=v.tensor, level=cell.level)
        return self.memo[key]

    def crd(self, row: str) -> PortRef:
        """The coordinate stream of ``row`` (the merge cell's output, or the one scanner's)."""
        if row in self.ext:
            assert self.parent is not None
            return self.parent.crd(row)
        if row in self.t.joins:
            return self.em.coordinates(row, self.join(row)[0])
        src = self.t.row_source(row)
        if src in self.t.children:
            return self.em.coordinates(row, self.bundle_of(src)[0][row])
        return self.em.coordinates(row, self.scan(src, row)["crd"])

    def join(self, row: str) -> tuple[PortRef, dict[str, PortRef]]:
        key = ("join", row)
        if key not in self.memo:
            self.memo[key] = self._join(self.t.joins[row], row)
        return self.memo[key]

    def _join(self, j: Join, row: str) -> tuple[PortRef, dict[str, PortRef]]:
        """The merge node of ``j`` at ``row``: its coordinate stream and a reference stream per
        member.  Located members (``Loc`` cells) are not merged: ``locate`` nodes compute their
        references from the coordinates of the others."""
        located = [k for k in j.children if isinstance(k, str) and self._located(k, row)]
        if not located:
            return self._merge(j, row)
        rest = tuple(k for k in j.children if k not in located)
        crd, refs = self._member(rest[0], row) if len(rest) == 1 else self._merge(
            Join(j.kind, rest), row)
        for view in located:
            v = self.t.views[view]
            dim = v.shape[v.fmt.mode_order[self.t.cells[(row, view)].level]]
            refs[view] = self.em.node(NodeKind.LOCATE, f"locate_{_ident(view)}_{row}",
                                      {"outer": self.parent_ref(view, row), "inner": crd},
                                      dim=dim)["ref"]
        return crd, refs

    def _located(self, view: str, row: str) -> bool:
        cell = self.t.cells.get((row, view))
        return cell is not None and cell.kind is CellKind.LOCATE

    def _member(self, child: str | Join, row: str) -> tuple[PortRef, dict[str, PortRef]]:
        """A lone merge member's coordinate stream and reference (or value) stream."""
        if isinstance(child, Join):
            return self._join(child, row)
        if child in self.t.children:
            crds, val = self.bundle_of(child)
            return crds[row], {child: val}
        s = self.scan(child, row)
        return s["crd"], {child: s["ref"]}

    def _merge(self, j: Join, row: str) -> tuple[PortRef, dict[str, PortRef]]:
        pairs: list[tuple[PortRef, str, PortRef]] = []
        for child in j.children:
            if isinstance(child, Join):
                crd, refs = self._join(child, row)
                pairs += [(crd, m, r) for m, r in refs.items()]
            elif child in self.t.children:
                crds, val = self.bundle_of(child)
                pairs.append((crds[row], child, val))
            else:
                s = self.scan(child, row)
                pairs.append((s["crd"], child, s["ref"]))
        kind = NodeKind.INTERSECT if j.kind is JoinKind.INTERSECT else NodeKind.UNION
        inputs = {}
        for i, (crd, _, ref) in enumerate(pairs):
            inputs[f"crd{i}"], inputs[f"ref{i}"] = crd, ref
        # a factored intermediate's values ride on its reference port (val_refs)
        vals = tuple(i for i, (_, _, ref) in enumerate(pairs)
                     if self.em.kind(ref) is StreamKind.VAL)
        n = self.em.node(kind, f"{kind.value}_{row}", inputs, n=len(pairs),
                         **({"val_refs": vals} if vals else {}))
        return n["crd"], {m: n[f"ref{i}"] for i, (_, m, _) in enumerate(pairs)}

    # ------------------------------------------------------------------ values
    def value(self, e: VExpr) -> PortRef:
        key = ("val", e)
        if key in self.memo:
            return self.memo[key]
        if isinstance(e, VAccess):
            v = self.t.views[e.view]
            last = self.order[-1] if self.order else None
            ref = self.ref(CellRef(e.view, last)) if last else self.parent_ref(e.view, "")
            vec = {"lanes": v.vector.lanes} if v.vector is not None and v.vector.lanes > 1 else {}
            out = self.em.node(NodeKind.ARRAY_LOAD, f"vals_{_ident(e.view)}", {"ref": ref}, **vec,
                               tensor=v.tensor)["val"]
        elif isinstance(e, VNamed) and e.tensor in self.t.children:
            out = self.ref(CellRef(e.tensor, self.order[-1])) if self.order else self.bundle_of(e.tensor)[1]
        elif isinstance(e, VNamed):
            out = self.value(e.body)
        elif isinstance(e, VUn) and e.op.row:
            out = self.row_function(e)
        elif isinstance(e, VUn) and e.op is UnOp.LANE_SUM:
            arg = self.value(e.arg)
            w = self.em.lanes.get(arg, 1)
            out = arg if w == 1 else self.em.node(NodeKind.LANE_REDUCE, "lane_reduce", {"val": arg},
                                                  op=ReduceOp.ADD, lanes=w)["val"]
        elif isinstance(e, VBin) and iteration_only(e.rhs, self.t.views):
            out = self.value(e.lhs)  # densified iteration: the iteration term's value is 0
        elif isinstance(e, VUn):
            op = _UNARY_ALU[e.op]
            scalar = {"scalar": e.scalar} if e.op in (UnOp.SCALE, UnOp.SHIFT) else {}
            out = self.em.node(NodeKind.ALU, op.value, {"a": self.value(e.arg)}, op=op,
                               **scalar)["val"]
        else:
            assert isinstance(e, VBin)
            out = self.em.node(NodeKind.ALU, _ALU[e.op].value,
                               {"a": self.value(e.lhs), "b": self.value(e.rhs)}, op=_ALU[e.op])["val"]
        self.memo[key] = out
        return out

    def row_function(self, e: VUn) -> PortRef:
        """softmax / layernorm over the fibres of ``e.index``, the innermost row (the table
        check makes sure): the row subgraphs of :mod:`fuseflow.compiler.lowering`, whose bypass FIFOs
        hold one fibre (the dimension of the index)."""
        out = self.t.output
        n = out.shape[out.indices.index(e.index)]
        x = self.value(e.arg)
        if e.op is UnOp.SOFTMAX:
            return row_softmax(self.em, x, n)
        return row_layernorm(self.em, x, n, float(e.scalar))

    # ------------------------------------------------------------------ output
    def bundle(self) -> tuple[dict[str, PortRef], PortRef]:
        """Compute the output: its coordinate stream per index and the value stream."""
        t = self.t
        val = self.value(t.output.body)
        inner_crd: PortRef | None = None
        if t.hold:
            inner_crd = self.crd(t.hold[0])
            for row in t.hold[1:]:
                h = self.em.node(NodeKind.CRD_HOLD, f"crdhold_{t.hold[0]}_{row}",
                                 {"outer": inner_crd, "inner": self.crd(row)})
                inner_crd = h["outer"]
        outer_crd: dict[str, PortRef] = {}  # an order-2 accumulator's outer output row -> crd0
        by_max = {"op": ReduceOp.MAX} if t.output.reduce is not Op.ADD else {}
        if t.reducers and t.output.reduce is Op.MIN:  # min x = -max(-x)
            val = self.em.node(NodeKind.ALU, "neg_min", {"a": val}, op=AluOp.NEG)["val"]
        for red in t.reducers:
            if red.order == 0:
                val = self.em.node(NodeKind.REDUCE, f"reduce_{red.row}", {"val": val},
                                   op=by_max.get("op", ReduceOp.ADD),
                                   **({"nonempty": True} if red.nonempty else {}))["val"]
            elif red.order == 2:
                if inner_crd is None:
                    inner_crd = self.crd(red.inner)
                shape = t.output.shape
                acc = self.em.node(NodeKind.SPACC2, f"spacc2_{red.row}",
                                   {"outer": self.crd(red.row),
                                    "inner0": outer_crd.get(red.inner0) or self.crd(red.inner0),
                                    "inner1": inner_crd, "val": val},
                                   dim0=shape[t.output.indices.index(red.inner0)],
                                   dim1=shape[t.output.indices.index(red.inner)], **by_max)
                outer_crd[red.inner0], inner_crd, val = acc["crd0"], acc["crd1"], acc["val"]
            else:
                if inner_crd is None:
                    inner_crd = self.crd(red.inner)
                pos = t.output.indices.index(red.inner)
                acc = self.em.node(NodeKind.SPACC1, f"spacc_{red.outer or red.row}",
                                   {"outer": self.crd(red.outer or red.row), "inner": inner_crd,
                                    "val": val},
                                   dim=t.output.shape[pos], **by_max)
                inner_crd, val = acc["crd"], acc["val"]
        if t.reducers and t.output.reduce is Op.MIN:
            val = self.em.node(NodeKind.ALU, "neg_min", {"a": val}, op=AluOp.NEG)["val"]
        crds = {idx: (self.crd(idx) if t.crd_source[idx] == idx else
                      outer_crd.get(idx, inner_crd))
                for idx in t.output.indices}
        body = t.output.body
        if isinstance(body, VUn) and body.op.row:
            # the values of a fibre leave a row function only once the next fibre has been
            # reduced too (a value repeat looks at the next value to close a fibre): the
            # coordinate streams wait in FIFOs that hold two fibres
            n = 2 * (t.output.shape[t.output.indices.index(body.index)] + 2)
            for crd in crds.values():
                self.em.src_depths[crd] = max(self.em.src_depths.get(crd, 0), n)
        return crds, val

    def lower(self) -> None:
        """Compute the output and write it (level writers in storage order, values writer)."""
        crds, val = self.bundle()
        out, fmt = self.t.output, self.t.out_fmt
        assert fmt is not None
        streams = [crds[out.indices[m]] for m in fmt.mode_order]
        # Canonical compressed levels: a coordinate of a compressed level whose fiber in the next
        # compressed level is empty is dropped (inner pairs first, so a coordinate whose fibers
        # all vanished is dropped one level up too); that level's writer then closes a fiber
        # only after a coordinate (skip_empty).  Under a dense parent every fiber is recorded.
        skip = [False] * len(streams)
        for lvl in range(len(streams) - 1, 0, -1):
            if fmt.levels[lvl - 1] is Format.COMPRESSED and fmt.levels[lvl] is Format.COMPRESSED:
                d = self.em.node(NodeKind.CRD_DROP, f"crddrop_{_ident(out.tensor)}{lvl}",
                                 {"outer": streams[lvl - 1], "inner": streams[lvl]})
                streams[lvl - 1], streams[lvl] = d["outer"], d["inner"]
                skip[lvl] = True
        for lvl, crd in enumerate(streams):
            self.em.node(NodeKind.WRITE, f"write_{_ident(out.tensor)}{lvl}", {"crd": crd},
                         tensor=out.tensor, level=lvl, **({"skip_empty": True} if skip[lvl] else {}))
        self.em.node(NodeKind.VALS_WRITE, f"write_{_ident(out.tensor)}_vals", {"val": val},
                     tensor=out.tensor)


@dataclass
class CompiledGroup:
    group: Group
    tables: list[FusionTable]
    graph: Graph
    output_formats: dict[str, TensorFormat]
    seconds: float = 0.0
    factored_requested: bool = True
    parallel: list = field(default_factory=list)  # fuseflow.compiler.passes.par.ParallelRegion per split

    @property
    def factored(self) -> list[str]:
        """Intermediates lowered with factored iteration (their own pipelines), outer first."""
        out: list[str] = []

        def walk(t: FusionTable) -> None:
            for name, ct in t.children.items():
                out.append(name)
                walk(ct)
        for t in self.tables:
            walk(t)
        return out

    @property
    def recomputed(self) -> dict[str, list[str]]:
        """Factored intermediates nested under outer rows of their consumer and recomputed for
        each of their coordinates (nested factored iteration): name -> those rows."""
        out: dict[str, list[str]] = {}
        for t in self._all_tables():
            out.update(t.recomputed())
        return out

    @property
    def inlined_reductions(self) -> list[str]:
        """Reduced intermediates inlined into a consumer's iteration space."""
        return [n for t in self._all_tables() for n, v in t.named.items()
                if _own(v.body, t.views, frozenset(t.children)) - set(v.indices)]

    def _all_tables(self) -> list[FusionTable]:
        out: list[FusionTable] = []

        def walk(t: FusionTable) -> None:
            for ct in t.children.values():
                walk(ct)
            out.append(t)
        for t in self.tables:
            walk(t)
        return out

    def lowering(self) -> str:
        """Which lowering the graph used, in words (for ``--explain``)."""
        fac, inl = list(dict.fromkeys(self.factored)), list(dict.fromkeys(self.inlined_reductions))
        again = self.recomputed
        if again:
            fac[-1] += "; " + ", ".join(f"{n} recomputed per {', '.join(r)}" for n, r in again.items())
        if fac and not inl:
            return f"factored iteration (own pipelines for {', '.join(fac)})"
        if fac:
            return (f"factored iteration for {', '.join(fac)}; {', '.join(inl)} inlined into "
                    "one iteration space (not factorable here)")
        if inl:
            why = "not factorable here" if self.factored_requested else "factored iteration disabled"
            return f"single iteration space ({', '.join(inl)} inlined; {why})"
        return "single iteration space (no reduced intermediate)"

    def explain(self) -> str:
        g = self.group
        capped = "+ (capped)" if g.orders_capped else ""
        lines = [f"== graph {g.name}",
                 "statements: " + "; ".join(s.text for s in g.statements),
                 "fused einsum:", _indent(g.fused_einsum()),
                 "partial order graph:", _indent(g.pog_text()),
                 (f"valid dataflow orders: {g.orders_count}{capped} "
                  f"({g.lowerable_count} lowerable)"),
                 f"chosen order: {' -> '.join(g.order)}"]
        for p in g.permuted:
            lines.append(f"permuted copy: {p.name} = {p.source} stored as {p.fmt} ({p.reason})")
        for n in g.notes:
            lines.append(f"note: {n}")
        for i, what in g.origins.items():  # COO operands (.coo): duplicates summed
            if what.startswith("the index that sums the duplicates"):
                lines.append(f"COO: {i} is {what} (its accumulator emits each coordinate once)")
        lines.append(f"lowering: {self.lowering()}")
        located = [f"{view} at {row}" for t in self.tables for row, view in located_levels(t)]
        lines.append("located dense levels: " + (", ".join(located) if located else
                                                 "none (no dense level under an intersection)"))
        lines += [f"skipping: {line}" for line in explain_skipping(self.graph)]
        lines += [f"parallel: {r.describe()}" for r in self.parallel]
        for t in self.tables:
            lines.append(f"fusion table for {t.output.tensor} (stored as {t.out_fmt}):")
            lines.append(_indent(t.render()))
        return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("  " + ln for ln in text.splitlines())


@dataclass
class CompiledProgram:
    program: Program
    fusion: Fusion
    groups: list[CompiledGroup]
    formats: dict[str, TensorFormat]  # every tensor any graph reads or writes
    permuted: list[PermutedCopy] = field(default_factory=list)
    seconds: float = 0.0
    source: Program | None = None  # the program as written, when the block pass rewrote it

    @property
    def graphs(self) -> list[Graph]:
        return [g.graph for g in self.groups]

    def explain(self) -> str:
        blocked = [f"{n}: mode {d.vector.mode} in blocks of {d.vector.block} (vectors of "
                   f"{d.vector.lanes} lanes)" for n, d in self.program.decls.items() if d.vector]
        head = ["blocked: " + "; ".join(blocked)] if blocked else []
        return "\n\n".join([*head, *(g.explain() for g in self.groups)])


def _all_tables(ts):
    for t in ts:
        yield from _all_tables(t.children.values())
        yield t


def _declare(graph: Graph, name: str, shape: tuple[int, ...], fmt: TensorFormat, role: Role,
             vector: VectorLayout | None) -> None:
    """A graph tensor; a blocked one as its stored tensor (the compiler's levels, then the
    dense level of a vector's lanes) with its block record (data in the original shape)."""
    if vector is None:
        graph.tensor(name, shape, fmt, role)
        return
    b = vector.blocking(fmt)
    graph.tensor(name, b.fmt.stored_shape(b.shape), b.fmt.stored(), role, b)


def emit_graph(group: Group, tables: list[FusionTable]) -> Graph:
    """The graph of one group from its tables (one per output): tensors, the nodes of every
    table's cells, level and value writers, broadcasts for streams used more than once.  FIFO
    depths are left to the ``fifo`` pass and verification to the ``verify`` pass."""
    graph = Graph(group.name)
    declared: set[str] = set()
    for t in _all_tables(tables):
        for v in t.views.values():
            if v.tensor not in declared:
                _declare(graph, v.tensor, v.shape, v.fmt, Role.INPUT, v.vector)
                declared.add(v.tensor)
    for t in tables:
        assert t.out_fmt is not None
        _declare(graph, t.output.tensor, t.output.shape, t.out_fmt, Role.OUTPUT, t.output.vector)
    multi = len(tables) > 1
    emitters = []
    for t in tables:
        em = _Emitter(graph, f"{_ident(t.output.tensor)}_" if multi else "")
        _TableLowering(t, em).lower()
        emitters.append(em)
    for em in emitters:
        em.finish()
    return graph


# ----------------------------------------------------------------------------- the pass
SPACC_BUFFERS = Option("spacc_buffers", Kind.CHOICE, 2,
                       "sparse-accumulator banks: 2 (default) overlaps a fiber's flush with the "
                       "next fiber's accumulation, 1 does not (half the sum words)",
                       sources=Source.PROGRAM, choices=(1, 2), units="banks", schedule=False,
                       sweep=False)


def _run(state: ProgramIR, g: GroupIR) -> Rejected | None:
    assert g.group is not None
    g.graph = emit_graph(g.group, g.tables)
    set_accumulator_buffers(g.graph, state.options.spacc_buffers)
    return None


PASS = Pass("lower", "SAMML nodes from the tables' cells, broadcasts for fan-out, level and value "
            "writers, accumulator buffering", "list[FusionTable]", "samml.Graph", _run,
            graph_pass_text, options=(SPACC_BUFFERS,), needs=("locate",))
