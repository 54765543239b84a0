"""Graph breaks for data-dependent control flow: where torch.export cannot capture a module
(Python ``if`` / ``while`` on a tensor's value), ``torch.compile`` with a recording backend
runs it once on the example inputs and hands over the graphs between the breaks; each is
exported and lowered to the model IR like a whole module (:mod:`.export_trace`), and tensors
pass from one graph to the next by identity.

The branch a break decides is taken on the host with the example inputs; the model IR keeps the
decision as a *guard* (a host node reading the condition): at run time it checks that new
inputs take the same branch, and says which line to re-trace for if not.  Sparse inputs and
parameters run densely in this one example run (within :data:`~.export_trace.DENSE_LIMIT`
elements; the IR keeps them sparse).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .aten_idioms import SparseIdioms
from .export_trace import (
    _C,
    _T,
    DENSE_LIMIT,
    _check_masks,
    _Lower,
    _quiet_torch,
    export_program,
)
from .ir import FrontendError, MKind, ModelIR

__all__ = ["capture_with_breaks"]


class _Guard:
    """A host node's function: the condition must take the traced branch."""

    def __init__(self, expected: bool, where: str) -> None:
        self.expected = expected
        self.where = where

    def __call__(self, cond: np.ndarray) -> np.ndarray:
        got = bool(np.asarray(cond).reshape(-1)[0] != 0)
        if got != self.expected:
            raise ValueError(f"{self.where}: these inputs take the other branch ({got}; traced with "
                             f"{self.expected}): trace the model again with them")
        return np.asarray(cond, dtype=np.float64)


def _dense(t: torch.Tensor, what: str) -> torch.Tensor:
    if t.layout == torch.strided:
        return t
    if t.numel() > DENSE_LIMIT:
        raise FrontendError(f"{what}: a sparse tensor of shape {tuple(t.shape)} is too large (over "
                            f"{DENSE_LIMIT} elements) for the dense example run that data-dependent "
                            "control flow needs")
    return t.to_dense()


def _record(module, inputs: Mapping[str, torch.Tensor]) -> list[tuple[Any, tuple, Any]]:
    """Run ``module(**inputs)`` under torch.compile: every graph call (graph, args, outputs)."""
    graphs: list[Any] = []
    calls: list[tuple[Any, tuple, Any]] = []

    def backend(gm, example_inputs):
        graphs.append(gm)

        def run(*args):
            out = gm(*args)
            calls.append((gm, args, out))
            return out
        return run

    import torch._dynamo as dynamo

    dynamo.reset()
    try:
        with torch.no_grad(), _quiet_torch():
            result = torch.compile(module, backend=backend, dynamic=False, fullgraph=False)(**inputs)
    except Exception as exc:  # noqa: BLE001 - dynamo raises many exception types
        raise FrontendError(f"torch.compile cannot run {type(module).__name__}: "
                            f"{str(exc).strip().splitlines()[0][:300]}") from None
    finally:
        dynamo.reset()
    return calls, result


def capture_with_breaks(module, inputs: Mapping[str, Any], formats: Mapping[str, str],
                        name: str | None, originals: Mapping[str, torch.Tensor]) -> ModelIR:
    """The model IR of ``module`` with graph breaks at data-dependent control flow."""
    dense_in = {k: _dense(v, f"input {k!r}") for k, v in inputs.items()}
    swapped: list[tuple[Any, str, str, Any]] = []
    for qual, t in originals.items():
        owner_path, _, leaf = qual.rpartition(".")
        owner = module.get_submodule(owner_path) if owner_path else module
        kind = "_parameters" if leaf in owner._parameters else "_buffers"
        swapped.append((owner, kind, leaf, getattr(owner, kind)[leaf]))
        d = _dense(t, qual)
        getattr(owner, kind)[leaf] = torch.nn.Parameter(d, requires_grad=False) if kind == "_parameters" else d
    try:
        known: dict[int, tuple[str, torch.Tensor]] = {}
        for qual, t in list(module.named_parameters()) + list(module.named_buffers()):
            known[id(t)] = (qual, originals.get(qual, t))
        for k, v in dense_in.items():
            known[id(v)] = (k, inputs[k])
        sparse = [v for v in list(inputs.values()) + list(originals.values())
                  if isinstance(v, torch.Tensor) and v.layout != torch.strided]
        with SparseIdioms(sparse):  # torch.sparse.* and sparse accessors on the dense example values
            calls, result = _record(module, dense_in)
            low = _Lower(None, module, inputs, formats, originals)
            ir_name = name or type(module).__name__.lower()
            values = _lower_calls(low, calls, known)
    finally:
        for owner, kind, leaf, t in reversed(swapped):
            getattr(owner, kind)[leaf] = t
    results = result if isinstance(result, (tuple, list)) else (result,)
    outs = []
    for r in results:
        v = values.get(id(r))
        if v is None:
            raise FrontendError(f"{type(module).__name__}: an output is not computed by a captured graph "
                                "(made by Python code between graph breaks)")
        outs.append(low.output(v))
    _check_masks(low.s.nodes)
    ir = ModelIR(ir_name, low.s.nodes, low.s.data, low.s.formats, outs, {})
    ir.notes = low.s.notes
    ir.capture = f"torch.compile graph breaks ({len(calls)} graphs) + torch.export"
    ir.fixed_inputs = dict(low.int_inputs)
    ir.fixed_patterns = dict(low.patterns)
    return ir


def _lower_calls(low: _Lower, calls, known: dict[int, tuple[str, torch.Tensor]]) -> dict[int, Any]:
    """Lower every recorded graph call in order; the IR value of every tensor by ``id``."""
    values: dict[int, Any] = {}
    keep_alive: list[Any] = []
    consumed: set[int] = set()
    for _, args, _ in calls:
        consumed.update(id(a) for a in args if isinstance(a, torch.Tensor))
    for gm, args, out in calls:
        ep = export_program(gm, tuple(args), {})
        user = [s for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
        by_name = {s.arg.name: k for k, s in enumerate(user)}

        def bind(node, spec, args=args, by_name=by_name):
            if spec is not None and spec.kind.name != "USER_INPUT":
                return low.placeholder(node, spec)
            t = args[by_name[node.name]]
            if not isinstance(t, torch.Tensor):
                return t
            if id(t) in values:
                return values[id(t)]
            if id(t) in known:
                qual, original = known[id(t)]
                v = low.input_value(qual, original)
                values[id(t)] = v
                return v
            return _C(t.detach().clone())  # a constant made by Python code (same every run)

        outs = low.run_graph(ep, bind)
        flat = out if isinstance(out, (tuple, list)) else (out,)
        for t, v in zip(flat, outs):
            if isinstance(t, torch.Tensor):
                values[id(t)] = v
                keep_alive.append(t)
                if isinstance(v, _T) and v.dtype == torch.bool and t.numel() == 1 and id(t) not in consumed:
                    _guard(low, v, bool(t.reshape(()).item()))
    values["keep"] = keep_alive  # type: ignore[index]
    return values


def _guard(low: _Lower, cond: _T, taken: bool) -> None:
    """A host node that checks at run time that the branch on ``cond`` goes the traced way."""
    made = next(n for n in reversed(low.s.nodes) if n.name == cond.name)
    low.src = made.source
    low.region = made.region
    where = made.source
    low.emit("guard", MKind.HOST, (cond.name,), cond.ir_shape, op="branch on a tensor's value",
             reason=f"data-dependent control flow: the branch taken with the example inputs ({taken}) is "
                    "checked on the host at run time", fn=_Guard(taken, where), bool_out=True)
