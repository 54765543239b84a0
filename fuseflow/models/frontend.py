"""PyTorch frontend: trace an ``nn.Module`` (torch.fx) with sparse annotations into a model IR.

:func:`trace` runs the module once on example inputs through a torch.fx interpreter, mapping
every traced op to a :class:`MNode` of the model IR (the shapes come from the real run).  The
IR is a small tensor-op list that :mod:`fuseflow.models.plan` turns into Einsum programs
(:class:`fuseflow.compiler.Program`) and SAMML subgraphs:

* ``einsum`` — linear (``x·Wᵀ``), matmul / mm / bmm / sparse mm / einsum, transpose / permute,
  sum / mean (the mean's scale is a ``scale`` node);
* ``add`` / ``sub`` / ``mul`` — tensor–tensor with trailing-axis broadcasting (bias add);
* ``scale`` / ``add_scalar`` — a tensor times / plus a Python number (division by a number is a
  scale by its inverse);
* ``unary`` (relu, gelu), ``softmax`` / ``layernorm`` / ``max`` over the last dimension;
* ``mask`` — ``masked_fill(~M, -inf)`` / ``where(M, x, -inf)`` with a sparse-annotated keep
  mask ``M``: the result holds only ``M``'s entries and must feed a softmax (masked attention);
* ``reshape`` / ``view`` — data movement on the host: a fusion barrier (as in the FuseFlow paper).

Sparse annotations: an input in torch sparse CSR / COO layout is ``csr``; ``formats`` maps input
or parameter names (``"layer1.weight"``) to a compiler format name (``csr``, ``dcsr``, ``csc``,
``dense``, per-level letters).  A module may declare a ``sparse_formats`` dict itself.  Anything
outside this list raises :class:`FrontendError` naming the op and the source line.

The model IR is :mod:`fuseflow.models.ir` and needs no torch; the torch.fx interpreter that
fills it is :mod:`fuseflow.models.fx_trace`, which :func:`trace` imports when it is called.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from .ir import FrontendError, MKind, MNode, ModelIR

__all__ = ["FrontendError", "MKind", "MNode", "ModelIR", "check_input_names", "trace"]


def check_input_names(module, names: Iterable[str], where: str = "inputs") -> None:
    """A :class:`FrontendError` when ``names`` (the inputs of ``module(**inputs)``) do not fit
    ``module.forward``'s parameters: it names the missing required ones and the unknown ones,
    with the signature.  (``*args`` / ``**kwargs`` take anything; an unreadable signature passes.)"""
    forward = getattr(module, "forward", None)
    try:
        sig = inspect.signature(forward)
    except (TypeError, ValueError):
        return
    params = sig.parameters.values()
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    given = list(names)
    missing = [p.name for p in named if p.default is p.empty and p.name not in given]
    unknown = ([] if any(p.kind is p.VAR_KEYWORD for p in params)
               else [n for n in given if n not in {p.name for p in named}])
    if not missing and not unknown:
        return
    why = []
    if missing:
        why.append(f"no input for {', '.join(missing)}")
    if unknown:
        why.append(f"{', '.join(unknown)} {'is not a parameter' if len(unknown) == 1 else 'are not parameters'}")
    cls = type(module).__name__
    raise FrontendError(f"{where}: {'; '.join(why)} of {cls}.forward{sig} (given: "
                        f"{', '.join(given) or 'none'}); name the inputs after forward's parameters")


def trace(module, inputs: Mapping[str, Any], formats: Mapping[str, str] | None = None,
          name: str | None = None, *, capture: str = "auto") -> ModelIR:
    """Trace ``module`` called as ``module(**inputs)`` into a :class:`ModelIR`.

    ``formats`` maps input / parameter / buffer names (dotted names allowed) to a format; the
    module's own ``sparse_formats`` attribute is merged under it.  ``capture``: ``"auto"``
    (torch.export; where it cannot capture the module, graph breaks through torch.compile for
    data-dependent control flow, else torch.fx), ``"export"`` or ``"fx"`` only."""
    # deferred: the tracers import torch, an optional dependency (pip install -e ".[torch]");
    # the model IR above, and fuseflow.models with it, import without torch
    from .capture import trace_module

    check_input_names(module, inputs)
    return trace_module(module, inputs, formats, name, capture)
