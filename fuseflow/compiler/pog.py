"""The partial order graph of a fused group (docs/compiler.md): the ordering constraints of its
views, outputs, COO operands and row functions, cycle resolution by permuted copies, and the
choice of a dataflow order the lowering can realise."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace

import networkx as nx

from ..ir.tensor import Format, TensorFormat
from .densify import is_iteration_tensor
from .fused import (
    MAX_KEPT,
    MAX_ORDERS,
    FusedOutput,
    Group,
    PermutedCopy,
    VAccess,
    VBin,
    VExpr,
    View,
    VNamed,
    VUn,
    vexpr_nodes,
)
from .program import FusionError, Op, UnOp
from .semantics import value_indices, views_under


def _add_edge(pog: nx.DiGraph, a: str, b: str, reason: str) -> None:
    if pog.has_edge(a, b):
        if reason not in pog[a][b]["reasons"]:
            pog[a][b]["reasons"].append(reason)
    else:
        pog.add_edge(a, b, reasons=[reason])


def _view_edges(v: View) -> list[tuple[str, str]]:
    li = v.level_indices()
    return list(itertools.pairwise(li))


def _build_pog(g: Group, user_orders: list[tuple[str, tuple[str, ...]]]) -> str | None:
    """The partial order graph of ``g``'s indices; None, or why its cycles cannot be broken."""
    pog = g.pog
    pog.add_nodes_from(i for o in g.outputs for i in o.indices)
    pog.add_nodes_from(i for v in g.views.values() for i in v.indices)
    pog.add_nodes_from(r for o in g.outputs for r in o.reduced)
    for v in g.views.values():
        for a, b in _view_edges(v):
            _add_edge(pog, a, b, f"mode order of {v}")
    for o in g.outputs:
        _output_edges(pog, o)
    for text, order in user_orders:
        for a, b in itertools.pairwise(order):
            _add_edge(pog, a, b, f"dataflow order of '{text}'")
    edges, why = _coo_edges([(o.tensor, o.body) for o in g.outputs], g.views)
    if why:
        return f"group {g.name}: {why}"
    for a, b, reason in edges:
        _add_edge(pog, a, b, reason)
    _convert_conflicting_outputs(g)
    return _resolve_cycles(g)


def _convert_conflicting_outputs(g: Group) -> None:
    """Outputs of the group whose declared mode orders conflict with each other (``T`` CSR
    and ``Y = relu(T)`` CSC in one graph): no permuted copy of an operand breaks that, so one
    of them is converted on the host (:func:`_convert_output`)."""
    while True:
        own = nx.DiGraph([(a, b) for a, b, d in g.pog.edges(data=True)
                          if any(r.startswith("mode order of output ") for r in d["reasons"])])
        edges = _first_cycle(own)
        if not edges or not _convert_output(g, edges):
            return


def _output_edges(pog: nx.DiGraph, o: FusedOutput) -> None:
    """The ordering constraints an output adds: its declared mode order, the vectors of a
    block stored innermost (the block pass), and each row function's index innermost among
    the indices of the tensor it computes."""
    if o.vector is not None and o.vector.split > 1:
        for a in o.indices[:-1]:
            _add_edge(pog, a, o.indices[-1], f"vectors of a block of {o.tensor} stored innermost")
    if o.fmt is not None:
        li = tuple(o.indices[m] for m in o.fmt.mode_order)
        for a, b in itertools.pairwise(li):
            _add_edge(pog, a, b, _output_reason(o))
    for tensor, indices, fn in _row_functions(o.tensor, o.indices, o.body):
        for a in indices:
            if a != fn.index:
                _add_edge(pog, a, fn.index, f"{fn.op.value} of {tensor} runs along {fn.index}")


def _pairs(e: VExpr, views: Mapping[str, View], out: list[tuple[str, str]]) -> None:
    """(COO view, its duplicate-summing index) for every lifted access under ``e``."""
    if isinstance(e, VBin):
        if (e.op is Op.MUL and isinstance(e.lhs, VAccess) and isinstance(e.rhs, VAccess)
                and views[e.lhs.view].fmt.coo and is_iteration_tensor(views[e.rhs.view].tensor)):
            out.append((e.lhs.view, views[e.rhs.view].indices[0]))
            return
        _pairs(e.lhs, views, out)
        _pairs(e.rhs, views, out)
    elif isinstance(e, VNamed):
        _pairs(e.body, views, out)
    elif isinstance(e, VUn):
        _pairs(e.arg, views, out)


def _coo_edges(bodies: list[tuple[str, VExpr]], views: Mapping[str, View]
              ) -> tuple[list[tuple[str, str, str]], str | None]:
    """The ordering constraints of the COO views under the output ``bodies`` (``(output,
    body)``): each one's duplicate-summing index ``d`` directly above its non-unique level
    (``level above -> d -> non-unique level``), as ``(a, b, reason)``; and why the group cannot
    be compiled (a COO view read twice in one output), or None."""
    edges: list[tuple[str, str, str]] = []
    for out, body in bodies:
        pairs: list[tuple[str, str]] = []
        _pairs(body, views, pairs)
        seen: dict[str, str] = {}
        for name, d in pairs:
            v = views[name]
            if name in seen:
                return [], (f"output {out}: the COO tensor {v.tensor} is read twice as {v} in one "
                            "product, which would multiply each stored entry by itself, but "
                            "duplicate entries must be summed first; read it once, or from a "
                            "CSR / DCSR copy (TensorData.convert)")
            seen[name] = d
            li = v.level_indices()
            nu = v.fmt.levels.index(Format.COMPRESSED_NONUNIQUE)
            why = f"duplicates of COO tensor {v} are summed over {d} above its non-unique level"
            if nu:
                edges.append((li[nu - 1], d, why))
            edges.append((d, li[nu], why))
    return edges, None


def _row_functions(tensor: str, indices: tuple[str, ...], body: VExpr
                   ) -> list[tuple[str, tuple[str, ...], VUn]]:
    """The row functions of an output (its whole body) and of the intermediates inlined in it:
    (tensor, its indices, the function); each must see its index innermost."""
    out = [(tensor, indices, body)] if isinstance(body, VUn) and body.op.row else []
    return out + [(x.tensor, x.indices, x.body) for x in vexpr_nodes(body)
                  if isinstance(x, VNamed) and isinstance(x.body, VUn) and x.body.op.row]


def _first_cycle(pog: nx.DiGraph) -> list[tuple[str, str]]:
    """The edges of a cycle of ``pog`` ([] when it has none)."""
    if nx.is_directed_acyclic_graph(pog):
        return []
    return [(a, b) for a, b, *_ in nx.find_cycle(pog)]


def _permutable(v: View) -> bool:
    """A view that can be read from a permuted copy: a stored tensor of order >= 2 (an input or
    a tensor an earlier graph writes), not read from a permuted copy already, not COO (the
    ordering constraints of its duplicate-summing index follow its stored mode order)."""
    return (len(v.indices) > 1 and v.tensor == v.source and not is_iteration_tensor(v.source)
            and not v.fmt.coo)


def _without(pog: nx.DiGraph, views: Sequence[View]) -> nx.DiGraph:
    """``pog`` without the mode-order edges of ``views`` (edges with other reasons stay)."""
    out = pog.copy()
    for v in views:
        for a, b in _view_edges(v):
            if out.has_edge(a, b) and all(r == f"mode order of {v}" for r in out[a][b]["reasons"]):
                out.remove_edge(a, b)
    return out


def _resolve_cycles(g: Group) -> str | None:
    """Break the POG's cycles with permuted copies of views; None, or why a cycle stays."""
    pog = g.pog
    while True:
        edges = _first_cycle(pog)
        if not edges:
            return None
        # a view on the cycle can be read from a permuted copy (once: a view read from a
        # permuted copy already is not permuted again): views of a tensor used through several
        # views first (the copy serves the conflicting use), then any other view of a stored
        # tensor (e.g. a CSC operand of an elementwise product with a CSR one, read from a
        # row-major copy); blocked views last (they cannot be permuted: an error below); among
        # those, the first whose copy leaves no cycle
        counts = {s: sum(1 for v in g.views.values() if v.source == s)
                  for s in {v.source for v in g.views.values() if v.indices}}
        on_cycle = [v for v in reversed(list(g.views.values()))
                    if _permutable(v) and any(e in edges for e in _view_edges(v))]
        # a cycle through a dataflow order the user wrote is theirs to resolve: only the views
        # of tensors used through several views are permuted then (as the error says)
        user = any(r.startswith("dataflow order of") for a, b in edges for r in pog[a][b]["reasons"])
        on_cycle = [v for v in on_cycle if counts.get(v.source, 0) > 1 or not user]
        candidates = sorted(on_cycle, key=lambda v: (v.vector is not None, counts.get(v.source, 0) <= 1))
        # an output's declared mode order on the cycle is converted on the host where no copy
        # of an operand breaks it, or where the cycle runs through the user's dataflow order
        # (the output conversion keeps that order; a copy might not)
        if (user or not candidates) and _convert_output(g, edges):
            continue
        if not candidates:
            why = []
            for a, b in edges:
                why.append(f"{a} -> {b} ({'; '.join(pog[a][b]['reasons'])})")
            return (f"group {g.name}: the ordering constraints form a cycle: "
                    + ", ".join(why) + g.where([a for a, _ in edges])
                    + "; change the dataflow order or the format")
        multi = counts.get(candidates[0].source, 0) > 1
        v = candidates[0] if multi else \
            next((c for c in candidates if nx.is_directed_acyclic_graph(_without(pog, [c]))), candidates[0])
        for a, b in _view_edges(v):
            reasons = pog[a][b]["reasons"]
            reasons.remove(f"mode order of {v}")
            if not reasons:
                pog.remove_edge(a, b)
        # the copy's mode order: a topological order of the constraints that stay (without the
        # views that may still be permuted, when the rest has a cycle yet)
        rest = pog if nx.is_directed_acyclic_graph(pog) or multi else \
            _without(pog, [w for w in g.views.values() if _permutable(w) and w.vector is None])
        topo = list(nx.topological_sort(rest)) if nx.is_directed_acyclic_graph(rest) else list(pog.nodes)
        rank = {i: k for k, i in enumerate(topo)}
        mode_order = tuple(sorted(range(len(v.indices)), key=lambda m: rank[v.indices[m]]))
        fmt = TensorFormat(v.fmt.levels, mode_order)
        densified = any(is_iteration_tensor(w.source) for w in g.views.values())
        if (densified or v.name in _broadcast_over(g)) and v.name not in _visits_read_views(g):
            # not where a softmax reads the view's visited coordinates: a dense copy would
            # visit every coordinate of its leading indices, and the softmax normalises over
            # the visited ones (program fuzzer seeds 11431, 11635, 12171)
            fmt = _keeping_dense_cover(v.fmt, mode_order)
        copy = f"{v.source}_p{''.join(map(str, mode_order))}"
        if fmt.levels != v.fmt.levels:  # another group may copy the same tensor in the same order with
            copy += "_" + "".join(f.value[0] for f in fmt.levels)  # its own levels: its own name
        if v.vector is not None:
            return (f"group {g.name}: the views of the blocked tensor {v.source} conflict (POG cycle "
                    f"{' -> '.join(a for a, _ in edges)}); a blocked tensor cannot be read through a "
                    "permuted copy: change the dataflow order or the format")
        nv = View(v.name, copy, v.source, v.indices, v.shape, fmt)
        g.views[v.name] = nv
        what = f"views of {v.source} conflict" if multi else f"the mode order of {v} conflicts"
        g.permuted.append(PermutedCopy(copy, v.source, fmt,
                                       f"{what} (POG cycle "
                                       f"{' -> '.join(a for a, _ in edges)} -> {edges[0][0]})"))
        for a, b in _view_edges(nv):
            _add_edge(pog, a, b, f"mode order of {nv} (permuted copy {copy})")


def _output_reason(o: FusedOutput) -> str:
    return f"mode order of output {o.tensor}_{{{','.join(o.indices)}}}"


def _without_output(pog: nx.DiGraph, o: FusedOutput) -> nx.DiGraph:
    out = pog.copy()
    out.remove_edges_from([(a, b) for a, b, d in pog.edges(data=True) if d["reasons"] == [_output_reason(o)]])
    return out


def _convert_output(g: Group, edges: Sequence[tuple[str, str]]) -> bool:
    """Break a cycle through an output's declared mode order that no permuted copy of an
    operand breaks (a COO or blocked operand, a dataflow order the user wrote, two outputs of
    the group in conflicting orders): the group writes the output in an order its operands
    allow, under a name of its own, and the host converts it to the declared format (a
    permuted copy of the result, :class:`PermutedCopy` with the output's name).  False if no
    output's mode order is on the cycle."""
    pog = g.pog
    on_cycle = {r for a, b in edges for r in pog[a][b]["reasons"]}
    on = [k for k, o in enumerate(g.outputs) if o.fmt is not None and o.vector is None
          and _output_reason(o) in on_cycle]
    if not on:
        return False
    # the output whose conversion leaves no cycle (its operands allow no other order), else the last
    k = next((k for k in on if nx.is_directed_acyclic_graph(_without_output(pog, g.outputs[k]))), on[-1])
    o = g.outputs[k]
    reason = _output_reason(o)
    for a, b in list(pog.edges):
        reasons = pog[a][b]["reasons"]
        if reason in reasons:
            reasons.remove(reason)
            if not reasons:
                pog.remove_edge(a, b)
    taken = {v.tensor for v in g.views.values()} | {x.tensor for x in g.outputs}
    name = next(n for n in (f"{o.tensor}_computed{s}" for s in itertools.chain([""], itertools.count(2)))
                if n not in taken)
    g.outputs[k] = replace(o, tensor=name, fmt=None)
    if o.tensor in g.exact:
        g.exact = g.exact | {name}
    cycle = " -> ".join([a for a, _ in edges] + [edges[0][0]])
    written = " -> ".join(o.indices[m] for m in o.fmt.mode_order)
    g.permuted.append(PermutedCopy(
        o.tensor, name, o.fmt,
        f"output conversion on the host: {o.tensor} is requested in mode order {written}, which "
        f"conflicts with the orders of its operands (POG cycle {cycle}): computed as {name} in an "
        "order they allow, then re-sorted (the primitive set has no sorter)"))
    return True


def _broadcast_over(g: Group) -> set[str]:
    """The views under an operand of a sum that another operand is broadcast over (``A_ij +
    b_j``): the densifier left their dense levels to enumerate the broadcast indices
    (:meth:`.densify._Densifier.broadcast`), so a permuted copy of one keeps them dense."""
    out: set[str] = set()

    def walk(e: VExpr) -> None:
        if isinstance(e, VBin):
            if not e.op.product:
                for x, other in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                    if value_indices(x, g.views) - value_indices(other, g.views):
                        out.update(views_under(x))
            walk(e.lhs)
            walk(e.rhs)
        elif isinstance(e, VUn):
            walk(e.arg)
        elif isinstance(e, VNamed):
            walk(e.body)

    for o in g.outputs:
        walk(o.body)
    return out


def _visits_read_views(g: Group) -> set[str]:
    """The views of ``g`` whose visited coordinates a softmax reads: under a softmax's operand
    (not below a layernorm, which visits every coordinate), or under an output or inlined
    intermediate in :attr:`Group.exact` (its visited coordinates reach a softmax later)."""
    out: set[str] = set()

    def walk(e: VExpr, under: bool) -> None:
        if isinstance(e, VAccess):
            if under:
                out.add(e.view)
        elif isinstance(e, VUn):
            # a function with f(0) != 0 is densified (.densify): it visits every coordinate
            keeps = e.op.zero_preserving and e.op is not UnOp.LAYERNORM
            walk(e.arg, e.op is UnOp.SOFTMAX or (under and keeps))
        elif isinstance(e, VBin):
            walk(e.lhs, under)
            walk(e.rhs, under)
        elif isinstance(e, VNamed):
            walk(e.body, under or e.tensor in g.exact)

    for o in g.outputs:
        walk(o.body, o.tensor in g.exact)
    return out


def _keeping_dense_cover(fmt: TensorFormat, mode_order: tuple[int, ...]) -> TensorFormat:
    """A permuted copy's format in a densified group (:mod:`.densify`): the densifier left an
    index out where the operand's levels are dense down to it (its scanners enumerate the whole
    dimension), so the copy keeps that: its levels are dense down to the deepest such index in
    the new order (a CSC operand of ``x + c`` read row-major is read from a dense copy, not a
    CSR one whose compressed column level would leave the shifted zeros out)."""
    lead = next((k for k, f in enumerate(fmt.levels) if f is not Format.DENSE), len(fmt.levels))
    covered = fmt.mode_order[:lead]
    if not covered:
        return TensorFormat(fmt.levels, mode_order)
    deepest = max(mode_order.index(m) for m in covered)
    levels = tuple(Format.DENSE if lvl <= deepest else f for lvl, f in enumerate(fmt.levels))
    return TensorFormat(levels, mode_order)


MAX_ACC_ORDER = 2  # the sparse accumulators: spacc1 (order 1) and spacc2 (order 2)


def accumulator_order(order: Sequence[str], out: FusedOutput) -> int:
    """The largest number of output indices after a reduction index of ``out`` in ``order``:
    the order of the sparse accumulator that reduction needs (0: none)."""
    pos = [i for i in order if i in out.indices or i in out.reduced]
    need = 0
    for k, r in enumerate(pos):
        if r in out.reduced:
            need = max(need, sum(1 for i in pos[k + 1:] if i in out.indices))
    return need


def order_lowerable(order: Sequence[str], out: FusedOutput) -> str | None:
    """None if the codegen can lower ``out`` in ``order``, else the reason."""
    pos = [i for i in order if i in out.indices or i in out.reduced]
    for k, r in enumerate(pos):
        if r in out.reduced:
            after = [i for i in pos[k + 1:] if i in out.indices]
            if len(after) > MAX_ACC_ORDER:
                return (f"reduction index {r} of {out.tensor} has output indices "
                        f"{', '.join(after)} after it: that needs a sparse accumulator of order "
                        f"{len(after)}, and the primitive set has orders 1 and 2 only (spacc1, "
                        "spacc2)")
    return None




def _acc_need(order: Sequence[str], g: Group) -> int:
    return max((accumulator_order(order, o) for o in g.outputs), default=0)


def _choose_order(g: Group) -> str | None:
    """Pick the first lowerable topological order of the POG, preferring orders whose
    reductions need order-1 accumulators at most (an order-2 accumulator buffers a whole 2-D
    fibre); None, or why there is none."""
    pog = g.pog
    first = {i: k for k, i in enumerate(pog.nodes)}
    preferred = tuple(nx.lexicographical_topological_sort(pog, key=lambda i: first[i]))
    count = lowerable = 0
    chosen: tuple[str, ...] | None = None
    fallback: tuple[str, ...] | None = None  # the first lowerable order with spacc2
    if all(order_lowerable(preferred, o) is None for o in g.outputs):
        if _acc_need(preferred, g) <= 1:
            chosen = preferred
        else:
            fallback = preferred
    for order in nx.all_topological_sorts(pog):
        count += 1
        if all(order_lowerable(order, o) is None for o in g.outputs):
            lowerable += 1
            if len(g.lowerable_orders) < MAX_KEPT:
                g.lowerable_orders.append(tuple(order))
            if chosen is None and _acc_need(order, g) <= 1:
                chosen = tuple(order)
            elif fallback is None:
                fallback = tuple(order)
        if count >= MAX_ORDERS:
            g.orders_capped = True
            break
    g.orders_count, g.lowerable_count = count, lowerable
    chosen = chosen or fallback
    if chosen is None:
        reasons = {order_lowerable(preferred, o) for o in g.outputs} - {None}
        return (f"group {g.name}: no valid dataflow order can be lowered: "
                + "; ".join(sorted(r for r in reasons if r)) + g.where(g.pog.nodes))
    g.order = chosen
    return None


def order_problem(g: Group, order: Sequence[str]) -> str | None:
    """None if ``order`` (a full fused order) is a lowerable topological order of ``g``'s POG,
    else why not."""
    order = tuple(order)
    if sorted(order) != sorted(g.pog.nodes):
        return (f"group {g.name}: order {','.join(order)} must name each of the indices "
                f"{', '.join(g.pog.nodes)} once")
    pos = {i: k for k, i in enumerate(order)}
    for a, b, d in g.pog.edges(data=True):
        if pos[a] > pos[b]:
            return (f"group {g.name}: order {','.join(order)} puts {b} before {a}, but the "
                    f"POG requires {a} -> {b} ({'; '.join(d['reasons'])})" + g.where([a, b]))
    for o in g.outputs:
        why = order_lowerable(order, o)
        if why:
            return f"group {g.name}: order {','.join(order)} cannot be lowered: {why}"
    return None


def set_order(g: Group, order: Sequence[str]) -> None:
    """Use ``order`` (a full fused order) for ``g``; :class:`FusionError` if
    :func:`order_problem` rejects it."""
    why = order_problem(g, order)
    if why:
        raise FusionError(why)
    g.order = tuple(order)


def all_orders(g: Group, cap: int = MAX_ORDERS) -> list[tuple[str, ...]]:
    """Valid (POG-respecting and lowerable) fused orders of ``g``, at most ``cap``."""
    out = []
    for order in nx.all_topological_sorts(g.pog):
        if all(order_lowerable(order, o) is None for o in g.outputs):
            out.append(tuple(order))
            if len(out) >= cap:
                break
    return out

