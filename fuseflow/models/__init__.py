"""Sparse ML front end: PyTorch frontend, model zoo, datasets, model compilation and CLI.

``datasets`` and ``plan`` need no torch; ``frontend`` imports torch when tracing and ``zoo``
imports it at import time (``pip install -e ".[torch]"``).
"""

from .datasets import DATASETS, GraphDataset, load_dataset
from .frontend import FrontendError, MKind, MNode, ModelIR, trace

__all__ = ["DATASETS", "FrontendError", "GraphDataset", "MKind", "MNode", "ModelIR", "load_dataset", "trace"]
