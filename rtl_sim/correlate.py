"""sw_sim vs RTL cycle correlation over a suite of kernels: JSON, Markdown and a PNG plot.

A *suite entry* (:class:`fuseflow.ir.simulator.SuiteEntry`, suites named in :mod:`fuseflow.suites`)
is a graph plus one dataset.  Entries that share a graph share one Verilator
build and one simulator process; graphs are spread over the workers of a
:class:`fuseflow.executor.Executor` (local processes by default, or a Dask cluster).  Both simulators run
under the same memory model and on-chip tensors (``docs/memory.md``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from fuseflow.executor import Executor, make_executor
from fuseflow.ir.memory import MemoryError, MemoryModel, Placement, parse_memory, plan_ports
from fuseflow.suites.entry import SuiteEntry
from fuseflow.suites import suite
from hw.config import HwConfig
from sw_sim import run_graph

from .api import run_graph_batch

__all__ = ["KernelResult", "MemorySetup", "memory_left_out", "r_squared", "run_suite", "write_report"]


@dataclass(frozen=True)
class MemorySetup:
    """The memory model and on-chip tensors of a correlation run; tensor names a graph does not
    have are ignored for it (a suite's graphs name their tensors differently)."""

    model: MemoryModel = field(default_factory=lambda: parse_memory(None))
    onchip: tuple[str, ...] = ()

    def placement(self) -> Placement:
        return Placement.of(self.onchip, strict=False)

    def config(self, graph) -> HwConfig:
        return HwConfig(memory=self.model, onchip=tuple(t for t in self.onchip if t in graph.tensors))


def memory_left_out(entries: list[SuiteEntry], mem: MemorySetup) -> tuple[list[SuiteEntry], list[str]]:
    """The entries whose graphs can run under ``mem``, and ``name: reason`` for the others (a
    scanner with coordinate skipping needs its tensor on chip)."""
    kept, left = [], []
    for e in entries:
        try:
            plan_ports(e.make(run_graph)[0], mem.model, mem.placement())
        except MemoryError as exc:
            left.append(f"{e.name}: {exc}")
        else:
            kept.append(e)
    return kept, left


@dataclass
class KernelResult:
    name: str
    model: str
    sw_cycles: int
    rtl_cycles: int
    ratio: float
    rel_error: float
    values_equal: bool
    reference_ok: bool | None
    nodes: int = 0
    note: str = ""
    memory: str = "ideal"
    flops: int = 0  # sw_sim counters of the run (sw_sim.counters)
    bytes: int = 0  # read + written, all arrays
    bytes_offchip: int = 0  # moved off chip (lines x burst)
    overflow_equal: bool = True  # the RTL's overflow flags name the nodes sw_sim counts


def _run_named(suite_name: str, names: list[str], waves_dir: str | None, mem: MemorySetup,
               runner: str = "native") -> list[KernelResult]:
    by_name = {e.name: e for e in suite(suite_name)}
    return _run_group([by_name[n] for n in names], waves_dir, mem, runner)


def _run_group(entries: list[SuiteEntry], waves_dir: str | None, mem: MemorySetup,
               runner: str = "native") -> list[KernelResult]:
    made = [e.make(run_graph) for e in entries]
    graph = made[0][0]
    wave_file = Path(waves_dir) / f"{entries[0].name}.vcd" if waves_dir else None
    rtl = run_graph_batch(graph, [d for _, d, _ in made], cfg=mem.config(graph), waves=bool(waves_dir),
                          wave_file=wave_file, runner=runner, on_overflow="ignore")  # flags compared below
    results = []
    for e, (g, data, expected), r in zip(entries, made, rtl):
        sw = run_graph(g, data, memory=mem.model, onchip=mem.placement(), on_overflow="ignore")
        equal = all(np.array_equal(r.outputs[t].to_dense(), sw.outputs[t].to_dense()) for t in sw.outputs)
        ref_ok = None
        if expected is not None:
            [t] = sw.outputs
            ref_ok = bool(np.array_equal(sw.outputs[t].to_dense(), expected))
        rel = abs(r.cycles - sw.cycles) / max(r.cycles, 1)
        c = sw.counters
        results.append(KernelResult(e.name, e.model, sw.cycles, r.cycles, r.cycles / max(sw.cycles, 1), rel,
                                    equal, ref_ok, len(g.nodes), memory=mem.model.name,
                                    flops=c["flops_total"], bytes=c["bytes_read"] + c["bytes_written"],
                                    bytes_offchip=c["bytes_offchip"],
                                    overflow_equal=set(r.overflow) == set(sw.overflows)))
    return results


def run_suite(entries: Iterable[SuiteEntry] | str, *, jobs: int | None = None, waves_dir: str | None = None,
              progress: Callable[[int, int, str], None] | None = None,
              memory: MemorySetup | None = None, executor: Executor | None = None,
              runner: str = "native") -> list[KernelResult]:
    """Run every entry in sw_sim and RTL, grouping entries by graph structure.

    ``entries`` is a suite name (workers rebuild the suite and pick entries by name, so entry
    factories may be closures) or a list of entries with picklable ``make`` callables.
    ``memory``: the memory model and on-chip tensors of both simulators (default: ideal).
    ``executor``: where the groups run (default: ``jobs`` local processes).
    ``runner``: how the RTL runs (``rtl_sim.run_graph_batch``): ``native`` (default: the compiled
    Verilator harness), ``cocotb`` or ``amaranth``; results and cycles are the same.
    """
    mem = memory or MemorySetup()
    suite_name = entries if isinstance(entries, str) else None
    entries = suite(suite_name) if suite_name else list(entries)
    groups: dict[str, list[SuiteEntry]] = {}
    for e in entries:
        g = e.make(run_graph)[0]
        groups.setdefault(g.structure_hash(), []).append(e)
    grps = list(groups.values())
    if suite_name:
        fn, jobs_args = _run_named, [(suite_name, [e.name for e in grp], waves_dir, mem, runner) for grp in grps]
    else:
        fn, jobs_args = _run_group, [(grp, waves_dir, mem, runner) for grp in grps]
    results: list[KernelResult] = []
    done = 0
    # an executor the caller passes stays open for its next use
    with nullcontext(executor) if executor else make_executor("processes", jobs) as ex:
        for i, res in ex.map_unordered(fn, jobs_args):
            results += res
            done += len(grps[i])
            if progress:
                progress(done, len(entries), ", ".join(e.name for e in grps[i]))
    order = {e.name: i for i, e in enumerate(entries)}
    return sorted(results, key=lambda r: order[r.name])


def r_squared(x: list[float], y: list[float]) -> float:
    """Coefficient of determination of ``y`` predicted by ``x`` (parity line y = x)."""
    y_arr, x_arr = np.asarray(y, float), np.asarray(x, float)
    ss_res = float(np.sum((y_arr - x_arr) ** 2))
    ss_tot = float(np.sum((y_arr - y_arr.mean()) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot else (1.0 if ss_res == 0 else 0.0)


def write_report(results: list[KernelResult], outdir: str | Path, title: str = "sw_sim vs RTL") -> dict:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    sw = [r.sw_cycles for r in results]
    rtl = [r.rtl_cycles for r in results]
    summary = {
        "r2": r_squared(sw, rtl),
        "max_rel_error": max((r.rel_error for r in results), default=0.0),
        "kernels": [asdict(r) for r in results],
        "all_values_equal": all(r.values_equal for r in results),
        "all_overflow_equal": all(r.overflow_equal for r in results),
        "differing": [r.name for r in results if r.sw_cycles != r.rtl_cycles],
        "memory": sorted({r.memory for r in results}),
    }
    (out / "correlation.json").write_text(json.dumps(summary, indent=1) + "\n")
    _plot(results, summary, out / "correlation.png", title)
    lines = [f"# {title} cycle correlation", "",
             f"- kernels: {len(results)}", f"- memory: {', '.join(summary['memory']) or 'ideal'}",
             f"- R² (parity line): {summary['r2']:.6f}",
             f"- worst relative error: {summary['max_rel_error'] * 100:.3f} %",
             f"- outputs identical in RTL and sw_sim: {'all' if summary['all_values_equal'] else 'NO'}",
             f"- kernels whose cycles differ: {', '.join(summary['differing']) or 'none'}", "",
             "![correlation](correlation.png)", "",
             ("| kernel | group | nodes | sw_sim cycles | RTL cycles | RTL/sw | values equal | vs reference "
              "| FLOPs | bytes | off-chip bytes |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ref = "—" if r.reference_ok is None else ("pass" if r.reference_ok else "FAIL")
        lines.append(f"| {r.name} | {r.model} | {r.nodes} | {r.sw_cycles} | {r.rtl_cycles} | {r.ratio:.4f} | "
                     f"{'yes' if r.values_equal else 'NO'} | {ref} | {r.flops} | {r.bytes} | {r.bytes_offchip} |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return summary


def _plot(results: list[KernelResult], summary: dict, path: Path, title: str) -> None:
    import matplotlib  # heavy: loaded only to draw the report's plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 5.6), dpi=120)
    models = sorted({r.model for r in results})
    cmap = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    for i, m in enumerate(models):
        pts = [r for r in results if r.model == m]
        ax.scatter([r.sw_cycles for r in pts], [r.rtl_cycles for r in pts], s=28, color=cmap(i % cmap.N),
                   label=m, edgecolor="black", linewidth=0.4, zorder=3)
    lo = max(1, min([r.sw_cycles for r in results] + [r.rtl_cycles for r in results], default=1))
    hi = max([r.sw_cycles for r in results] + [r.rtl_cycles for r in results] + [10])
    lo, hi = 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
    ax.plot([lo, hi], [lo, hi], color="gray", linestyle="--", linewidth=1, label="parity", zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("sw_sim cycles")
    ax.set_ylabel("RTL cycles (Verilator)")
    ax.set_title(f"{title}: R² = {summary['r2']:.4f}, worst error {summary['max_rel_error'] * 100:.2f} %")
    ax.grid(True, which="both", linewidth=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

