"""Running primitives and graphs in RTL (Amaranth -> Verilator, driven by cocotb or, for
graphs, by the compiled harness of ``rtl_sim/native.py``; graphs also under amaranth.sim,
``rtl_sim/amaranth_sim.py``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fuseflow.ir.banks import outputs_from_arrays
from fuseflow.ir.memory import MemoryModel, Placement, parse_memory
from fuseflow.ir.overflow import Overflow, check_policy, enforce
from fuseflow.ir.samml import PRIMITIVES, Graph, NodeKind, StreamKind
from fuseflow.ir.tensor import TensorData
from fuseflow.ir.tokens import Token, decode, encode, parse_stream
from fuseflow.ir.validate import primitive_run_problems, require_valid_inputs, require_words
from hw.build import to_verilog
from hw.elaborate import (
    DEFAULT_HW,
    STATUS_OVERFLOW,
    STATUS_OVERRUN,
    GraphTop,
    HwConfig,
    MemoryMap,
    PrimitiveHarness,
)
from hw.registry import stream_width
from sw_sim import SimError
from sw_sim import run_graph as sw_run_graph
from sw_sim.run import PrimitiveResult

from .amaranth_sim import amaranth_top, run_amaranth, run_primitive_amaranth
from .native import DEFAULT_MAX_CYCLES, RtlTimeout, native_build, run_native
from .toolchain import ToolchainError, run_cocotb, verilator_build
from .waves import vcd_to_fst, wave_format, write_gtkw

__all__ = [
    "COCOTB_MAX_CYCLES",
    "RUNNERS",
    "RtlResult",
    "graph_build",
    "memory_config",
    "run_graph",
    "run_graph_batch",
    "run_primitive_batch",
    "simulate_primitive",
]

_MEM_PARAMS = ("seg", "crd", "vals")
_PRIM_TOP = "fuseflow_prim"
_GRAPH_TOP = "fuseflow_top"
# how a graph top is simulated and driven: Verilator with the cocotb testbench (rtl_sim/tb_graph.py)
# or with the compiled harness (rtl_sim/native.py), or amaranth.sim (rtl_sim/amaranth_sim.py)
RUNNERS = ("cocotb", "native", "amaranth")
VERILATOR_RUNNERS = ("cocotb", "native")
PRIMITIVE_RUNNERS = ("amaranth", "cocotb")  # one primitive: amaranth.sim, or Verilator with tb_primitive
COCOTB_MAX_CYCLES = 5_000_000  # tb_graph's default cycle limit of a run


def _pow2(n: int, floor: int = 64) -> int:
    size = floor
    while size < n:
        size *= 2
    return size


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def primitive_hw_params(kind: NodeKind, params: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> dict:
    """A single primitive's parameters with defaults plus the memory capacities its runs need
    (``seg_depth``, ``crd_depth``, ``vals_depth``: the longest array of any run, rounded up to
    a power of two so builds are reused; a writer's, the longest input stream)."""
    spec = PRIMITIVES[kind]
    hw_params = dict(spec.view(params))
    for m in _MEM_PARAMS:
        sizes = [len(r[m]) for r in runs if m in r]
        if sizes or spec.sink:
            hw_params[f"{m}_depth"] = _pow2(max([*sizes, 1]))
    if spec.sink:
        cap = _pow2(max(len(parse_stream(r["inputs"][p])) for r in runs for p in r["inputs"]))
        hw_params.update(seg_depth=cap, crd_depth=cap, vals_depth=cap * hw_params.get("lanes", 1))
    return hw_params


def run_primitive_batch(kind: NodeKind | str, runs: Sequence[Mapping[str, Any]], *, cfg: HwConfig = DEFAULT_HW,
                        depth: int = 2, gap: float = 0.0, stall: float = 0.0, seed: int = 0,
                        runner: str = "amaranth", **params: Any) -> list[dict]:
    """Run several input sets through one RTL build of a primitive.

    ``runner``: ``"amaranth"`` (amaranth.sim, nothing to build: the default, as a primitive's
    runs are short) or ``"cocotb"`` (a Verilator build driven by ``rtl_sim/tb_primitive.py``);
    both follow the same protocol and give the same results and cycle counts.

    Each run is ``{"inputs": {port: stream}, "seg"/"crd"/"vals": [...]}``; structural ``params``
    (``n``, ``op``, ``format``, ``dim`` …) are shared.  Returns, per run, the same mapping as
    :func:`sw_sim.simulate_primitive` plus ``"cycles"`` and, for a primitive whose operation can
    overflow, ``"overflow"``: its sticky flag at the end of the run (``True`` when it wrapped or
    saturated a result: sw_sim's ``overflows > 0``).
    """
    kind = NodeKind(kind) if isinstance(kind, str) else kind
    spec = PRIMITIVES[kind]
    in_kinds, out_kinds = spec.port_types(spec.view(params))
    hw_params = primitive_hw_params(kind, params, runs)
    if runner not in PRIMITIVE_RUNNERS:
        raise ValueError(f"runner {runner!r}: a primitive runs on {' or '.join(PRIMITIVE_RUNNERS)}")
    key = _key("prim", kind.value, {k: v for k, v in hw_params.items() if k not in _MEM_PARAMS}, cfg, depth)

    def harness_meta(h: PrimitiveHarness) -> dict:
        return {"memory_map": h.mmap.to_json(), "out_ports": h.out_ports, "overflow": hasattr(h, "overflow")}

    def make():
        h = PrimitiveHarness(kind, hw_params, cfg, depth)
        return to_verilog(h, _PRIM_TOP), harness_meta(h)

    if runner == "amaranth":
        harness = PrimitiveHarness(kind, hw_params, cfg, depth)
        meta = json.loads(json.dumps(harness_meta(harness)))  # as the build's meta.json
    else:
        bdir = verilator_build(key, make, _PRIM_TOP)
        meta = json.loads((bdir / "meta.json").read_text())
    job_runs = []
    for i, r in enumerate(runs):
        unknown = set(r["inputs"]) - set(in_kinds)
        if unknown or set(in_kinds) - set(r["inputs"]):
            raise ValueError(f"{kind.value}: input ports are {sorted(in_kinds)}, got {sorted(r['inputs'])}")
        problems = primitive_run_problems(spec, params, {p: parse_stream(r["inputs"][p]) for p in in_kinds})
        if problems:
            raise ValueError(f"{kind.value} run {i}: " + "; ".join(problems))
        inputs = {p: [encode(t, stream_width(k.kind, cfg), repsig=k.kind is StreamKind.REPSIG, lanes=k.lanes)
                      for t in parse_stream(r["inputs"][p])] for p, k in in_kinds.items()}
        mem = {}
        for m in _MEM_PARAMS:
            if m in r:
                w = cfg.vw if m == "vals" else cfg.cw
                require_words(r[m], w, signed=m == "vals", where=f"{kind.value} run {i}: {m}")
                mem[m] = [int(x) & ((1 << w) - 1) for x in r[m]]
        job_runs.append({"inputs": inputs, "mem": mem, "gap": gap, "stall": stall, "seed": seed + 1000 * i})
    if runner == "amaranth":
        results = run_primitive_amaranth(harness, meta, job_runs)
    else:
        results = run_cocotb(bdir, _PRIM_TOP, "rtl_sim.tb_primitive", {"meta": meta, "runs": job_runs})["results"]
    out = []
    for r in results:
        d: dict[str, Any] = {"cycles": r["cycles"]}
        if "overflow" in r:
            d["overflow"] = bool(r["overflow"])
        for p, words in r.get("outputs", {}).items():
            k = out_kinds[p]
            d[p] = [decode(w, stream_width(k.kind, cfg), signed=k.kind is StreamKind.VAL,
                           repsig=k.kind is StreamKind.REPSIG, lanes=k.lanes) for w in words]
        for name, words in r.get("arrays", {}).items():
            d[name] = [_signed(w, cfg.vw) for w in words] if name == "vals" else list(words)
        out.append(d)
    return out


def simulate_primitive(kind: NodeKind | str, inputs: Mapping[str, str | list[Token]], *, cfg: HwConfig = DEFAULT_HW,
                       depth: int = 2, gap: float = 0.0, stall: float = 0.0, seed: int = 0, runner: str = "amaranth",
                       **params: Any):
    """Same signature and result as :func:`sw_sim.simulate_primitive`, run in RTL (``runner``
    as in :func:`run_primitive_batch`)."""
    mem = {m: params.pop(m) for m in _MEM_PARAMS if m in params}
    [r] = run_primitive_batch(kind, [{"inputs": inputs, **mem}], cfg=cfg, depth=depth, gap=gap, stall=stall,
                              seed=seed, runner=runner, **params)
    result = PrimitiveResult({k: v for k, v in r.items() if k not in ("cycles", "overflow")})
    result.cycles = r["cycles"]
    result.overflows = int(r.get("overflow", False))  # the flag: 1 when the RTL flagged any
    return result


def _signed(w: int, width: int) -> int:
    return w - (1 << width) if w >> (width - 1) & 1 else w


@dataclass
class RtlResult:
    outputs: dict[str, TensorData]
    cycles: int
    # the nodes whose sticky overflow flag the hardware set (a result wrapped or saturated: what
    # sw_sim counts in SimResult.overflows), in the memory map's order; read from the host port
    overflow: list[str] = field(default_factory=list)
    status: int = 0  # the STATUS register (hw.elaborate: bit 0 overflow, bit 1 writer overrun)
    numerics: str = ""  # the value format the flags refer to (``int32``, ``q16.16``)

    @property
    def overflows(self) -> dict[str, int]:
        """The flagged nodes as sw_sim's per-node counts read them (a flag counts 1)."""
        return dict.fromkeys(self.overflow, 1)


def memory_config(cfg: HwConfig, memory: MemoryModel | str | None = None,
                  onchip: Placement | Iterable[str] | None = None) -> HwConfig:
    """``cfg`` with the memory model and on-chip tensors given (``None``: keep ``cfg``'s), as
    ``sw_sim.run_graph(memory=, onchip=)`` takes them."""
    if memory is not None:
        cfg = replace(cfg, memory=parse_memory(memory))
    if onchip is not None:
        names = onchip.onchip if isinstance(onchip, Placement) else onchip
        cfg = replace(cfg, onchip=tuple(names))
    return cfg


def _check_runner(runner: str) -> None:
    if runner not in RUNNERS:
        raise ValueError(f"runner {runner!r}: use one of {', '.join(RUNNERS)}")


def graph_build(graph: Graph, cfg: HwConfig = DEFAULT_HW, waves: bool = False,
                runner: str = "cocotb") -> tuple[Path, dict]:
    """The cached Verilator build of ``graph`` for ``runner`` (keyed by its structure and the
    whole config, memory model and on-chip tensors included) and its memory map; for the
    Verilator runners only (``amaranth`` builds nothing)."""
    if runner not in VERILATOR_RUNNERS:
        raise ValueError(f"runner {runner!r}: a Verilator build is for {', '.join(VERILATOR_RUNNERS)}")
    key = _key("graph", graph.structure_hash(), cfg, cfg.memory.to_json(), cfg.onchip)

    def make():
        top = GraphTop(graph, cfg)
        return to_verilog(top, _GRAPH_TOP), {"memory_map": top.mmap.to_json(), "summary": top.summary()}

    build = native_build if runner == "native" else verilator_build
    bdir = build(key, make, _GRAPH_TOP, waves=waves)
    return bdir, json.loads((bdir / "meta.json").read_text())


def _memory_runs(graph: Graph, datasets: Sequence[Mapping[str, TensorData]], meta: dict) -> list[dict]:
    """Per dataset, the words of every input array the build holds, by region name (int64
    arrays)."""
    regions = {r["name"]: r for r in meta["memory_map"]["regions"]}
    runs = []
    for data in datasets:
        mem = {}
        for t in graph.input_tensors():
            for array, values in data[t].arrays().items():
                name = f"{t}.{array}"
                if name not in regions:
                    continue  # an array no node reads (e.g. a level only located, never scanned)
                r = regions[name]
                if len(values) > r["depth"]:
                    raise ValueError(f"tensor {t!r} array {array!r} has {len(values)} entries; the build holds "
                                     f"{r['depth']} (raise max_nnz in HwConfig)")
                mem[name] = np.asarray(values, dtype=np.int64) & ((1 << r["width"]) - 1)
        runs.append({"mem": mem})
    return runs


def run_graph_batch(graph: Graph, datasets: Sequence[Mapping[str, TensorData]], *, cfg: HwConfig = DEFAULT_HW,
                    waves: bool = False, wave_file: Path | None = None, memory: MemoryModel | str | None = None,
                    onchip: Placement | Iterable[str] | None = None, runner: str = "native",
                    max_cycles: int | None = None, on_overflow: str = "raise") -> list[RtlResult]:
    """Run ``graph`` in RTL on each dataset (one Verilator build, one simulator process).
    ``memory`` / ``onchip`` (as in ``sw_sim.run_graph``) override ``cfg.memory`` / ``cfg.onchip``.

    ``runner``: ``"native"`` (the default, as in ``fuseflow-hw rtl``: the compiled harness of
    ``rtl_sim/native.py``), ``"cocotb"`` (the cocotb testbench ``rtl_sim/tb_graph.py``: the same
    bus protocol, results and cycle counts, about a hundred times slower), both on Verilator,
    or ``"amaranth"`` (amaranth.sim, no Verilator: ``rtl_sim/amaranth_sim.py``, the same
    protocol, results and cycle counts); each
    writes a waveform to ``wave_file`` with ``waves`` (VCD, or FST for a ``.fst`` file) and a
    GTKWave save file beside it (:mod:`rtl_sim.waves`).
    ``max_cycles``: a run not done within that many cycles of its start raises an error
    (default: 5 M for cocotb and amaranth, ``native.DEFAULT_MAX_CYCLES`` for native).
    A node whose sticky overflow flag is set (a result wrapped or saturated) raises
    :class:`~fuseflow.ir.overflow.NumericOverflowError`; ``on_overflow="report"`` returns the
    results with the flags (:attr:`RtlResult.overflow`) and a warning instead.
    """
    _check_runner(runner)
    check_policy(on_overflow)
    if max_cycles is not None and max_cycles < 1:
        raise ValueError(f"max_cycles = {max_cycles}: must be at least 1")
    fmt = wave_format(wave_file) if waves else None
    dump = Path(wave_file).with_suffix(".fst.vcd") if fmt == "fst" else wave_file  # FST: re-encoded from VCD
    cfg = memory_config(cfg, memory, onchip)
    for data in datasets:
        require_valid_inputs(graph, data, cfg.numerics or cfg.vw)
    what = f"graph {graph.name!r}"
    if runner == "amaranth":
        top, meta = amaranth_top(graph, cfg)
    else:
        bdir, meta = graph_build(graph, cfg, waves, runner)
    runs = _memory_runs(graph, datasets, meta)
    limit = max_cycles or (DEFAULT_MAX_CYCLES if runner == "native" else COCOTB_MAX_CYCLES)
    try:
        if runner == "amaranth":
            results = run_amaranth(top, meta, runs, max_cycles=limit, wave_file=dump if waves else None,
                                   what=what)
            _check_lengths(results, meta, what)
        elif runner == "native":
            results = run_native(bdir, meta, runs, max_cycles=limit,
                                 wave_file=dump if waves else None, what=what)
        else:
            job_runs = [{"mem": {name: words.tolist() for name, words in r["mem"].items()},
                         "limit": limit} for r in runs]
            results = run_cocotb(bdir, _GRAPH_TOP, "rtl_sim.tb_graph", {"meta": meta, "runs": job_runs},
                                 waves=waves, wave_file=dump)["results"]
            _check_lengths(results, meta, what)
    except ToolchainError as exc:
        if isinstance(exc, RtlTimeout) or "not done after" in str(exc):
            raise RtlTimeout(f"{exc}\n{stall_report(graph, datasets, cfg, limit)}") from None
        raise
    if fmt == "fst":
        vcd_to_fst(dump, wave_file)
        Path(dump).unlink()
    if fmt is not None:
        write_gtkw(graph, wave_file, runner, cfg, meta["memory_map"]["addr_width"])
    out = [RtlResult(_outputs(graph, r["arrays"], cfg), r["cycles"], _flagged(r, meta, what), r["status"],
                     str(cfg.num)) for r in results]
    for i, r in enumerate(out):
        where = f" (dataset {i + 1} of {len(out)})" if len(out) > 1 else ""
        enforce([Overflow(n, 1, None, str(cfg.num)) for n in r.overflow], on_overflow, f"{what} (RTL){where}")
    return out


def _flagged(res: dict, meta: dict, what: str) -> list[str]:
    """The nodes a run's OVERFLOW words flag; STATUS bit 0 (their registered OR) must agree."""
    nodes = MemoryMap.from_json(meta["memory_map"]).flagged(res["overflow_words"])
    if bool(nodes) != bool(res["status"] & STATUS_OVERFLOW):
        raise ToolchainError(f"RTL run of {what}: the STATUS overflow bit ({res['status'] & STATUS_OVERFLOW}) "
                             f"disagrees with the node flags ({nodes or 'none'}): please report it")
    return nodes


def _check_lengths(results: Sequence[dict], meta: dict, what: str) -> None:
    """An output array longer than its memory (the writer's length register counts past the
    region depth, its address wrapped) is an error, as the native harness reports it; so is a
    STATUS overrun bit that disagrees with the lengths."""
    depth = {r["name"]: r["depth"] for r in meta["memory_map"]["regions"]}
    for i, res in enumerate(results):
        where = f" (dataset {i + 1} of {len(results)})" if len(results) > 1 else ""
        over = [name for name, words in res["arrays"].items() if len(words) > depth[name]]
        if over:
            name = over[0]
            raise ToolchainError(f"RTL run of {what}{where}: output array {name!r} reports {len(res['arrays'][name])} "
                                 f"entries but its memory holds {depth[name]}: its writer overflowed the "
                                 "buffer (build with a larger max_nnz, --max-nnz TENSOR=N)")
        if res["status"] & STATUS_OVERRUN:
            raise ToolchainError(f"RTL run of {what}{where}: the STATUS register reports a writer overrun but no "
                                 "length register exceeds its region depth (please report it)")


def stall_report(graph: Graph, datasets: Sequence[Mapping[str, TensorData]], cfg: HwConfig, limit: int) -> str:
    """Why an RTL run may not have finished, from sw_sim on the same data and limit: the
    deadlock report that names the stalled nodes, or that sw_sim finishes (then the RTL and
    the model disagree, which is a bug to report)."""
    for i, data in enumerate(datasets):
        try:
            res = sw_run_graph(graph, data, numerics=cfg.num if cfg.vw >= 11 else None, memory=cfg.memory,
                               on_overflow="ignore",
                               onchip=cfg.onchip, max_cycles=limit, fifo_depth=cfg.fifo_depth)
        except SimError as exc:
            return f"sw_sim on dataset {i + 1}: {exc}"
        if len(datasets) == 1:
            return (f"sw_sim finishes the same run in {res.cycles} cycles: the RTL and the cycle model "
                    "disagree (please report it)")
    return "sw_sim finishes every dataset: the RTL and the cycle model disagree (please report it)"


def run_graph(graph: Graph, data: Mapping[str, TensorData], *, cfg: HwConfig = DEFAULT_HW, waves: bool = False,
              wave_file: Path | None = None, memory: MemoryModel | str | None = None,
              onchip: Placement | Iterable[str] | None = None, runner: str = "native",
              max_cycles: int | None = None, on_overflow: str = "raise") -> RtlResult:
    """One dataset of :func:`run_graph_batch`."""
    return run_graph_batch(graph, [data], cfg=cfg, waves=waves, wave_file=wave_file, memory=memory,
                           onchip=onchip, runner=runner, max_cycles=max_cycles, on_overflow=on_overflow)[0]


def _outputs(graph: Graph, arrays: Mapping[str, list[int]], cfg: HwConfig) -> dict[str, TensorData]:
    def vals_of(_t: str, words_: list[int]):
        words = np.asarray(words_, dtype=np.int64)
        return words - (((words >> (cfg.vw - 1)) & 1) << cfg.vw)  # two's complement of vw bits

    return outputs_from_arrays(graph, arrays, vals_of)
