"""Hand-built SAMML graphs of the spine kernels, from a small builder.

These are the reference graphs used by tests, benchmarks and ``fuseflow-hw demo``; like the
compiler's graphs, their reconvergent paths get FIFO depths from :func:`fuseflow.compiler.passes.fifo.size_fifos`:
SpMV ``y_i = B_ij c_j``; SpMM ``C_ij = A_ik B_kj`` (Gustavson order i→k→j with a sparse
accumulator); elementwise ``C = A + B`` (union) and ``C = A * B`` (intersect); block-sparse SpMM
``Y = A X`` with ``A`` row-blocked and the blocks streamed as vectors (:func:`bspmm`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from .compiler.bounds import check_program
from .compiler.passes.fifo import size_fifos
from .compiler.program import Program, einsum
from .ir.builder import GraphBuilder
from .ir.check import Check
from .ir.numerics import INT32, Mode, Numerics
from .ir.quantize import quantized_input, range_checked
from .ir.samml import AluOp, Graph, NodeKind, PortRef, ReduceOp, Role, StreamKind
from .ir.tensor import CSR, DENSE2, BlockFormat, Blocking, Format, TensorFormat, row_blocked

__all__ = ["KERNELS", "KERNEL_OPTIONS", "GraphBuilder", "bspmm", "bspmm_formats", "check_kernel",
           "elementwise", "example", "example_from_matrix", "inner_product", "integer_matrix", "kernel_graph",
           "kernel_program", "matrix_use", "random_operands", "sparse_inputs", "spmm", "spmv"]


def _rows_then_intersect(b: GraphBuilder, a: str, other: str, out: str,
                         need_crd: bool = True) -> tuple[PortRef | None, PortRef, PortRef]:
    """The loop head shared by SpMV and SpMM: scan the rows ``i`` of matrix ``a`` (written as
    level 0 of ``out``), then meet ``a``'s fiber under each row with the top level of
    ``other``, whose root is repeated once per row: a dense ``other`` is located at ``a``'s
    coordinates (work per nonzero of ``a``), a compressed one is scanned and intersected.
    Returns the coordinate (None unless ``need_crd``) and the references into ``a`` and
    ``other``."""
    crd_i, ref_i = b.scan(a, 0, b.root(a))
    crd_i_w, crd_i_r = b.bcast(crd_i, 2, StreamKind.CRD)
    b.write(out, 0, crd_i_w)
    crd_a, ref_a = b.scan(a, 1, ref_i)
    b.g.indices = {"i": [crd_i], "k": [crd_a]}
    parent = b.repeat(b.root(other), crd_i_r)
    t = b.g.tensors[other]
    if t.fmt.levels[0] is Format.DENSE:
        crd, crd_loc = b.bcast(crd_a, 2, StreamKind.CRD) if need_crd else (None, crd_a)
        ro = b.node(NodeKind.LOCATE, "locate", {"outer": parent, "inner": crd_loc},
                    dim=t.shape[t.fmt.mode_order[0]])["ref"]
        return crd, ref_a, ro
    crd_o, ref_o = b.scan(other, 0, parent)
    crd, (ra, ro) = b.join(NodeKind.INTERSECT, [(crd_a, ref_a), (crd_o, ref_o)])
    b.g.indices["k"] = [crd]
    if not need_crd:
        b.g.discard(crd)
    return crd, ra, ro


def spmv(n: int = 64, m: int = 64) -> Graph:
    """``y_i = B_ij c_j``: B CSR (n×m), c dense (m), y dense (n)."""
    b = GraphBuilder("spmv")
    g = b.g
    g.tensor("B", (n, m), CSR)
    g.tensor("c", (m,), TensorFormat(("dense",)))
    g.tensor("y", (n,), TensorFormat(("dense",)), Role.OUTPUT)
    _, rb, rc = _rows_then_intersect(b, "B", "c", "y", need_crd=False)
    g.indices["j"] = g.indices.pop("k")  # y_i = B_ij c_j
    prod = b.alu(AluOp.MUL, b.load("B", rb), b.load("c", rc))
    red = b.node(NodeKind.REDUCE, "reduce", {"val": prod}, op=ReduceOp.ADD.value)
    b.write_vals("y", red["val"])
    size_fifos(g)
    return g


def spmm(n: int = 64, k: int = 64, m: int = 64, b_format: TensorFormat = DENSE2) -> Graph:
    """``C_ij = A_ik B_kj``: A CSR, B dense or CSR, C CSR; order i→k→j with a sparse accumulator."""
    b = GraphBuilder("spmm_" + ("dense" if b_format == DENSE2 else "csr"))
    g = b.g
    g.tensor("A", (n, k), CSR)
    g.tensor("B", (k, m), b_format)
    g.tensor("C", (n, m), CSR, Role.OUTPUT)
    crd_k, ra, rb = _rows_then_intersect(b, "A", "B", "C")
    crd_j, ref_jb = b.scan("B", 1, rb)
    g.indices["j"] = [crd_j]
    crd_j_acc, crd_j_rep = b.bcast(crd_j, 2, StreamKind.CRD)
    va = b.load("A", b.repeat(ra, crd_j_rep))
    prod = b.alu(AluOp.MUL, va, b.load("B", ref_jb))
    acc = b.node(NodeKind.SPACC1, "spacc", {"outer": crd_k, "inner": crd_j_acc, "val": prod}, dim=m)
    b.write("C", 1, acc["crd"])
    b.write_vals("C", acc["val"])
    size_fifos(g)
    return g


def elementwise(op: AluOp, n: int = 64, m: int = 64) -> Graph:
    """``C = A op B`` over two CSR matrices: union for add/sub, intersection for mul."""
    joiner = NodeKind.INTERSECT if op is AluOp.MUL else NodeKind.UNION
    b = GraphBuilder(f"elementwise_{op.value}")
    g = b.g
    g.tensor("A", (n, m), CSR)
    g.tensor("B", (n, m), CSR)
    g.tensor("C", (n, m), CSR, Role.OUTPUT)
    ia = b.scan("A", 0, b.root("A"))
    ib = b.scan("B", 0, b.root("B"))
    crd_i, (ra, rb) = b.join(joiner, [ia, ib])
    b.write("C", 0, crd_i)
    crd_j, (rja, rjb) = b.join(joiner, [b.scan("A", 1, ra), b.scan("B", 1, rb)])
    g.indices = {"i": [crd_i], "j": [crd_j]}
    b.write("C", 1, crd_j)
    b.write_vals("C", b.alu(op, b.load("A", rja), b.load("B", rjb)))
    size_fifos(g)
    return g


def _row_pairs(b: GraphBuilder, a: str, x: str, out: str):
    """Every pair of rows: rows i of ``a`` (its level 0) and, under each, rows j of ``x`` (its
    level 0), written as the two levels of ``out``.  Returns ``(crd_i, crd_j, ref_j, ref_ij)``,
    ``ref_ij`` being row i's reference repeated for each j (to scan ``a``'s level 1)."""
    crd_i, ref_i = b.scan(a, 0, b.root(a))
    crd_i_w, crd_i_r = b.bcast(crd_i, 2, StreamKind.CRD)
    b.write(out, 0, crd_i_w)
    crd_j, ref_j = b.scan(x, 0, b.repeat(b.root(x), crd_i_r))
    crd_j_w, crd_j_r = b.bcast(crd_j, 2, StreamKind.CRD)
    b.write(out, 1, crd_j_w)
    return crd_i, crd_j, ref_j, b.repeat(ref_i, crd_j_r)


def inner_product(n: int = 64, m: int = 64, k: int = 64) -> Graph:
    """``C (n×m, dense) = A (n×k, CSR) · B (m×k, CSR)ᵀ``, order i→j→k: every (i, j) pair
    intersects two compressed rows (the case coordinate skipping speeds up,
    :func:`fuseflow.compiler.passes.skip.enable_skipping`)."""
    b = GraphBuilder("spmspm_inner")
    g = b.g
    g.tensor("A", (n, k), CSR)
    g.tensor("B", (m, k), CSR)
    g.tensor("C", (n, m), DENSE2, Role.OUTPUT)
    crd_i, crd_j, ref_j, ref_ij = _row_pairs(b, "A", "B", "C")
    crd_ka, ref_ka = b.scan("A", 1, ref_ij)
    crd_kb, ref_kb = b.scan("B", 1, ref_j)
    crd_k, (rka, rkb) = b.join(NodeKind.INTERSECT, [(crd_ka, ref_ka), (crd_kb, ref_kb)])
    g.discard(crd_k)
    g.indices = {"i": [crd_i], "j": [crd_j], "k": [crd_k]}
    prod = b.alu(AluOp.MUL, b.load("A", rka), b.load("B", rkb))
    red = b.node(NodeKind.REDUCE, "reduce", {"val": prod}, op=ReduceOp.ADD.value)
    b.write_vals("C", red["val"])
    size_fifos(g)
    return g


def bspmm_formats(block: int, lanes: int | None = None) -> dict[str, BlockFormat]:
    """The block formats of :func:`bspmm`: ``A`` row-blocked (row dense, block column
    compressed, ``block`` columns dense), ``X`` with its rows in blocks of ``block`` under its
    columns (column dense, block dense, block rows dense: a column's block is contiguous), both
    with innermost levels of ``lanes`` entries (default ``block``)."""
    lanes = lanes or block
    if block < 1 or block & (block - 1):
        raise ValueError(f"bspmm: block size {block} is not a power of two")
    if lanes < 1 or lanes & (lanes - 1) or lanes > block:
        raise ValueError(f"bspmm: lanes={lanes} must be a power of two that divides the block size {block}")
    split = lanes if lanes < block else 0
    return {"A": row_blocked(block, split),
            "X": BlockFormat(TensorFormat(("dense", "dense"), (1, 0)), (block, 1), split)}


def bspmm(n: int = 64, k: int = 64, m: int = 64, block: int = 4, lanes: int | None = None) -> Graph:
    """Block-sparse x dense SpMM ``Y_ij = A_ik X_kj``: ``A`` (n x k) row-blocked with blocks of
    ``block`` columns, ``X`` (k x m) dense in blocks of ``block`` rows, ``Y`` (n x m) dense.

    Order i -> j -> K (block column) -> kk: the rows of ``A`` are scanned (dense), the columns
    of ``X`` (dense) under each row, the stored blocks ``K`` of row i under each (i, j) and
    ``X``'s block ``K`` of column j located at them; each block is one vector of ``lanes``
    values (``block`` or a divisor: then a dense level of ``block / lanes`` vectors under each
    block), multiplied lanewise, its lanes summed by a ``lane_reduce`` and the products of
    row i's blocks summed by a ``reduce``.  ``block=1``: the same loop over a CSR ``A`` with
    scalar values.  A ``k`` that is not a multiple of ``block`` is padded to whole blocks (zero
    columns of ``A`` and zero rows of ``X``, declared in the tensors' block records)."""
    fmts = bspmm_formats(block, lanes)
    lanes = fmts["A"].vector_lanes
    b = GraphBuilder(f"bspmm_b{block}" + (f"_l{lanes}" if lanes < block else ""))
    g = b.g
    for name, shape in (("A", (n, k)), ("X", (k, m))):
        f = fmts[name]
        g.tensor(name, f.stored_shape(shape), f.stored(), block=Blocking(f, shape))
    g.tensor("Y", (n, m), DENSE2, Role.OUTPUT)
    vec = {"lanes": lanes} if lanes > 1 else {}
    crd_i, crd_j, ref_j, ref_ij = _row_pairs(b, "A", "X", "Y")
    crd_kb, ref_a = b.scan("A", 1, ref_ij)
    g.indices = {"i": [crd_i], "j": [crd_j], "K": [crd_kb]}
    ref_x = b.node(NodeKind.LOCATE, "locate_X1", {"outer": ref_j, "inner": crd_kb}, dim=-(-k // block))["ref"]
    split = lanes < block
    if split:  # block / lanes vectors under each block: one more dense level of A, located in X
        crd_kh, ref_a = b.scan("A", 2, ref_a)
        ref_x = b.node(NodeKind.LOCATE, "locate_X2", {"outer": ref_x, "inner": crd_kh}, dim=block // lanes)["ref"]
    va = b.node(NodeKind.ARRAY_LOAD, "vals_A", {"ref": ref_a}, tensor="A", **vec)["val"]
    vx = b.node(NodeKind.ARRAY_LOAD, "vals_X", {"ref": ref_x}, tensor="X", **vec)["val"]
    prod = b.node(NodeKind.ALU, "mul", {"a": va, "b": vx}, op=AluOp.MUL.value, **vec)["val"]
    if split:  # the vectors of a block summed lane by lane
        prod = b.node(NodeKind.REDUCE, "reduce_block", {"val": prod}, op=ReduceOp.ADD.value, **vec)["val"]
    if lanes > 1:
        prod = b.node(NodeKind.LANE_REDUCE, "lane_reduce", {"val": prod}, op=ReduceOp.ADD.value, lanes=lanes)["val"]
    red = b.node(NodeKind.REDUCE, "reduce", {"val": prod}, op=ReduceOp.ADD.value)
    b.write_vals("Y", red["val"])
    size_fifos(g)
    return g


KERNELS: dict[str, Callable[..., Graph]] = {
    "spmv": lambda n=64: spmv(n, n),
    "spmm_dense": lambda n=64: spmm(n, n, n, DENSE2),
    "spmm_csr": lambda n=64: spmm(n, n, n, CSR),
    "add": lambda n=64: elementwise(AluOp.ADD, n, n),
    "mul": lambda n=64: elementwise(AluOp.MUL, n, n),
    "spmspm_inner": lambda n=64: inner_product(n, n, n),
    "bspmm": lambda n=64, block=4, lanes=None: bspmm(n, n, n, block, lanes),
}

# kernel -> the options its factory takes besides the size (the CLI's --block / --lanes)
KERNEL_OPTIONS: dict[str, tuple[str, ...]] = {"bspmm": ("block", "lanes")}


_REFERENCE: dict[str, Callable[[dict], np.ndarray]] = {
    "spmv": lambda d: d["B"] @ d["c"],
    "spmm_dense": lambda d: d["A"] @ d["B"],
    "spmm_csr": lambda d: d["A"] @ d["B"],
    "add": lambda d: d["A"] + d["B"],
    "mul": lambda d: d["A"] * d["B"],
    "spmspm_inner": lambda d: d["A"] @ d["B"].T,
    "bspmm": lambda d: d["A"] @ d["X"],
}


RANDOM_LIMIT = 1 << 26  # positions of one random operand (drawn dense: 0.5 GiB of int64)


def check_drawable(graph: Graph) -> None:
    """ValueError naming the first input tensor of ``graph`` too large to draw random operands
    for (each is drawn whole, then thinned), before anything is allocated."""
    for name in graph.input_tensors():
        shape = graph.tensors[name].operand_shape
        entries = math.prod(shape)
        if entries > RANDOM_LIMIT:
            raise ValueError(f"graph {graph.name!r}: tensor {name!r} has shape {'x'.join(map(str, shape))} "
                             f"({entries:,} positions); random operands are drawn for at most "
                             f"{RANDOM_LIMIT:,} positions: give its data (--data FILE.npz)")


def random_operands(graph: Graph, seed: int = 0, density: float = 0.1) -> dict[str, np.ndarray]:
    """Seeded random integer operands (-8..8) for every input tensor of ``graph``; tensors with
    a compressed level keep about ``density`` of their entries.  ValueError, before allocating
    anything, for a tensor of more than :data:`RANDOM_LIMIT` positions."""
    check_drawable(graph)
    rng = np.random.default_rng(seed)
    ops: dict[str, np.ndarray] = {}
    for name in graph.input_tensors():
        spec = graph.tensors[name]
        shape = spec.operand_shape
        a = rng.integers(-8, 9, size=shape)
        if any(f is not Format.DENSE for f in spec.fmt.levels):
            if spec.block is not None:  # blocks kept with probability density, then 10 % zeros inside
                grid = spec.block.fmt.grid(shape)
                keep = rng.random(grid) <= density
                for d, bs in enumerate(spec.block.fmt.block):
                    keep = np.repeat(keep, bs, axis=d)
                a[~keep[tuple(slice(0, s) for s in shape)]] = 0
                a[rng.random(shape) < 0.1] = 0
            else:
                a[rng.random(shape) > density] = 0
        ops[name] = a
    return ops


def sparse_inputs(graph: Graph) -> list[str]:
    """The input tensors of ``graph`` with a stored (not dense) level."""
    return [t for t in graph.input_tensors()
            if any(f is not Format.DENSE for f in graph.tensors[t].fmt.levels)]


def integer_matrix(matrix, what: str) -> sp.csr_array:
    """``matrix`` (scipy sparse) as an int64 CSR array; non-integer values are an error naming
    one (the integer datapath's; ``--numerics q16.16`` takes real values)."""
    m = sp.csr_array(matrix)
    m.sum_duplicates()
    bad = np.flatnonzero(np.asarray(m.data) != np.round(np.asarray(m.data, dtype=np.float64)))
    if bad.size:
        r = int(np.searchsorted(m.indptr, bad[0], side="right") - 1)
        raise ValueError(f"{what}: the datapath is integer, but entry ({r}, {int(m.indices[bad[0]])}) is "
                         f"{float(m.data[bad[0]])}; give --numerics q16.16 (fixed point) for real values, "
                         f"or a pattern or integer matrix")
    return sp.csr_array((np.asarray(m.data).astype(np.int64), m.indices, m.indptr), shape=m.shape)


def kernel_graph(kernel: str, n: int, **options) -> Graph:
    """The built-in ``kernel``'s graph of size ``n`` with its options (:data:`KERNEL_OPTIONS`;
    ``None`` values leave an option at its default, an option the kernel does not take is an
    error naming it)."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; built-in kernels: {sorted(KERNELS)}")
    given = {k: v for k, v in options.items() if v is not None}
    extra = sorted(set(given) - set(KERNEL_OPTIONS.get(kernel, ())))
    if extra:
        raise ValueError(f"kernel {kernel!r} takes no option {', '.join(extra)} (its options: "
                         f"{', '.join(KERNEL_OPTIONS.get(kernel, ())) or 'none'})")
    return KERNELS[kernel](n, **given)


def matrix_use(kernel: str, shape: tuple[int, int], given: str | None = None) -> str:
    """What built-in ``kernel`` computes on a user's matrix M of ``shape`` (its sparse operands;
    c and X are seeded random unless ``given`` names the operand the user gave)."""
    if given is not None:
        return {"spmv": "y = M·c", "spmm_dense": "C = M·X", "spmm_csr": "C = M·B", "add": "C = M + B",
                "mul": "C = M ∘ B", "spmspm_inner": "C = M·Bᵀ", "bspmm": "Y = M·X"}[kernel] + f" ({given} given)"
    square = shape[0] == shape[1]
    return {"spmv": "y = M·c", "spmm_dense": "C = M·X", "spmm_csr": "C = M·M" if square else "C = M·Mᵀ",
            "add": "C = M + M", "mul": "C = M ∘ M", "spmspm_inner": "C = M·Mᵀ", "bspmm": "Y = M·X"}[kernel]


# the operand of each kernel a user may give next to the matrix (``given``): its name, what
# it is, and the shape it must have for an m×n matrix (None: a free dimension)
GIVEN_OPERANDS = {"spmv": ("c", "the dense vector", lambda r, c: (c,)),
                  "spmm_dense": ("B", "the dense matrix X", lambda r, c: (c, None)),
                  "spmm_csr": ("B", "the sparse right operand", lambda r, c: (c, None)),
                  "add": ("B", "the second operand", lambda r, c: (r, c)),
                  "mul": ("B", "the second operand", lambda r, c: (r, c)),
                  "spmspm_inner": ("B", "the right operand B of A·Bᵀ", lambda r, c: (None, c)),
                  "bspmm": ("X", "the dense matrix X", lambda r, c: (c, None))}


def _given(kernel: str, m, given: dict, what: str):
    """The user's second operand of ``kernel`` (None if not given), its shape checked."""
    if not given:
        return None
    name, desc, want = GIVEN_OPERANDS[kernel]
    unknown = sorted(set(given) - {name})
    if unknown:
        raise ValueError(f"operand {', '.join(unknown)}: kernel {kernel} takes {name} ({desc}) next to the "
                         "matrix")
    v = given[name]
    if kernel in ("spmv", "spmm_dense", "bspmm") and sp.issparse(v):  # a dense operand from a sparse file
        v = v.toarray()
    if kernel == "spmv" and np.ndim(v) == 2 and 1 in np.shape(v):  # a column or row vector
        v = np.asarray(v).ravel()
    shape = tuple(v.shape)
    expect = want(*m.shape)
    if len(shape) != len(expect) or any(e is not None and e != s for e, s in zip(expect, shape)):
        text = "×".join("any" if e is None else str(e) for e in expect)
        raise ValueError(f"operand {name} ({desc}) has shape {'×'.join(map(str, shape))}; kernel {kernel} on "
                         f"the {m.shape[0]}×{m.shape[1]} matrix of {what} needs {text}")
    return v


def _matrix_graph(kernel: str, m, x: int, options: dict, given=None) -> tuple[Graph, dict[str, object]]:
    """``kernel``'s graph for matrix ``m`` and its operands (see :func:`matrix_use`); ``given``:
    the user's second operand (:data:`GIVEN_OPERANDS`), else generated or derived from ``m``."""
    rows, cols = m.shape
    if kernel == "spmv":
        return spmv(rows, cols), {"B": m} | ({"c": given} if given is not None else {})
    if kernel == "spmm_dense":
        x = given.shape[1] if given is not None else x
        return spmm(rows, cols, x, DENSE2), {"A": m} | ({"B": given} if given is not None else {})
    if kernel == "spmm_csr":
        b = sp.csr_array(given) if given is not None else m if rows == cols else sp.csr_array(m.T)
        return spmm(rows, cols, b.shape[1], CSR), {"A": m, "B": b}
    if kernel in ("add", "mul"):
        b = sp.csr_array(given) if given is not None else m
        return elementwise(AluOp.ADD if kernel == "add" else AluOp.MUL, rows, cols), {"A": m, "B": b}
    if kernel == "spmspm_inner":
        b = sp.csr_array(given) if given is not None else m
        return inner_product(rows, b.shape[0], cols), {"A": m, "B": b}
    if kernel == "bspmm":
        kernel_graph(kernel, 1, **options)  # the options' own checks
        opts = {k: v for k, v in options.items() if v is not None}
        x = given.shape[1] if given is not None else x
        return (bspmm(rows, cols, x, opts.get("block", 4), opts.get("lanes")),
                {"A": m} | ({"X": given} if given is not None else {}))
    raise ValueError(f"unknown kernel {kernel!r}; built-in kernels: {sorted(KERNELS)}")


def example_from_matrix(kernel: str, matrix, seed: int = 0, what: str = "matrix", *,
                        numerics: Numerics | str = INT32, x_cols: int | None = None,
                        given: dict | None = None, **options):
    """A built-in kernel on a user's matrix (``scipy.sparse``, any shape the kernel's algebra
    allows: :func:`matrix_use`): dense operands are seeded random integers (``x_cols`` columns
    for a generated dense matrix, default the matrix's column count), the reference is
    computed by scipy on the real values.  Integer ``numerics`` need an integer matrix; fixed
    point quantises real values (out of range: an error naming the tensor), float keeps them.
    ``given``: the kernel's second operand by name instead of a generated or derived one
    (:data:`GIVEN_OPERANDS`: SpMM's X, SpMSpM's B, SpMV's c, ...; scipy sparse or a dense array).
    Returns ``(graph, data, operands, expected)`` like :func:`example`: ``data`` the operands
    in the graph's formats and the datapath's numbers, ``operands`` the real values."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; built-in kernels: {sorted(KERNELS)}")
    num = Numerics.parse(numerics)
    kind = np.asarray(matrix.data if sp.issparse(matrix) else matrix).dtype.kind
    if kind not in "biuf":
        raise ValueError(f"{what}: the matrix holds {'complex' if kind == 'c' else 'non-numeric'} values; "
                         "the datapath takes real numbers")
    m = sp.csr_array(matrix, dtype=np.float64)
    m.sum_duplicates()
    if num.mode is Mode.INT:
        m = integer_matrix(m, what)
    if x_cols is not None and x_cols < 1:
        raise ValueError(f"{what}: a dense operand needs at least one column, not {x_cols}")
    other = _given(kernel, m, given or {}, what)
    if other is not None:
        other = _real_operand(other, num, f"operand {GIVEN_OPERANDS[kernel][0]}")
    g, ops = _matrix_graph(kernel, m, x_cols or m.shape[1], options, other)
    rng = np.random.default_rng(seed)
    for t in g.input_tensors():
        if t not in ops:
            ops[t] = rng.integers(-8, 9, size=g.tensors[t].operand_shape)
    data = {t: quantized_input(t, v, g.tensors[t].operand_shape, num, g.tensors[t].fmt)
            if g.tensors[t].block is None else g.tensors[t].data(_quantized_dense(t, v, num))
            for t, v in ops.items()}
    expected = _REFERENCE[kernel](ops)
    return g, data, ops, expected.toarray() if sp.issparse(expected) else np.asarray(expected)


def _real_operand(v, num: Numerics, what: str):
    """A given operand as float64 (scipy sparse stays sparse); complex or non-numeric values,
    and non-integers for the integer datapath, are errors naming it."""
    kind = np.asarray(v.data if sp.issparse(v) else v).dtype.kind
    if kind not in "biuf":
        raise ValueError(f"{what}: {'complex' if kind == 'c' else 'non-numeric'} values; the datapath "
                         "takes real numbers")
    if sp.issparse(v):
        v = integer_matrix(v, what) if num.mode is Mode.INT else sp.csr_array(v, dtype=np.float64)
        return v
    a = np.asarray(v, dtype=np.float64)
    if num.mode is Mode.INT:
        bad = np.argwhere(a != np.round(a))
        if bad.size:
            at = tuple(int(i) for i in bad[0])
            raise ValueError(f"{what}: the datapath is integer, but entry {at} is {a[at]}; give --numerics "
                             "q16.16 (fixed point) for real values")
        return a.astype(np.int64)
    return a


def _quantized_dense(name: str, v, num: Numerics) -> np.ndarray:
    """A blocked tensor's operand as a dense array of the datapath's numbers."""
    a = v.toarray() if sp.issparse(v) else np.asarray(v, dtype=np.float64)
    return num.quantize(range_checked(name, a, num, False, None)) if num.mode is not Mode.INT else a.astype(np.int64)


def kernel_program(kernel: str, graph: Graph) -> Program:
    """What built-in ``kernel``'s ``graph`` computes, as an Einsum program over its operands'
    shapes: the reference of a fixed-point or float run, and the error bound its numerics give
    (:func:`check_kernel`)."""
    p = Program(graph.name)
    t = {n: p.tensor(n, graph.tensors[n].operand_shape, "dense") for n in graph.input_tensors()}
    [out] = graph.output_tensors()
    exprs = {
        "spmv": lambda: einsum("ij,j->i", t.get("B"), t.get("c")),
        "spmm_dense": lambda: einsum("ik,kj->ij", t.get("A"), t.get("B")),
        "spmm_csr": lambda: einsum("ik,kj->ij", t.get("A"), t.get("B")),
        "add": lambda: t["A"] + t["B"],
        "mul": lambda: t["A"] * t["B"],
        "spmspm_inner": lambda: einsum("ik,jk->ij", t.get("A"), t.get("B")),
        "bspmm": lambda: einsum("ik,kj->ij", t.get("A"), t.get("X")),
    }
    p.output(p.let(out, exprs[kernel]()))
    return p


def check_kernel(kernel: str, graph: Graph, operands: dict, got: np.ndarray, numerics: Numerics | str) -> Check:
    """A run's dense result ``got`` (dequantised) of built-in ``kernel`` against scipy's on the
    real ``operands``, within the bound ``numerics`` derives for it (exact for integers)."""
    dense = {t: v.toarray() if sp.issparse(v) else np.asarray(v, dtype=np.float64) for t, v in operands.items()}
    [out] = graph.output_tensors()
    [check] = check_program(kernel_program(kernel, graph), dense, {out: np.asarray(got, dtype=np.float64)},
                            numerics)
    return check


def example(kernel: str, n: int = 64, seed: int = 0, density: float = 0.1, *,
            numerics: Numerics | str = INT32, **options):
    """A built-in kernel graph with seeded random operands and the numpy result.

    Returns ``(graph, data, operands, expected)``: ``data`` maps tensor names to
    :class:`TensorData` in the graph's formats, ``operands`` to the dense arrays (of a blocked
    tensor: its original shape).  ``options``: the kernel's (:data:`KERNEL_OPTIONS`, e.g.
    ``block`` and ``lanes`` of ``bspmm``; a blocked kernel's ``density`` is that of its blocks).
    ``numerics``: the datapath's numbers of ``data`` (fixed point: the integers quantised).
    """
    g = kernel_graph(kernel, n, **options)
    ops = random_operands(g, seed, density)
    num = Numerics.parse(numerics)
    if num.mode is Mode.INT:
        data = {t: g.tensors[t].data(v) for t, v in ops.items()}
    else:  # the integer operands as fixed-point or float values
        data = {t: g.tensors[t].data(_quantized_dense(t, v, num)) for t, v in ops.items()}
    return g, data, ops, _REFERENCE[kernel](ops)
