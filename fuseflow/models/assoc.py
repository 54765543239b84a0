"""Association order of a model's matrix-product chains (``--assoc``).

A model computes ``(A·X)·W`` as it is written: a 2-layer GCN on the Cora-sized graph multiplies
the adjacency by all 1,433 features first, a product of about 246 k nonzeros, then by the
weights.  ``A·(X·W)`` is the same matrix with far less work when ``W`` is narrow.  This module
finds the products whose operand is another product used nowhere else (:func:`chain_pairs`),
rewrites any set of them (:func:`reassociate`), and names the orders for ``--explain``; the
command layer costs every order with the estimate and compiles the cheapest
(``fuseflow_cli.models``).

A chain may be split by an element-wise op that commutes with the outer product: a scale,
``(c·(Q·P))·W = c·(Q·(P·W))``, or an added term (a bias, a residual), ``(Q·P + b)·W =
Q·(P·W) + b·W``; the op moves after the outer product (a bias becomes the product ``b·W``: for a
bias vector, a vector).  The rewrite is exact over the reals (a sum of products, summed in
another order); float and fixed-point results differ in rounding only, and the check against
PyTorch reports the error.  Element-wise ops after the chain (a bias added to the product) stay
where they are.
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
    # an element-wise op between ``inner`` and ``outer`` (empty: none), moved after ``outer``,
    # which is then computed as ``chain`` (``outer`` names the op's result)
    between: str = ""
    scale: float | None = None  # a scale's factor
    term: str = ""  # an added term's tensor
    term_new: str = ""  # the name of ``term·W``
    term_spec: str = ""  # einsum spec of ``term_new = term·W``
    term_shape: tuple[int, ...] = ()
    chain: str = ""  # the name of ``Q·(P·W)`` when an op follows it

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
            if not _only_use(ir, users, arg, outer):
                continue
            between = _between(ir, users, by_name[arg]) if arg in by_name else None
            inner = by_name.get(between[1] if between else arg)
            si = _spec(inner) if inner is not None else None
            if si is None or {inner.name, outer.name, arg} & taken:
                continue
            rw = _rewrite(ir, inner, si, outer, so, side)
            if rw is not None and between is not None:
                rw = _moved(ir, rw, by_name[arg], between, so[0][side], so[0][1 - side], so[1])
            if rw is not None:
                out.append(rw)
                taken.update((inner.name, outer.name, arg))
    return out


def _only_use(ir: ModelIR, users: dict[str, list[MNode]], name: str, user: MNode) -> bool:
    """``name`` is read by ``user`` alone, once, and is not an output."""
    return name not in ir.outputs and len(users.get(name, [])) == 1 and user.args.count(name) == 1


def _between(ir: ModelIR, users: dict[str, list[MNode]], node: MNode) -> tuple[str, str] | None:
    """``(kind, product)`` when ``node`` is an element-wise op that commutes with a product
    after it, applied to a product read nowhere else: a scale, or an add of another tensor
    broadcast over the product (its trailing axes), either side; None otherwise."""
    if node.kind is MKind.SCALE and len(node.args) == 1:
        prod = node.args[0]
        kind = "scale"
    elif node.kind is MKind.ADD and len(node.args) == 2 and node.args[0] != node.args[1]:
        shapes = [_shape(ir, a) for a in node.args]
        sides = [k for k in (0, 1) if shapes[k] == node.shape and len(shapes[1 - k]) <= len(node.shape)
                 and tuple(node.shape[len(node.shape) - len(shapes[1 - k]):]) == shapes[1 - k]]
        if not sides:
            return None
        prod = node.args[sides[0]]
        kind = "add"
    else:
        return None
    p = next((n for n in ir.nodes if n.name == prod), None)
    if p is None or p.kind is not MKind.EINSUM or not _only_use(ir, users, prod, node):
        return None
    return kind, prod


def _moved(ir: ModelIR, rw: Rewrite, op: MNode, between: tuple[str, str], used: str, w_l: str,
           oout: str) -> Rewrite | None:
    """``rw`` with the element-wise ``op`` moved after the outer product (``used``: the letters
    the outer product reads ``op``'s result with; ``w_l`` its other operand's, ``oout`` its
    output's); None when the moved op would not be a plain add or scale of its result."""
    kind, prod = between
    a0, a1 = next(n.args for n in ir.nodes if n.name == prod)
    pair = f"({a0}·{a1})"
    if kind == "scale":
        c = float(op.attrs["c"])
        return replace(rw, between=op.name, scale=c, chain=f"{rw.outer}_chain",
                       written=rw.written.replace(pair, f"({c:g}·{pair})", 1), rewritten=f"{c:g}·{rw.rewritten}")
    (m,) = (set(used) | set(w_l)) - set(oout)
    term = next(a for a in op.args if a != prod)
    t_l = used[len(used) - len(_shape(ir, term)):]  # the term's letters: broadcast over the leading axes
    if m not in t_l:
        return None
    out_l = "".join(c for c in oout if c in (set(t_l) | set(w_l)) - {m})
    if not oout.endswith(out_l):  # term·W is added over the chain's trailing axes
        return None
    sizes = dict(zip(used, _shape(ir, prod), strict=True)) | dict(zip(w_l, _shape(ir, rw.w), strict=True))
    return replace(rw, between=op.name, term=term, term_new=f"{rw.outer}_{term}", term_spec=f"{t_l},{w_l}->{out_l}",
                   term_shape=tuple(sizes[c] for c in out_l), chain=f"{rw.outer}_chain",
                   written=rw.written.replace(pair, f"({pair} + {term})", 1),
                   rewritten=f"{rw.rewritten} + {term}·{rw.w}")


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
    drop = {r.inner for r in rewrites} | {r.between for r in rewrites if r.between}
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
        taken = [x for x in (r.new, r.chain, r.term_new) if x and x in names]
        if taken:
            raise AssocError(f"--assoc: {n.name}: the name {taken[0]} is taken")
        # its own fusion region: fused into the product that reads it, P·W would be recomputed
        # for every nonzero of Q (partial fusion keeps a region together)
        nodes.append(MNode(r.new, MKind.EINSUM, (r.p, r.w), r.v_shape, f"{n.region}.{r.new}", n.source,
                           {"spec": r.v_spec}))
        if r.term:  # term·W, in a region of its own as P·W (before the chain's region reads it)
            nodes.append(MNode(r.term_new, MKind.EINSUM, (r.term, r.w), r.term_shape, f"{n.region}.{r.term_new}",
                               n.source, {"spec": r.term_spec}))
        args = (r.q, r.new) if r.q_first else (r.new, r.q)
        chain = replace(n, name=r.chain or n.name, args=args, attrs={**n.attrs, "spec": r.outer_spec})
        nodes.append(chain)
        if r.scale is not None:  # the scale after the chain, under the outer product's name
            nodes.append(MNode(n.name, MKind.SCALE, (chain.name,), n.shape, n.region, n.source, {"c": r.scale}))
        elif r.term:  # the term's product added to the chain
            nodes.append(MNode(n.name, MKind.ADD, (chain.name, r.term_new), n.shape, n.region, n.source))
    for r in rewrites:
        for name in (r.new, r.term_new):
            if name:
                _hoist(nodes, name, ir.node(r.outer).region)
    return replace(ir, nodes=nodes)


def _hoist(nodes: list[MNode], name: str, region: str) -> None:
    """Move the new product ``name`` (in a region of its own) in front of ``region``, which
    reads it: fusion regions run in the order they first appear.  When what it reads is computed
    inside ``region`` itself, it joins ``region`` (fused there; the estimate costs that)."""
    k = next(i for i, n in enumerate(nodes) if n.name == name)
    node = nodes.pop(k)
    made = {n.name: i for i, n in enumerate(nodes)}
    after = max((made[a] + 1 for a in node.args if a in made), default=0)
    first = next(i for i, n in enumerate(nodes) if n.region == region)
    if after <= first:
        nodes.insert(first, node)
    else:
        nodes.insert(k, replace(node, region=region))


def subsets(pairs: list[Rewrite]) -> list[tuple[Rewrite, ...]]:
    """The orders ``--assoc auto`` costs: every subset of the chains (as written first) while
    there are at most :data:`MAX_SUBSETS`; beyond that, as written, each chain alone and all."""
    if 2 ** len(pairs) <= MAX_SUBSETS:
        return [c for k in range(len(pairs) + 1) for c in itertools.combinations(pairs, k)]
    return [(), *((p,) for p in pairs), tuple(pairs)]
