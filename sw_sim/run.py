"""Running SAMML graphs and single primitives in the cycle model."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuseflow.ir.banks import Written, assemble_outputs, written_tensors
from fuseflow.ir.memory import MemoryModel, Placement, parse_memory, plan_ports
from fuseflow.ir.numerics import FLOAT, Numerics
from fuseflow.ir.overflow import Overflow, check_policy, enforce
from fuseflow.ir.samml import PRIMITIVES, Graph, NodeKind, TensorUse
from fuseflow.ir.tensor import Format, TensorData
from fuseflow.ir.tokens import CRD_WIDTH, VAL_WIDTH, Token, parse_stream
from fuseflow.ir.validate import primitive_run_problems, require_valid_inputs

from . import registry
from .counters import collect_counters
from .dram import Controller
from .engine import Channel, Engine, NodeStats, NullChannel, Primitive, SimError
from .overflow import counting, overflow_counts, overflow_records
from .registry import Build
from .stream import Sink, Source

__all__ = ["PrimitiveResult", "SimResult", "build_primitive", "run_graph", "simulate_primitive"]


@dataclass
class SimResult:
    outputs: dict[str, TensorData]
    cycles: int
    stats: dict[str, NodeStats]
    wall_seconds: float = 0.0
    node_cycles: int = 0  # nodes x cycles: the work a lock-step simulator would do
    extra: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, Any] = field(default_factory=dict)  # sw_sim.counters
    # node -> results it wrapped (integer numerics) or saturated (fixed point); nodes with none left out
    overflows: dict[str, int] = field(default_factory=dict)
    # the same nodes with the largest magnitude and the format (fuseflow.ir.overflow.Overflow)
    overflow_records: list[Overflow] = field(default_factory=list)


class PrimitiveResult(dict):
    """Output port -> token list (writers: array name -> values), plus ``cycles`` and
    ``overflows`` (results the primitive's arithmetic wrapped or saturated, as
    :attr:`SimResult.overflows` counts them per node)."""

    cycles: int = 0
    overflows: int = 0


def resolve_numerics(numerics: Numerics | str | None, val_width: int | None) -> Numerics:
    """The value numerics of a run: ``numerics`` if given, else ``int<val_width>`` (``None``: float)."""
    if numerics is not None:
        return Numerics.parse(numerics)
    return FLOAT if val_width is None else Numerics.integer(val_width)


def build_primitive(kind: NodeKind, name: str, ins: dict[str, Channel], outs: dict[str, Channel],
                    params: Mapping[str, Any], *, val_width: int | None = VAL_WIDTH,
                    numerics: Numerics | str | None = None) -> Primitive:
    """Instantiate the cycle model of one primitive (the one registered for ``kind``).

    ``params``: the node's parameters with defaults; memory contents come here too
    (``seg``/``crd``/``dim`` for scanners, ``vals`` for value loads); writers take ``format``
    (``compressed``/``dense``).  Value arithmetic follows ``numerics`` (default:
    ``int<val_width>``, see :func:`resolve_numerics`).
    """
    return registry.build(kind, Build(name, ins, outs, params, resolve_numerics(numerics, val_width)))


def resolve_params(graph: Graph, node, data: Mapping[str, TensorData]) -> dict[str, Any]:
    """Node parameters plus what the tensor it names binds (by its declaration's tensor use):
    a level's ``format`` and ``dim`` (and ``seg``/``crd`` of a compressed level it reads), or
    the ``vals`` it reads."""
    params = node.all_params()
    use = node.spec.tensor
    if use is None:
        return params
    if use.level:
        spec = graph.tensors[params["tensor"]]
        lvl = params["level"]
        fmt = spec.fmt.levels[lvl]
        params["format"] = fmt.value
        params["dim"] = spec.level_dim(lvl)
        if not use.writes and fmt.has_crd:
            td = data[params["tensor"]]
            if fmt.has_seg:
                params["seg"] = td.seg[lvl]
            params["crd"] = td.crd[lvl]
    elif not use.writes:
        params["vals"] = data[params["tensor"]].vals.tolist()
    return params


def run_graph(graph: Graph, data: Mapping[str, TensorData], *, fifo_depth: int | None = None,
              val_width: int | None = VAL_WIDTH, verify: bool = True,
              max_cycles: int = 50_000_000, numerics: Numerics | str | None = None,
              memory: MemoryModel | str | None = None, onchip=None, crd_width: int = CRD_WIDTH,
              on_overflow: str = "raise") -> SimResult:
    """Simulate ``graph`` on the input tensors in ``data``; return outputs, cycles, stats and
    counters.

    A result the arithmetic wrapped or saturated raises
    :class:`~fuseflow.ir.overflow.NumericOverflowError` naming the nodes, unless ``on_overflow``
    is ``"report"``: then the run returns with the counts (``SimResult.overflows``) and a
    warning (``fuseflow/overflow.py``).

    ``numerics`` (``Numerics`` or text such as ``"q16.16"``) sets the value arithmetic of every
    node; tensor values are then the raw token values (``Numerics.quantize``).  ``memory`` (a
    :class:`fuseflow.ir.memory.MemoryModel` or preset name; default ideal) puts the arrays of
    every tensor not named in ``onchip`` behind an off-chip memory (``docs/memory.md``)."""
    num = resolve_numerics(numerics, val_width)
    check_policy(on_overflow)
    model = parse_memory(memory)
    placement = onchip if isinstance(onchip, Placement) else Placement.of(onchip)
    vw = num.width if num.width else 32
    ports = plan_ports(graph, model, placement, cw=crd_width, vw=vw)
    ctrl = Controller(model, ports) if ports else None
    mem_of: dict[str, dict[str, Any]] = {}
    for port in ctrl.ports if ctrl else ():
        mem_of.setdefault(port.spec.node, {})[port.spec.array] = port
    if verify:
        require_valid_inputs(graph, data, num, integers=numerics is not None)
    t0 = time.perf_counter()
    depth_default = fifo_depth or graph.fifo_depth
    chan_out: dict[Any, Channel] = {}
    chan_in: dict[Any, Channel] = {}
    for e in graph.edges:
        chan_out[e.src] = chan_in[e.dst] = Channel(str(e), e.depth if e.depth is not None else depth_default)
    for d in graph.discards:
        chan_out[d] = NullChannel(f"{d} (discarded)")
    prims: list[Primitive] = []
    sinks: list[Primitive] = []
    by_name: dict[str, Primitive] = {}
    arith: dict[str, Numerics] = {}
    for node in graph.nodes.values():
        ins = {p: chan_in[node[p]] for p in node.inputs()}
        outs = {p: chan_out[node[p]] for p in node.outputs()}
        params = resolve_params(graph, node, data)
        if node.name in mem_of:
            params["mem"] = mem_of[node.name]
        arith[node.name] = counting(num)
        prim = build_primitive(node.kind, node.name, ins, outs, params, numerics=arith[node.name])
        for port in mem_of.get(node.name, {}).values():
            port.node = prim
        prims.append(prim)
        by_name[node.name] = prim
        if node.spec.sink:
            sinks.append(prim)
    if not sinks:
        raise ValueError(f"graph {graph.name!r} has no writer: nothing defines when it is done")
    eng = Engine(prims + ([ctrl] if ctrl else []), list(chan_out.values()), sinks)
    try:
        cycles = eng.run(max_cycles)
    except SimError as exc:
        if "exceeded" not in str(exc):
            raise
        # the cycle cap: say which graph, and the memory system when it sets the pace
        mem = "" if model.ideal else f" under memory model {model.describe()}"
        raise SimError(f"graph {graph.name!r}: {exc}{mem} (the cap: max_cycles)") from None
    outputs = collect_outputs(graph, by_name)
    wall = time.perf_counter() - t0
    named = {str(e): chan_out[e.src] for e in graph.edges}
    counters = collect_counters(graph, by_name, named, model, placement, ctrl, cw=crd_width, vw=vw)
    records = overflow_records(arith)
    enforce(records, on_overflow, f"graph {graph.name!r} (sw_sim)")
    return SimResult(outputs, cycles, {p.name: p.stats for p in prims}, wall,
                     node_cycles=cycles * len(prims), counters=counters, overflows=overflow_counts(arith),
                     overflow_records=records)



def collect_outputs(graph: Graph, prims: Mapping[str, Any]) -> dict[str, TensorData]:
    """Assemble output tensors from their writers (works for sw_sim primitives and RTL dumps;
    banked outputs from their banks: :func:`fuseflow.ir.banks.assemble_outputs`)."""
    written: dict[str, Written] = {}
    for name in written_tensors(graph):
        spec = graph.tensors[name]
        w = written[name] = Written([None] * spec.fmt.order, [None] * spec.fmt.order)
        for node in graph.nodes.values():
            if node.params.get("tensor") != name:
                continue
            prim, use = prims[node.name], node.spec.tensor
            if use is TensorUse.WRITES_LEVEL and spec.fmt.levels[node.params["level"]] is Format.COMPRESSED:
                w.segs[node.params["level"]] = np.asarray(prim.seg, dtype=np.int64)
                w.crds[node.params["level"]] = np.asarray(prim.crd, dtype=np.int64)
            elif use is TensorUse.WRITES_VALS:
                w.vals = np.asarray(prim.vals)
    return assemble_outputs(graph, written)


def simulate_primitive(kind: NodeKind | str, inputs: Mapping[str, str | list[Token]],
                       *, depth: int = 2, val_width: int | None = VAL_WIDTH,
                       numerics: Numerics | str | None = None, **params: Any) -> PrimitiveResult:
    """Run one primitive on token lists (or their text form).

    ``inputs`` maps input port names to streams; the result maps output port names to token
    lists (writers: ``seg``/``crd`` or ``vals`` arrays) and carries ``.cycles``: cycles from the
    first one in which the inputs offer tokens through the one in which the last output ``D``
    is taken (writers: consumed).  Inputs and outputs pass through FIFOs of ``depth``, as in a
    graph, and outputs are never back-pressured.  ``numerics`` as in :func:`run_graph`.
    """
    kind = NodeKind(kind) if isinstance(kind, str) else kind
    spec = PRIMITIVES[kind]
    pv = spec.view(params)
    in_ports, out_ports = spec.ports(pv)
    unknown = set(inputs) - set(in_ports)
    missing = set(in_ports) - set(inputs)
    if unknown or missing:
        raise ValueError(f"{kind.value}: input ports are {sorted(in_ports)}; "
                         f"unknown {sorted(unknown)}, missing {sorted(missing)}")
    ins = {p: Channel(f"{kind.value}.{p}", depth) for p in in_ports}
    outs = {p: Channel(f"{kind.value}.{p}", depth) for p in out_ports}
    streams = {p: parse_stream(inputs[p]) for p in in_ports}
    problems = primitive_run_problems(spec, params, streams)
    if problems:
        raise ValueError(f"node {kind.value!r} ({kind.value}): " + "; ".join(problems))
    sources = [Source(f"src_{p}", {p: ins[p]}, streams[p]) for p in in_ports]
    arith = counting(resolve_numerics(numerics, val_width))
    prim = build_primitive(kind, kind.value, ins, outs, pv, val_width=val_width, numerics=arith)
    sinks = [Sink(f"sink_{p}", {p: outs[p]}) for p in out_ports]
    eng = Engine([*sources, prim, *sinks], [*ins.values(), *outs.values()], sinks or [prim])
    cycles = eng.run()
    result = PrimitiveResult()
    for s, p in zip(sinks, out_ports):
        result[p] = s.tokens
    if spec.tensor is TensorUse.WRITES_LEVEL:
        result.update(seg=prim.seg, crd=prim.crd) if prim.compressed else result.update(crd=prim.crd)
    elif spec.tensor is TensorUse.WRITES_VALS:
        result["vals"] = prim.vals
    result.cycles = cycles
    result.overflows = overflow_counts({kind.value: arith}).get(kind.value, 0)
    return result
