"""The program suite used by the compiler tests, benchmarks and examples.

Each builder returns a :class:`Program`; :data:`SUITE` maps a name to (builder, input shapes
and densities).  Sizes are small so the whole suite simulates in seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from example_programs import load_example

from fuseflow.compiler import (
    Program,
    catalog,
    einsum,
    maximum,
    minimum,
    reference,
    relu,
    run_program,
)
from fuseflow.compiler.semantics import denominator_inputs
from fuseflow.ir.tensor import Format, TensorData
from sw_sim import run_graph


@dataclass(frozen=True)
class Case:
    build: Callable[[], Program]
    density: dict[str, float]  # input -> fraction of nonzeros (1.0: dense data)


Decl = tuple  # (name, shape, format) or (name, shape, format, mode order)


def statements(name: str, decls: list[Decl], outs: dict[str, Callable[..., object]],
               lets: dict[str, dict] | None = None) -> Program:
    """A program with inputs ``decls`` (in order) and, per entry of ``outs`` (in order), one
    statement ``out = expr(*inputs)`` with the let options ``lets[out]``; all are outputs."""
    p = Program(name)
    handles = [p.tensor(d[0], d[1], d[2], mode_order=d[3] if len(d) > 3 else None) for d in decls]
    p.output(*[p.let(out, expr(*handles), **(lets or {}).get(out, {})) for out, expr in outs.items()])
    return p


def one_statement(name: str, decls: list[Decl], out: str, expr: Callable[..., object],
                  **let_args) -> Program:
    """A program with inputs ``decls`` (in order) and one statement ``out = expr(*inputs)``,
    its output."""
    return statements(name, decls, {out: expr}, {out: let_args})


def one(name: str, decls: list[Decl], out: str, expr: Callable[..., object],
        **let_args) -> Callable[[], Program]:
    """The builder of ``one_statement(name, decls, out, expr, **let_args)``."""
    return partial(one_statement, name, decls, out, expr, **let_args)


def several(name: str, decls: list[Decl], outs: dict[str, Callable[..., object]],
            lets: dict[str, dict] | None = None) -> Callable[[], Program]:
    """The builder of ``statements(name, decls, outs, lets)``."""
    return partial(statements, name, decls, outs, lets)


def matvec(A, x):
    return einsum("ij,j->i", A, x)


def matmul(A, B):
    return einsum("ik,kj->ij", A, B)


def ttv_expr(B, c):
    return einsum("ijk,k->ij", B, c)


def sddmm() -> Program:
    return load_example("sddmm").program(rows=6, cols=5, inner=4)


def nested_matmul() -> Program:
    return catalog.nested_matmul(6, 5, 7, 4)


def nested_matmul_cm() -> Program:
    """Nested matmul with C column-major: several valid fused orders."""
    p = catalog.nested_matmul(6, 5, 7, 4, c_format="dense", c_mode_order=(1, 0))
    p.name = "nested_matmul_cm"
    return p


def gcn_layer() -> Program:
    return catalog.gcn_layer(8, 5, 4)


def gcn_two_layer() -> Program:
    """Two GCN layers: fully fused, layer 1 is recomputed per row of layer 2 (nested)."""
    return catalog.gcn_two_layer(8, 5, 4, 3)


def graphsage_nbor() -> Program:
    return catalog.graphsage(8, 5, 4, ordered=False, name="graphsage_nbor")


def two_outputs() -> Program:
    """T = A·X feeds two outputs computed in one region (T is recomputed per output)."""
    p = Program("two_outputs")
    A = p.tensor("A", (6, 6), "csr")
    X = p.tensor("X", (6, 4), "dense")
    W1 = p.tensor("W1", (4, 3), "dense")
    W2 = p.tensor("W2", (4, 5), "dense")
    T = p.let("T", einsum("ik,kj->ij", A, X))
    Y1 = p.let("Y1", einsum("ij,jl->il", T, W1))
    Y2 = p.let("Y2", einsum("ij,jl->il", T, W2))
    p.region(T, Y1, Y2)
    p.output(Y1, Y2)
    return p


def elementwise_chain() -> Program:
    p = Program("elementwise_chain")
    A = p.tensor("A", (5, 6), "dcsr")
    B = p.tensor("B", (5, 6), "dcsr")
    C = p.tensor("C", (5, 6), "csr")
    T = p.let("T", A + B)
    p.output(p.let("D", T * C))
    return p


def coo_chain() -> Program:
    """Two statements over a COO adjacency: T = A·X, Y = relu(T·W) (one region)."""
    p = Program("coo_chain")
    A = p.tensor("A", (6, 6), "coo")
    X = p.tensor("X", (6, 4), "dense")
    W = p.tensor("W", (4, 3), "dense")
    T = p.let("T", einsum("ik,kj->ij", A, X))
    Y = p.let("Y", relu(einsum("ij,jl->il", T, W)))
    p.region(T, Y)
    p.output(Y)
    return p


SUITE: dict[str, Case] = {
    "spmv": Case(one("spmv", [("A", (7, 6), "csr"), ("x", (6,), "dense")], "y", matvec),
                 {"A": 0.3, "x": 1.0}),
    "spmv_csc": Case(one("spmv_csc", [("A", (6, 7), "csc"), ("x", (7,), "compressed")], "y", matvec),
                     {"A": 0.3, "x": 0.5}),
    "spmm_dense": Case(one("spmm_dense", [("A", (7, 6), "csr"), ("X", (6, 5), "dense")], "T", matmul),
                       {"A": 0.3, "X": 1.0}),
    "spmm_csr": Case(one("spmm_csr", [("A", (7, 6), "csr"), ("B", (6, 5), "csr")], "C", matmul),
                     {"A": 0.3, "B": 0.3}),
    # inner-product SpMM: B stored column-major, so both i->j->k and j->i->k are valid
    "spmm_inner": Case(one("spmm_inner", [("A", (6, 7), "csr"), ("B", (7, 5), "dense", (1, 0))], "C",
                           matmul), {"A": 0.3, "B": 0.6}),
    "sddmm": Case(sddmm, {"S": 0.3, "C": 1.0, "D": 1.0}),
    "add": Case(one("add", [("A", (6, 7), "dcsr"), ("B", (6, 7), "csr")], "C", lambda A, B: A + B),
                {"A": 0.3, "B": 0.3}),
    "mul": Case(one("mul", [("A", (6, 7), "dcsr"), ("B", (6, 7), "dcsr")], "C", lambda A, B: A * B),
                {"A": 0.5, "B": 0.5}),
    "sub_scaled": Case(one("sub_scaled", [("A", (5, 6), "csr"), ("B", (5, 6), "csr")], "C",
                           lambda A, B: 3 * A - B), {"A": 0.4, "B": 0.4}),
    "nested_matmul": Case(nested_matmul, {"A": 0.3, "B": 0.3, "C": 0.4}),
    "nested_matmul_cm": Case(nested_matmul_cm, {"A": 0.3, "B": 0.3, "C": 1.0}),
    "gcn_layer": Case(gcn_layer, {"A": 0.3, "X": 1.0, "W": 1.0, "b": 1.0}),
    "gcn_two_layer": Case(gcn_two_layer, {"A": 0.3, "X": 0.5, "W1": 1.0, "b1": 1.0, "W2": 1.0,
                                          "b2": 1.0}),
    "graphsage_nbor": Case(graphsage_nbor, {"A": 0.3, "X": 0.5, "Omega": 1.0}),
    # A + A^T: the two views of A conflict, one is read from a permuted copy
    "permuted_view": Case(one("permuted_view", [("A", (6, 6), "csr")], "S",
                              lambda A: A + einsum("ji->ij", A)), {"A": 0.3}),
    "two_outputs": Case(two_outputs, {"A": 0.3, "X": 1.0, "W1": 1.0, "W2": 1.0}),
    "elementwise_chain": Case(elementwise_chain, {"A": 0.4, "B": 0.4, "C": 0.6}),
    # Y = A·X + X: an addition after a reduction (split into two graphs even when fused)
    "residual": Case(one("residual", [("A", (6, 6), "csr"), ("X", (6, 4), "dense")], "Y",
                         lambda A, X: matmul(A, X) + X), {"A": 0.3, "X": 1.0}),
    # tensor-times-vector Y_ij = B_ijk c_k, B a 3-D tensor (dense, compressed, compressed)
    "ttv": Case(one("ttv", [("B", (4, 5, 6), "dcc"), ("c", (6,), "dense")], "Y", ttv_expr),
                {"B": 0.3, "c": 1.0}),
    # the same with B stored in mode order (i, k, j): the reduction sits above j (SPACC1)
    "ttv_permuted": Case(one("ttv_permuted", [("B", (4, 5, 6), "dcc", (0, 2, 1)), ("c", (6,), "compressed")],
                             "Y", ttv_expr), {"B": 0.3, "c": 0.6}),
    # outer-loop-over-columns SpMM writing a declared CSC result
    "spmm_csc_out": Case(one("spmm_csc_out", [("A", (6, 7), "csr"), ("B", (7, 5), "dense", (1, 0))], "C",
                             matmul, fmt="csc"), {"A": 0.3, "B": 0.6}),
    # 3-D elementwise product, all levels compressed: intersections leave empty fibers at every
    # level, which the output must not store (canonical compressed levels)
    "mul3": Case(one("mul3", [("A", (4, 5, 6), "ccc"), ("B", (4, 5, 6), "ccc")], "C", lambda A, B: A * B),
                 {"A": 0.4, "B": 0.4}),
    # the same under a dense top level: empty j fibers are kept (one per i), empty k fibers are not
    "mul3_dense_top": Case(one("mul3_dense_top", [("A", (4, 5, 6), "dcc"), ("B", (4, 5, 6), "dcc")], "C",
                               lambda A, B: A * B), {"A": 0.4, "B": 0.4}),
    # the same access in several terms of a sum (one view per term) and twice in a product
    "repeated_access": Case(one("repeated_access", [("A", (6, 7), "dcsr"), ("B", (6, 7), "csr")], "C",
                                lambda A, B: A * (A + B) + B * A * A + B), {"A": 0.4, "B": 0.4}),
    # outer-product SpMM (A CSC, B CSR): k is the outermost index in every valid order (k->i->j
    # and k->j->i), so the reduction over k accumulates 2-D fibres (SPACC2)
    "spmm_outer": Case(one("spmm_outer", [("A", (6, 7), "csc"), ("B", (7, 5), "csr")], "C", matmul),
                       {"A": 0.3, "B": 0.3}),
    # the same with the statement order k->j->i: the result is written column-major
    "spmm_outer_kji": Case(one("spmm_outer_kji", [("A", (6, 7), "dcsc"), ("B", (7, 5), "dcsr")], "C",
                               matmul, order="kji"), {"A": 0.3, "B": 0.3}),
    # C_ij = Σ_k T_kij with T stored k-first: a plain sparse accumulation of matrices
    "sum_slices": Case(one("sum_slices", [("T", (4, 5, 6), "ccc")], "C", lambda T: einsum("kij->ij", T)),
                       {"T": 0.3}),
    # decompression: a sparse matrix copied into a dense one (Y's dense column level is iterated
    # fully: densified iteration), and a product of two CSR matrices written dense
    "to_dense": Case(several("to_dense", [("A", (5, 6), "dcsr"), ("B", (5, 6), "csr")],
                             {"Y": lambda A, B: A, "Z": lambda A, B: A * B},
                             {"Y": {"fmt": "dense"}, "Z": {"fmt": "dense"}}), {"A": 0.3, "B": 0.5}),
    # compression: a dense matrix written as CSR and DCSR (zeros are stored explicitly)
    "to_sparse": Case(several("to_sparse", [("D", (5, 6), "dense")], {"Y": lambda D: 2 * D, "Z": lambda D: -D},
                              {"Y": {"fmt": "csr"}, "Z": {"fmt": "dcsr"}}), {"D": 1.0}),
    # functions with f(0) != 0 of sparse operands: every coordinate is visited
    "shift_sparse": Case(several("shift_sparse", [("A", (5, 6), "csr"), ("x", (6,), "compressed")],
                                 {"Y": lambda A, x: (A + 2) * 3, "z": lambda A, x: 1 - x}), {"A": 0.3, "x": 0.4}),
    # division by a dense tensor, elementwise and after a reduction, with a broadcast
    "divide": Case(several("divide", [("A", (6, 5), "csr"), ("X", (5, 4), "dense"), ("D", (6, 4), "dense"),
                                      ("d", (4,), "dense")],
                           {"Y": lambda A, X, D, d: matmul(A, X) / D, "Z": lambda A, X, D, d: matmul(A, X) / d}),
                   {"A": 0.4, "X": 1.0, "D": 1.0, "d": 1.0}),
    # elementwise maximum / minimum (implicit zeros take part: a union of the patterns)
    "max_min": Case(several("max_min", [("A", (5, 6), "dcsr"), ("B", (5, 6), "csr")],
                            {"Y": maximum, "Z": lambda A, B: minimum(A, 2 * B)}), {"A": 0.4, "B": 0.4}),
    # row maxima, column minima and a max-times product, over every coordinate
    "max_reductions": Case(several("max_reductions", [("A", (5, 6), "csr"), ("B", (6, 4), "dcsr")],
                                   {"r": lambda A, B: einsum("ij->i", A, reduce="max"),
                                    "c": lambda A, B: einsum("ij->j", A, reduce="min"),
                                    "M": lambda A, B: einsum("ik,kj->ij", A, B, reduce="max")}),
                           {"A": 0.4, "B": 0.4}),
    # 0-dimensional outputs: a dot product of two sparse vectors, a total and a maximum
    "scalars": Case(several("scalars", [("x", (7,), "compressed"), ("y", (7,), "compressed"), ("A", (5, 6), "dcsr")],
                            {"dot": lambda x, y, A: einsum("i,i->", x, y), "total": lambda x, y, A: einsum("ij->", A),
                             "top": lambda x, y, A: einsum("ij->", A, reduce="max")}),
                    {"x": 0.5, "y": 0.5, "A": 0.3}),
    # SpMV with A in COO: the non-unique row level is iterated, x is located at the singleton
    # column level, and the accumulator over the duplicate-summing index sums repeated rows
    "coo_spmv": Case(one("coo_spmv", [("A", (7, 6), "coo"), ("x", (6,), "dense")], "y", matvec),
                     {"A": 0.3, "x": 1.0}),
    # SpMM with A in COO times a dense X (order-2 accumulator over the COO index)
    "coo_spmm": Case(one("coo_spmm", [("A", (7, 6), "coo"), ("X", (6, 5), "dense")], "C", matmul),
                     {"A": 0.3, "X": 1.0}),
    # SpMM with a column-major COO A (sorted by column) times a CSR B: rows of B are located at
    # A's non-unique column level, B's columns scanned below A's singleton row level
    "coo_spmm_cm": Case(one("coo_spmm_cm", [("A", (6, 7), "coo", (1, 0)), ("B", (7, 5), "csr")], "C", matmul),
                        {"A": 0.3, "B": 0.4}),
    # elementwise product of a COO and a CSR matrix (B's dense rows located, its columns
    # intersected with A's singleton level) and a row sum of the COO matrix
    "coo_mul": Case(several("coo_mul", [("A", (6, 7), "coo"), ("B", (6, 7), "csr")],
                            {"C": lambda A, B: A * B, "r": lambda A, B: einsum("ij->i", A)}), {"A": 0.5, "B": 0.5}),
    # a COO matrix plus a DCSR one: the COO term is deduplicated in a pipeline (or graph) of its
    # own before the union
    "coo_add": Case(one("coo_add", [("A", (6, 7), "coo"), ("B", (6, 7), "dcsr")], "C", lambda A, B: A + 2 * B),
                    {"A": 0.3, "B": 0.3}),
    # tensor-times-vector with a 3-D COO tensor (one non-unique level, two singletons)
    "coo_ttv": Case(one("coo_ttv", [("B", (4, 5, 6), "coo"), ("c", (6,), "dense")], "Y", ttv_expr),
                    {"B": 0.3, "c": 1.0}),
    "coo_chain": Case(coo_chain, {"A": 0.3, "X": 1.0, "W": 1.0}),
    # a COO vector (one non-unique level): a dot product and a scaled copy
    "coo_vector": Case(several("coo_vector", [("x", (9,), "coo"), ("y", (9,), "dense")],
                               {"dot": lambda x, y: einsum("i,i->", x, y), "z": lambda x, y: 3 * x * y}),
                       {"x": 0.5, "y": 1.0}),
}


def assert_canonical(name: str, t: TensorData) -> None:
    """No explicit empty fiber in a compressed level under a compressed parent (SAM's
    convention: the parent coordinate is dropped instead)."""
    for lvl in range(1, t.fmt.order):
        if t.fmt.levels[lvl - 1] is Format.COMPRESSED and t.fmt.levels[lvl] is Format.COMPRESSED:
            seg = np.asarray(t.seg[lvl])
            empty = np.flatnonzero(np.diff(seg) == 0)
            assert not empty.size, f"{name}: level {lvl} stores empty fibers at positions {empty}"


def check(compiled, data, dense: dict[str, np.ndarray] | None = None) -> None:
    """sw_sim's outputs of ``compiled`` on ``data`` are numpy's (``reference``) on ``dense`` (by
    default ``data``; the dense arrays of operands ``data`` stores otherwise, e.g. COO with
    duplicate entries), element for element and shape for shape, stored canonically."""
    result = run_program(compiled, data, simulate=run_graph)
    expected = reference(compiled.program, data if dense is None else dense)
    assert set(result.outputs) == set(expected)
    for name, want in expected.items():
        assert_canonical(name, result.outputs[name])
        got = result.dense(name)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"output {name}")


def random_inputs(program: Program, density: dict[str, float], seed: int,
                  empty_rows: bool = True) -> dict[str, np.ndarray]:
    """Seeded random integer data; sparse inputs get an empty first row and last column;
    denominators have no zero."""
    rng = np.random.default_rng(seed)
    data = {}
    denominators = denominator_inputs(program)
    for name in program.inputs():
        shape = program.decls[name].shape
        a = rng.integers(-4, 5, shape)
        if name in denominators:
            a[a == 0] = 3
        a[rng.random(shape) >= density.get(name, 1.0)] = 0
        if empty_rows and density.get(name, 1.0) < 1.0 and a.ndim >= 2:
            a[0] = 0
            a[:, -1] = 0
        data[name] = a
    return data
