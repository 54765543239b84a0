"""What the two GCN example programs (programs/gcn_layer.py, programs/gcn_relu.py) share: the
example data of a GCN layer."""

import numpy as np


def gcn_data(seed: int) -> dict[str, np.ndarray]:
    """Seeded integer data for the default sizes (16 nodes, 8 features, 4 hidden), ``A`` 20 %
    dense."""
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (16, 16)) * (rng.random((16, 16)) < 0.2)
    return {"A": A, "X": rng.integers(-3, 4, (16, 8)), "W": rng.integers(-3, 4, (8, 4)),
            "b": rng.integers(-3, 4, 4)}
