"""Association order of a model's matrix-product chains (``--assoc``).

A model computes ``(A·X)·W`` as it is written: a 2-layer GCN on the Cora-sized graph multiplies
the adjacency by all 1,433 features first, a product of about 246 k nonzeros, then by the
weights.  ``A·(X·W)`` is the same matrix with far less work when ``W`` is narrow.  This module
finds the products whose operand is another product used nowhere else (:func:`chain_pairs`),
rewrites any set of them (:func:`reassociate`), and names the orders for ``--explain``; the
command layer costs every order with the estimate and compiles the cheapest
(``fuseflow_cli.models``).

The rewrite is exact over the reals (a sum of products, summed in another order); float and
fixed-point results differ in rounding only, and the check against PyTorch reports the error.
Element-wise ops after the chain (a bias added to the product) stay where they are.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from .ir import MKind, MNode, ModelIR

__all__ = ["MAX_SUBSETS", "AssocError", "Rewrite", "chain_pairs", "reassociate", "subsets"]

MAX_SUBSETS = 16  # orders costed by --assoc auto: every subset of up to 4 chains


class AssocError(ValueError):
    """A rewrite that does not apply to the model (names the products)."""


@dataclass(frozen=True)
class Rewrite:
    """``outer = Σ_m inner·W`` with ``inner = Σ_k Q·P`` (``P`` holds ``m``): computed as
    ``outer = Σ_k Q·V`` with ``V = Σ_m P·W``, a new product named ``new``."""

    inner: str  # the product computed first as written
    outer: str  # its only consumer
    q: str  # the operand of ``inner`` that stays outside
    p: str  # the operand of ``inner`` multiplied with ``w`` first
    w: str  # the other operand of ``outer``
    new: str  # the name of ``P·W``
    v_spec: str  # einsum spec of ``new = P·W``
    v_shape: tuple[int, ...]
    outer_spec: str  # einsum spec of ``outer = Q·new``
    q_first: bool  # ``Q`` is the left operand of the new ``outer``
    written: str  # e.g. ``(adj·x)·W``
    rewritten: str  # e.g. ``adj·(x·W)``

    def text(self) -> str:
        return f"{self.outer} = {self.rewritten} (as written {self.written})"


def _spec(node: MNode) -> tuple[list[str], str] | None:
    """The input letter strings and output letters of a plain two-operand einsum of matrices with
    one summed letter (None otherwise)."""
    if node.kind is not MKind.EINSUM or len(node.args) != 2 or node.attrs.get("reduce", "add") != "add":
        return None
    spec = str(node.attrs.get("spec", ""))
    if "->" not in spec or "." in spec:
        return None
    lhs, out = spec.split("->")
    ins = lhs.split(",")
    if len(ins) != 2 or any(len(s) != 2 or len(set(s)) != 2 for s in ins) or len(out) != 2:
        return None
    summed = (set(ins[0]) | set(ins[1])) - set(out)
    if len(summed) != 1 or not all(c in ins[0] and c in ins[1] for c in summed):
        return None
    if set(out) != (set(ins[0]) | set(ins[1])) - summed:
        return None
    return ins, out


def _users(ir: ModelIR) -> dict[str, list[MNode]]:
    users: dict[str, list[MNode]] = {}
    for n in ir.nodes:
        for a in n.args:
            users.setdefault(a, []).append(n)
    return users


def chain_pairs(ir: ModelIR) -> list[Rewrite]:
    """Every product ``outer`` one of whose operands is a product ``inner`` that nothing else
    reads (and that is not an output): the chains ``--assoc`` may reassociate, in model order."""
    users = _users(ir)
    by_name = {n.name: n for n in ir.nodes}
    taken: set[str] = set()
    out: list[Rewrite] = []
    for outer in ir.nodes:
        so = _spec(outer)
        if so is None:
            continue
        for side, arg in enumerate(outer.args):
            inner = by_name.get(arg)
            if inner is None or arg in ir.outputs or len(users.get(arg, [])) != 1 or outer.args.count(arg) != 1:
                continue
            si = _spec(inner)
            if si is None or inner.name in taken or outer.name in taken:
                continue
            rw = _rewrite(ir, inner, si, outer, so, side)
            if rw is not None:
                out.append(rw)
                taken.update((inner.name, outer.name))
    return out


def _rewrite(ir: ModelIR, inner: MNode, si, outer: MNode, so, side: int) -> Rewrite | None:
    """The rewrite of ``outer`` (spec ``so``) whose operand ``side`` is ``inner`` (spec ``si``),
    in ``outer``'s letters (``inner``'s summed letter renamed apart)."""
    (i0, i1), iout = si
    ins, oout = so
    as_used = ins[side]  # inner's output letters, as outer writes them
    rename = dict(zip(iout, as_used, strict=True))
    (k,) = (set(i0) | set(i1)) - set(iout)
    fresh = next(c for c in "abcdefghijklmnopqrstuvwxyz" if c not in set(ins[0]) | set(ins[1]))
    rename[k] = fresh
    a_l, x_l = "".join(rename[c] for c in i0), "".join(rename[c] for c in i1)
    w_l = ins[1 - side]
    (m,) = (set(ins[0]) | set(ins[1])) - set(oout)
    if m in a_l and m not in x_l:
        p, p_l, q, q_l = inner.args[0], a_l, inner.args[1], x_l
    elif m in x_l and m not in a_l:
        p, p_l, q, q_l = inner.args[1], x_l, inner.args[0], a_l
    else:
        return None
    v_l = "".join(c for c in p_l if c != m) + "".join(c for c in w_l if c != m)
    if len(v_l) != 2 or fresh not in v_l:
        return None
    sizes = {}
    for letters, name in ((a_l, inner.args[0]), (x_l, inner.args[1]), (w_l, outer.args[1 - side])):
        sizes.update(zip(letters, _shape(ir, name), strict=True))
    w = outer.args[1 - side]
    # the new outer keeps Q on the side it had inside ``inner`` when ``inner`` was the left
    # operand (Q·(P·W)); the order of operands does not change the values
    q_first = q == inner.args[0]
    outer_spec = f"{q_l},{v_l}->{oout}" if q_first else f"{v_l},{q_l}->{oout}"
    pair = f"({inner.args[0]}·{inner.args[1]})"
    written = f"{pair}·{w}" if side == 0 else f"{w}·{pair}"
    rewritten = f"{q}·({p}·{w})" if q_first else f"({p}·{w})·{q}"
    return Rewrite(inner.name, outer.name, q, p, w, f"{outer.name}_assoc", f"{p_l},{w_l}->{v_l}",
                   tuple(sizes[c] for c in v_l), outer_spec, q_first, written, rewritten)


def _shape(ir: ModelIR, name: str) -> tuple[int, ...]:
    return tuple(next(n.shape for n in ir.nodes if n.name == name))


def reassociate(ir: ModelIR, rewrites: list[Rewrite]) -> ModelIR:
    """``ir`` with every rewrite in ``rewrites`` applied: ``inner`` dropped, ``new = P·W`` before
    ``outer``, ``outer = Q·new``.  The outputs, data and PyTorch reference are unchanged."""
    if not rewrites:
        return ir
    drop = {r.inner for r in rewrites}
    by_outer = {r.outer: r for r in rewrites}
    names = {n.name for n in ir.nodes}
    nodes: list[MNode] = []
    for n in ir.nodes:
        if n.name in drop:
            continue
        r = by_outer.get(n.name)
        if r is None:
            nodes.append(n)
            continue
        if r.new in names:
            raise AssocError(f"--assoc: {n.name}: the name {r.new} is taken")
        # its own fusion region: fused into the product that reads it, P·W would be recomputed
        # for every nonzero of Q (partial fusion keeps a region together)
        nodes.append(MNode(r.new, MKind.EINSUM, (r.p, r.w), r.v_shape, f"{n.region}.{r.new}", n.source,
                           {"spec": r.v_spec}))
        args = (r.q, r.new) if r.q_first else (r.new, r.q)
        nodes.append(replace(n, args=args, attrs={**n.attrs, "spec": r.outer_spec}))
    return replace(ir, nodes=nodes)


def subsets(pairs: list[Rewrite]) -> list[tuple[Rewrite, ...]]:
    """The orders ``--assoc auto`` costs: every subset of the chains (as written first) while
    there are at most :data:`MAX_SUBSETS`; beyond that, as written, each chain alone and all."""
    if 2 ** len(pairs) <= MAX_SUBSETS:
        return [c for k in range(len(pairs) + 1) for c in itertools.combinations(pairs, k)]
    return [(), *((p,) for p in pairs), tuple(pairs)]
