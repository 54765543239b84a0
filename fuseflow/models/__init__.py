"""Sparse ML front end: PyTorch frontend, model zoo, datasets and model compilation (the
``--model`` command-line paths are in :mod:`fuseflow_cli.models`).

``datasets``, ``plan`` and ``suite`` need no torch; ``frontend.trace`` imports torch when it is
called and ``zoo`` imports it at import time (``pip install -e ".[torch]"``), so the zoo is
not re-exported here: ``from fuseflow.models.zoo import make_case``.
"""

from .datasets import DATASETS, GraphDataset, load_dataset
from .frontend import FrontendError, MKind, MNode, ModelIR, trace
from .plan import FUSIONS, CompiledModel, ModelRun, compile_model, run_model

__all__ = [
    "DATASETS",
    "FUSIONS",
    "CompiledModel",
    "FrontendError",
    "GraphDataset",
    "MKind",
    "MNode",
    "ModelIR",
    "ModelRun",
    "compile_model",
    "load_dataset",
    "run_model",
    "trace",
]
