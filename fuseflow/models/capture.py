"""Which tracer captures a module (:func:`fuseflow.models.frontend.trace`): torch.export with
core-ATen decompositions (:mod:`.export_trace`); where export cannot capture it, torch.fx
(:mod:`.fx_trace`, the whitelist of the first frontend)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .break_trace import capture_with_breaks
from .export_trace import ExportFailed, capture
from .fx_trace import trace_module as fx_trace_module
from .ir import FrontendError, ModelIR

__all__ = ["SPARSE_HINT_DENSITY", "density_hints", "trace_module"]

CAPTURES = ("auto", "export", "fx")

# a dense weight matrix with at most this fraction of nonzeros gets a hint to store it sparse
SPARSE_HINT_DENSITY = 0.5


def trace_module(module, inputs: Mapping[str, Any], formats: Mapping[str, str] | None, name: str | None,
                 how: str = "auto") -> ModelIR:
    ir = _trace(module, inputs, formats, name, how)
    ir.notes.extend(density_hints(module, ir))
    return ir


def density_hints(module, ir: ModelIR) -> list[str]:
    """One note per dense weight matrix the model reads with at most
    :data:`SPARSE_HINT_DENSITY` of its entries nonzero, suggesting the ``--formats`` option
    that stores it sparse (``formats={"name": "csr"}`` in Python)."""
    hints = []
    for qual, p in module.named_parameters():
        key = qual.replace(".", "_")
        if p is None or p.layout != torch.strided or p.dim() != 2 or not p.is_floating_point() or \
                key not in ir.data or key in ir.formats or p.numel() == 0:
            continue
        density = float((p.detach() != 0).sum()) / p.numel()
        if density <= SPARSE_HINT_DENSITY:
            hints.append(f"hint: {qual} is a dense weight with {density:.0%} nonzeros "
                         f"({int((p.detach() != 0).sum())} of {p.numel()}); store it sparse with --formats {qual}=csr")
    return hints


def _trace(module, inputs: Mapping[str, Any], formats: Mapping[str, str] | None, name: str | None,
           how: str) -> ModelIR:
    if how not in CAPTURES:
        raise FrontendError(f"capture={how!r}: use one of {', '.join(CAPTURES)}")
    if how == "fx":
        ir = fx_trace_module(module, inputs, formats, name)
        ir.capture = "torch.fx"
        return ir
    try:
        return capture(module, inputs, formats, name)
    except ExportFailed as failed:
        if how == "export":
            raise
        why = str(failed)
        exc = failed
    if exc.data_dependent:
        fmts = {**getattr(module, "sparse_formats", {}), **(formats or {})}
        fmts = {k.replace(".", "_"): v for k, v in fmts.items()}
        originals = {q: t for q, t in list(module.named_parameters()) + list(module.named_buffers())
                     if t is not None and t.layout != torch.strided}
        ir = capture_with_breaks(module, inputs, fmts, name, originals)
        ir.notes.append(f"graph breaks: {why}")
        return ir
    try:
        ir = fx_trace_module(module, inputs, formats, name)
    except FrontendError as fx_exc:
        raise FrontendError(f"{why}; torch.fx fallback: {fx_exc}") from None
    ir.capture = "torch.fx"
    ir.notes.append(f"captured with torch.fx: {why}")
    return ir
