"""y = x + z over two dense vectors: the cheapest lanes there are (an adder and two value reads
each), so a wide split of ``i`` measures the parallelizers and the serializer themselves
(``bench/par_synth.py --designs ser --factors 64``)."""

import numpy as np

from fuseflow.compiler import Program

N = 512


def program(n: int = N) -> Program:
    p = Program("vector_add")
    x = p.tensor("x", (n,), "dense")
    z = p.tensor("z", (n,), "dense")
    p.output(p.let("y", x + z))
    return p


def example_data(seed: int, n: int = N) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.integers(-100, 100, n), "z": rng.integers(-100, 100, n)}
