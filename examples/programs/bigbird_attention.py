"""BigBird attention core of the model zoo's GPT (one head): S = M ∘ (Q·Kᵀ), O = S·V.

M is the zoo's seeded BigBird block mask (sequence 64, blocks of 8: a window of three blocks, one
global block row and column, one random block per row; 40.6 % of the entries kept), Q, K, V the
head's 64 × 32 activations.  Softmax between the two products is an ML subgraph of its own in the
model (a separate graph), so it is not part of this program.
"""

import numpy as np

from fuseflow.compiler import Program, einsum
from fuseflow.models.datasets import bigbird_mask

SEQ, HEAD, BLOCK = 64, 32, 8


def program(seq: int = SEQ, head: int = HEAD) -> Program:
    p = Program("bigbird_attention")
    M = p.tensor("M", (seq, seq), "csr")
    Q = p.tensor("Q", (seq, head), "dense")
    K = p.tensor("K", (seq, head), "dense")
    V = p.tensor("V", (seq, head), "dense")
    S = p.let("S", M * einsum("id,jd->ij", Q, K))
    p.output(p.let("O", einsum("ij,je->ie", S, V)))
    return p


def example_data(seed: int, seq: int = SEQ, head: int = HEAD) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = bigbird_mask(seq, BLOCK, seed=0).astype(np.int64)
    return {"M": mask, "Q": rng.integers(-3, 4, (seq, head)), "K": rng.integers(-3, 4, (seq, head)),
            "V": rng.integers(-3, 4, (seq, head))}
