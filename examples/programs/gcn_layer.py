"""GCN-style layer Y = A·X·W + b; regions {A·X, ·W} and {+ b} for --fusion partial."""

import sys
from pathlib import Path

from fuseflow.compiler import Program, einsum

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for gcn_common
from gcn_common import gcn_data, gcn_operands


def program(nodes: int = 16, features: int = 8, hidden: int = 4) -> Program:
    p = Program("gcn_layer")
    A, X, W, b = gcn_operands(p, nodes, features, hidden)
    T1 = p.let("T1", einsum("ik,kj->ij", A, X))
    T2 = p.let("T2", einsum("ij,jl->il", T1, W))
    Y = p.let("Y", T2 + b)
    p.region(T1, T2)
    p.region(Y)
    p.output(Y)
    return p


def example_data(seed: int):
    return gcn_data(seed)
