"""Error enclosures of a compiled model's outputs, step by step as :func:`run_model` runs it
(compiler steps through their programs, ML subgraphs through their row ops, host steps as the
host computes them), and the check of a run against PyTorch with them
(``docs/semantics.md``, "Tolerances")."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np

from ..ir.check import Check, compare
from ..compiler.bounds import Enclosure, EnclosureArithmetic
from ..compiler.evaluate import evaluate
from ..ir.numerics import Mode, Numerics
from ..ir.tensor import Format, TensorData
from .ir import MKind, MNode
from .plan import CompiledModel, CompilerStep, ConvertStep, HostOpStep, HostStep, MLStep, ModelRun

__all__ = ["check_model", "model_enclosures"]

PROBES = 8  # a host step without a dataflow form: its error by perturbing its inputs this often


def model_enclosures(cm: CompiledModel, numerics: Numerics | str,
                     data: Mapping[str, np.ndarray] | None = None,
                     observed: Mapping[str, TensorData] | None = None) -> tuple[dict[str, Enclosure], list[Check]]:
    """Every output of ``cm`` as an :class:`Enclosure` under ``numerics``, on the traced inputs
    (``data`` overrides them, as in :func:`run_model`), and the stage checks.

    ``observed`` (a run's materialised tensors, :attr:`ModelRun.tensors`: raw values): each
    tensor a step writes is checked against its enclosure there (a stage check), and the walk
    goes on from the observed values, so every stage is bounded from the values it actually
    read — the check made at the inputs of the ops whose error the chain amplifies (a worst-case
    bound over many layers and normalisations grows far beyond the error a run shows).
    Without ``observed``: the end-to-end enclosures, and no stage checks."""
    num = Numerics.parse(numerics)
    arith = EnclosureArithmetic(num)
    ir = cm.ir
    enc: dict[str, Enclosure] = {}
    checks: list[Check] = []
    for n in ir.nodes:
        if n.kind is MKind.INPUT:
            value = (data or {}).get(n.name, ir.data[n.name])
            enc[n.name] = arith.leaf(n.name, value.toarray() if hasattr(value, "toarray") else value)
    for name, arr in cm.consts.items():
        enc[name] = arith.leaf(name, arr)
    def seen(name: str, e: Enclosure) -> Enclosure:
        """A tensor the run materialised: checked against ``e``; the walk goes on from it."""
        if observed is None or name not in observed:
            return e
        value = np.asarray(num.dequantize(observed[name].to_dense()), dtype=np.float64)
        checks.append(compare(f"stage {name}", value, e.x, e.lo, e.hi, str(num)))
        return Enclosure.exact(value)

    for s in cm.steps:
        if isinstance(s, CompilerStep):
            program = s.compiled.source or s.compiled.program
            env = evaluate(program, {a: enc[a] for a in s.inputs}, arith, seen)
            enc.update({o: env[o] for o in s.outputs})
            continue
        if isinstance(s, MLStep):
            made = {s.output: _ml_step(arith, s, enc[s.input])}
        elif isinstance(s, ConvertStep):
            made = {s.output: enc[s.tensor]}
        elif isinstance(s, HostStep):
            made = {s.node.name: enc[s.node.args[0]].map(partial(_move, s.node))}
        else:
            made = {s.node.name: _host_op(arith, s, enc)}
        for name, e in made.items():
            enc[name] = e if isinstance(s, ConvertStep | HostStep) else seen(name, e)
    return {o: enc[o] for o in ir.outputs}, checks


def _move(n: MNode, v: np.ndarray) -> np.ndarray:
    """A host data movement: a permute (einsum) or a reshape."""
    return np.einsum(n.attrs["spec"], v) if n.kind is MKind.EINSUM else np.reshape(v, n.shape)


def _ml_step(arith: EnclosureArithmetic, s: MLStep, x: Enclosure) -> Enclosure:
    """The ops of an ML subgraph along the last axis: over the stored entries when it reads a
    sparse (masked) row, over every element otherwise."""
    sparse_rows = s.in_fmt.levels[-1] is not Format.DENSE
    visited = (x.x != 0) if sparse_rows else None
    for n in s.nodes:
        if n.kind is MKind.SCALE:
            x = arith.scale(x, float(n.attrs["c"]))
        elif n.kind is MKind.ADD_SCALAR:
            x = arith.shift(x, float(n.attrs["c"]))
        elif n.kind is MKind.UNARY:
            x = arith.function(n.attrs["op"], x)
        elif n.kind is MKind.SOFTMAX:
            x = arith.softmax(x, x.x.ndim - 1, visited)
        elif n.kind is MKind.LAYERNORM:
            x = arith.layernorm(x, x.x.ndim - 1, float(n.attrs["eps"]))
        else:  # MAX over the last axis
            x = arith.extreme(x, (x.x.ndim - 1,), np.max)
    return x


def _host_op(arith: EnclosureArithmetic, s: HostOpStep, enc: Mapping[str, Enclosure]) -> Enclosure:
    """A graph break on the host in float64: a rejected compiler node through its program's
    rules; an op without a dataflow form by perturbing its inputs to the ends of their
    enclosures (``PROBES`` times) — an estimate, not a guarantee — then its result quantised."""
    n = s.node
    args = [enc[a] for a in n.args]
    if s.program is not None:
        return evaluate(s.program, dict(zip(n.args, args)), arith)[n.name]
    x = np.asarray(n.attrs["fn"](*[a.x for a in args]), dtype=np.float64).reshape(n.shape)
    rng = np.random.default_rng(0)
    dev = np.zeros_like(x)
    fn = n.attrs["fn"]
    for _ in range(PROBES):
        steps = [np.where(rng.random(a.x.shape) < 0.5, -a.lo, a.hi) for a in args]
        y = _probe(fn, args, steps, n.shape)
        if not np.all(np.isfinite(y)):
            # a probe outside the function's domain (the sqrt of a variance whose enclosure
            # reaches below 0, where the hardware's variance cannot go): probe that side at the
            # exact value instead; what is still not finite is unbounded, never NaN
            bad = ~np.isfinite(y)
            steps = [np.where(np.broadcast_to(bad, s.shape) if s.shape == bad.shape else False, 0.0, s)
                     for s in steps]
            y = _probe(fn, args, steps, n.shape)
        dev = np.maximum(dev, np.where(np.isfinite(y), np.abs(y - x), np.inf))
    r = 2 * dev + arith.rounding(x)
    return Enclosure(x, r, r.copy())


def _probe(fn, args: list[Enclosure], steps: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(fn(*[a.x + st for a, st in zip(args, steps)]), dtype=np.float64).reshape(shape)


def check_model(cm: CompiledModel, run: ModelRun, reference: Mapping[str, np.ndarray] | np.ndarray,
                numerics: Numerics | str, data: Mapping[str, np.ndarray] | None = None) -> list[Check]:
    """Each output of ``run`` against ``reference`` (PyTorch's values: a mapping by output
    name, or the array of the one output) within the end-to-end bound the numerics derive for
    it; then, for fixed point, every tensor a step materialised within the bound derived from
    the values the step read (:func:`model_enclosures` with ``observed``)."""
    num = Numerics.parse(numerics)
    if not isinstance(reference, Mapping):
        reference = {cm.ir.outputs[0]: reference}
    enc, _ = model_enclosures(cm, num, data)
    checks = [compare(o, run.outputs[o], reference[o], enc[o].lo, enc[o].hi, str(num)) for o in cm.ir.outputs]
    if num.mode is Mode.FIXED:
        checks += model_enclosures(cm, num, data, run.tensors)[1]
    return checks
