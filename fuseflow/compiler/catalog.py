"""Parameterised example programs shared by the correlation suite, the tests and the bench."""

from __future__ import annotations

from .program import Program, Tensor, einsum, relu

__all__ = ["gcn_layer", "gcn_relu", "gcn_two_layer", "graphsage", "nested_matmul"]


def nested_matmul(m: int, k: int, n: int, l: int, c_format: str = "csr",
                  c_mode_order: tuple[int, ...] | None = None) -> Program:
    """``D = (A·B)·C`` with A (m×k), B (k×n) CSR and C (n×l) in ``c_format``/``c_mode_order``."""
    p = Program("nested_matmul")
    A = p.tensor("A", (m, k), "csr")
    B = p.tensor("B", (k, n), "csr")
    C = p.tensor("C", (n, l), c_format, mode_order=c_mode_order)
    E = p.let("E", einsum("ik,kj->ij", A, B))
    p.output(p.let("D", einsum("ij,jl->il", E, C)))
    return p


def graphsage(nodes: int, features: int, out: int, ordered: bool = True,
              name: str = "graphsage") -> Program:
    """GraphSAGE's neighbour term ``T^nbor_ij = A_il X_lm Ω_mj`` (A, X CSR, Ω dense), with the
    dataflow orders ``i -> l -> m`` and ``i -> m -> j`` (the paper's appendix) when
    ``ordered``."""
    p = Program(name)
    A = p.tensor("A", (nodes, nodes), "csr")
    X = p.tensor("X", (nodes, features), "csr")
    W = p.tensor("Omega", (features, out), "dense")
    T0 = p.let("T0", einsum("il,lm->im", A, X), order="ilm" if ordered else None)
    p.output(p.let("Tnbor", einsum("im,mj->ij", T0, W), order="imj" if ordered else None))
    return p


def _gcn_inputs(p: Program, nodes: int, features: int, hidden: int) -> tuple[Tensor, ...]:
    """A GCN layer's inputs: adjacency A (CSR), features X, weights W and bias b (dense)."""
    return (p.tensor("A", (nodes, nodes), "csr"), p.tensor("X", (nodes, features), "dense"),
            p.tensor("W", (features, hidden), "dense"), p.tensor("b", (hidden,), "dense"))


def gcn_layer(nodes: int, features: int, hidden: int) -> Program:
    """``Y = A·X·W + b`` with fusion regions {A·X·W} and {+ b} for partial fusion."""
    p = Program("gcn_layer")
    A, X, W, b = _gcn_inputs(p, nodes, features, hidden)
    T1 = p.let("T1", einsum("ik,kj->ij", A, X))
    T2 = p.let("T2", einsum("ij,jl->il", T1, W))
    Y = p.let("Y", T2 + b)
    p.region(T1, T2)
    p.region(Y)
    p.output(Y)
    return p


def gcn_relu(nodes: int, features: int, hidden: int) -> Program:
    """``Y = relu(A·X·W + b)``: one graph with factored iteration."""
    p = Program("gcn_relu")
    A, X, W, b = _gcn_inputs(p, nodes, features, hidden)
    T = p.let("T", einsum("ik,kj->ij", A, X))
    p.output(p.let("Y", relu(einsum("ij,jl->il", T, W) + b)))
    return p


def gcn_two_layer(nodes: int, features: int, hidden: int, classes: int,
                  x_format: str = "csr") -> Program:
    """Two GCN layers as the model front end writes them, ``Y = Â·relu(Â·X·W1ᵀ + b1)·W2ᵀ + b2``
    with the weights stored ``(out, in)`` and read transposed, one fusion region per layer for
    partial fusion.  Full fusion is one graph: layer 1 is nested under layer 2's rows and
    recomputed for each neighbour (nested factored iteration, docs/compiler.md)."""
    p = Program("gcn_two_layer")
    A = p.tensor("A", (nodes, nodes), "csr")
    X = p.tensor("X", (nodes, features), x_format)
    W1 = p.tensor("W1", (hidden, features), "dense", mode_order=(1, 0))
    b1 = p.tensor("b1", (hidden,), "dense")
    W2 = p.tensor("W2", (classes, hidden), "dense", mode_order=(1, 0))
    b2 = p.tensor("b2", (classes,), "dense")
    T1 = p.let("T1", einsum("ik,kj->ij", A, X))
    T2 = p.let("T2", einsum("ak,jk->aj", T1, W1))
    H = p.let("H", relu(T2 + b1))
    T5 = p.let("T5", einsum("ik,kj->ij", A, H))
    T6 = p.let("T6", einsum("ak,jk->aj", T5, W2))
    Y = p.let("Y", T6 + b2)
    p.region(T1, T2, H)
    p.region(T5, T6, Y)
    p.output(Y)
    return p
