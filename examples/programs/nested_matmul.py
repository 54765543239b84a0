"""Nested matmul D = A·B·C with all operands CSR."""

import numpy as np

from fuseflow.compiler import Program, catalog


def program() -> Program:
    """A 16×12, B 12×14, C 14×10 (the compiler's catalog program)."""
    return catalog.nested_matmul(16, 12, 14, 10)


def example_data(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def sparse(shape, density):
        return rng.integers(-3, 4, shape) * (rng.random(shape) < density)

    return {"A": sparse((16, 12), 0.2), "B": sparse((12, 14), 0.2), "C": sparse((14, 10), 0.3)}
