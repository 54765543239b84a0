"""GCN layer with activation Y = relu(A·X·W + b): one graph with factored iteration (relu is
applied to the reducer's output, after the union with the bias)."""

import sys
from pathlib import Path

from fuseflow.compiler import Program, einsum, relu

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for gcn_common
from gcn_common import gcn_data, gcn_operands


def program(nodes: int = 16, features: int = 8, hidden: int = 4) -> Program:
    p = Program("gcn_relu")
    A, X, W, b = gcn_operands(p, nodes, features, hidden)
    T = p.let("T", einsum("ik,kj->ij", A, X))
    p.output(p.let("Y", relu(einsum("ij,jl->il", T, W) + b)))
    return p


def example_data(seed: int):
    return gcn_data(seed)
