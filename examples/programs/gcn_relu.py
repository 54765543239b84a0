"""GCN layer with activation Y = relu(A·X·W + b): one graph with factored iteration (relu is
applied to the reducer's output, after the union with the bias); the compiler's catalog program
``fuseflow.compiler.catalog.gcn_relu``."""

import sys
from pathlib import Path

from fuseflow.compiler import Program, catalog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for gcn_common
from gcn_common import gcn_data


def program(nodes: int = 16, features: int = 8, hidden: int = 4) -> Program:
    return catalog.gcn_relu(nodes, features, hidden)


def example_data(seed: int):
    return gcn_data(seed)
