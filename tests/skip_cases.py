"""Inner-product SpMSpM graphs and operands for the coordinate-skipping tests.

``C[i,j] = sum_k A[i,k] * B[j,k]`` with A and B both CSR (rows i of A and rows j of B are the
compressed k fibers) and C dense, in loop order i -> j -> k: the k fibers of row i of A and
row j of B meet in one intersect, whose inputs come straight from two compressed-level
scanners (what :func:`fuseflow.skipping.enable_skipping` converts).  Built with the kernels'
:class:`~fuseflow.kernels.GraphBuilder`.
"""

from __future__ import annotations

import numpy as np

from fuseflow.kernels import GraphBuilder
from fuseflow.passes import size_fifos
from fuseflow.samml import AluOp, Graph, NodeKind, ReduceOp, Role, StreamKind
from fuseflow.tensor import CSR, DENSE2, TensorData


def inner_product(n: int, m: int, k: int) -> Graph:
    """``C (n x m, dense) = A (n x k, CSR) . B (m x k, CSR)^T``, order i -> j -> k."""
    b = GraphBuilder("spmspm_inner")
    g = b.g
    g.tensor("A", (n, k), CSR)
    g.tensor("B", (m, k), CSR)
    g.tensor("C", (n, m), DENSE2, Role.OUTPUT)
    crd_i, ref_i = b.scan("A", 0, b.root("A"))
    crd_i_w, crd_i_r = b.bcast(crd_i, 2, StreamKind.CRD)
    b.write("C", 0, crd_i_w)
    crd_j, ref_j = b.scan("B", 0, b.repeat(b.root("B"), crd_i_r))
    crd_j_w, crd_j_r = b.bcast(crd_j, 2, StreamKind.CRD)
    b.write("C", 1, crd_j_w)
    crd_ka, ref_ka = b.scan("A", 1, b.repeat(ref_i, crd_j_r))
    crd_kb, ref_kb = b.scan("B", 1, ref_j)
    crd_k, (rka, rkb) = b.join(NodeKind.INTERSECT, [(crd_ka, ref_ka), (crd_kb, ref_kb)])
    g.discard(crd_k)
    prod = b.alu(AluOp.MUL, b.load("A", rka), b.load("B", rkb))
    red = b.node(NodeKind.REDUCE, "reduce", {"val": prod}, op=ReduceOp.ADD.value)
    b.write_vals("C", red["val"])
    size_fifos(g)
    return g


def _rows(rng: np.random.Generator, lengths, k: int) -> np.ndarray:
    a = np.zeros((len(lengths), k), dtype=np.int64)
    for r, nnz in enumerate(lengths):
        cols = rng.choice(k, size=int(min(nnz, k)), replace=False)
        a[r, cols] = rng.integers(1, 9, size=len(cols)) * rng.choice([-1, 1], size=len(cols))
    return a


def power_law(rng: np.random.Generator, rows: int, k: int, alpha: float = 1.5, scale: int = 2) -> np.ndarray:
    """Rows whose lengths are ``scale`` times Zipf(``alpha``) draws (capped at ``k``): most
    rows short, a few very long ones."""
    return _rows(rng, scale * rng.zipf(alpha, size=rows), k)


def uniform(rng: np.random.Generator, rows: int, k: int, density: float) -> np.ndarray:
    """Every entry nonzero with probability ``density``."""
    a = rng.integers(1, 9, size=(rows, k)) * rng.choice([-1, 1], size=(rows, k))
    a[rng.random((rows, k)) >= density] = 0
    return a


def data(g: Graph, a: np.ndarray, b: np.ndarray) -> dict[str, TensorData]:
    return {"A": TensorData.from_dense(a, g.tensors["A"].fmt), "B": TensorData.from_dense(b, g.tensors["B"].fmt)}


__all__ = ["DENSE2", "data", "inner_product", "power_law", "uniform"]
