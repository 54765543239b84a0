"""What the two GCN example programs (programs/gcn_layer.py, programs/gcn_relu.py) share: the
operands of a GCN layer and their example data."""

import numpy as np

from fuseflow.compiler import Program


def gcn_operands(p: Program, nodes: int, features: int, hidden: int):
    """Declare the adjacency ``A`` (CSR), the features ``X``, the weight ``W`` and the bias ``b``
    (dense) of ``p``; returns them in that order."""
    A = p.tensor("A", (nodes, nodes), "csr")
    X = p.tensor("X", (nodes, features), "dense")
    W = p.tensor("W", (features, hidden), "dense")
    b = p.tensor("b", (hidden,), "dense")
    return A, X, W, b


def gcn_data(seed: int) -> dict[str, np.ndarray]:
    """Seeded integer data for the default sizes (16 nodes, 8 features, 4 hidden), ``A`` 20 %
    dense."""
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (16, 16)) * (rng.random((16, 16)) < 0.2)
    return {"A": A, "X": rng.integers(-3, 4, (16, 8)), "W": rng.integers(-3, 4, (8, 4)),
            "b": rng.integers(-3, 4, 4)}
