"""GCN-style layer Y = A·X·W + b; regions {A·X, ·W} and {+ b} for --fusion partial (the
compiler's catalog program: ``fuseflow.compiler.catalog.gcn_layer`` shows how it is written)."""

import sys
from pathlib import Path

from fuseflow.compiler import Program, catalog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for gcn_common
from gcn_common import gcn_data


def program(nodes: int = 16, features: int = 8, hidden: int = 4) -> Program:
    return catalog.gcn_layer(nodes, features, hidden)


def example_data(seed: int):
    return gcn_data(seed)
