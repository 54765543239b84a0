"""The memory system: an off-chip memory behind the tensors' arrays, and which arrays use it.

A run (sw_sim) or a build (RTL) takes a :class:`MemoryModel` and a placement: the tensors kept
on chip.  With the ``ideal`` model (the default) every array is an on-chip block RAM read in one
cycle, as before.  With any other model every array of a tensor that is not placed on chip is
*off-chip*: each node that reads or writes it does so through a **memory port** (a two-line
buffer in front of the memory), and the ports of a graph share one memory channel.  The timing
is defined in ``docs/memory.md`` and modelled the same in ``sw_sim.dram`` and ``hw.dram``.

This module holds what both simulators share: the model's parameters and presets (validated),
the word size of an array, and the port plan of a graph (which node reads / writes which
off-chip array, in a fixed order that sets the arbitration priority).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from .tokens import CRD_WIDTH, VAL_WIDTH

__all__ = [
    "MAX_OUTPUT_ARRAYS", "PRESETS", "MemPort", "MemoryError", "MemoryModel", "Placement", "parse_memory",
           "is_tensor_name", "plan_ports", "word_bytes"]

# output arrays (seg, crd, vals regions a writer fills) a graph may have: the hardware's host port
# has a length register for each (hw.elaborate)
MAX_OUTPUT_ARRAYS = 64


class MemoryError(ValueError):
    """A memory model or placement that is not valid (names the field and the value)."""


POLICIES = ("open", "closed")


@dataclass(frozen=True)
class MemoryModel:
    """Off-chip memory timing, in accelerator cycles.

    One channel: a data bus of ``bytes_per_cycle`` moving ``burst_bytes`` per access
    (``xfer_cycles`` each), ``banks`` banks of rows of ``row_bytes``, and a row-buffer
    ``policy``: ``open`` keeps the last row of each bank open (a hit costs ``t_cl``, a closed
    bank ``t_rcd + t_cl``, another open row ``t_rp + t_rcd + t_cl``), ``closed`` precharges after
    every access (always ``t_rcd + t_cl``).  ``latency`` is added to every access (controller
    and PHY pipeline).  Back to back on the bus, a transfer waits ``t_turn`` more cycles after
    one of the other direction (read <-> write turnaround) and ``t_switch`` more after one in
    another bank (a controller that serves one bank at a time).  ``clock_mhz`` is the
    accelerator clock the cycle figures assume."""

    name: str = "custom"
    bytes_per_cycle: float = 32.0
    burst_bytes: int = 64
    latency: int = 0
    t_cl: int = 14
    t_rcd: int = 14
    t_rp: int = 14
    banks: int = 16
    row_bytes: int = 2048
    policy: str = "open"
    clock_mhz: float = 1000.0
    ideal: bool = False
    t_turn: int = 0
    t_switch: int = 0

    def __post_init__(self) -> None:
        if self.ideal:
            return
        problems = []
        bpc = self.bytes_per_cycle
        if isinstance(bpc, bool) or not isinstance(bpc, (int, float)) or not math.isfinite(bpc) or bpc <= 0:
            problems.append(f"bytes_per_cycle = {bpc!r} must be a positive number (bandwidth)")
        for key in ("latency", "t_cl", "t_rcd", "t_rp", "t_turn", "t_switch"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                problems.append(f"{key} = {v!r} must be a whole number of cycles >= 0")
        for key in ("burst_bytes", "banks", "row_bytes"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1):
                problems.append(f"{key} = {v!r} must be a power of two >= 1")
        if not problems and self.row_bytes < self.burst_bytes:
            problems.append(f"row_bytes = {self.row_bytes} must be at least burst_bytes = {self.burst_bytes}")
        if self.policy not in POLICIES:
            problems.append(f"policy = {self.policy!r} must be one of {', '.join(POLICIES)}")
        cm = self.clock_mhz
        if isinstance(cm, bool) or not isinstance(cm, (int, float)) or not math.isfinite(cm) or cm <= 0:
            problems.append(f"clock_mhz = {cm!r} must be a positive number")
        if problems:
            raise MemoryError(f"memory model {self.name!r}: " + "; ".join(problems))

    # ------------------------------------------------------------- derived timing
    @property
    def xfer_cycles(self) -> int:
        """Cycles the data bus is busy per burst (at least 1)."""
        return max(1, math.ceil(self.burst_bytes / self.bytes_per_cycle))

    @property
    def lines_per_row(self) -> int:
        return self.row_bytes // self.burst_bytes

    def to_json(self) -> dict[str, Any]:
        """Stable field names: the dataclass fields plus ``xfer_cycles``."""
        d = asdict(self)
        if not self.ideal:
            d["xfer_cycles"] = self.xfer_cycles
        return d

    def describe(self) -> str:
        if self.ideal:
            return "ideal (every array on chip, one-cycle block-RAM reads)"
        gbs = self.bytes_per_cycle * self.clock_mhz / 1000
        return (f"{self.name}: {self.bytes_per_cycle:g} B/cycle ({gbs:.1f} GB/s at {self.clock_mhz:g} MHz), "
                f"{self.burst_bytes} B bursts, {self.banks} banks x {self.row_bytes} B rows, {self.policy} page, "
                f"tCL/tRCD/tRP {self.t_cl}/{self.t_rcd}/{self.t_rp}, +{self.latency} cycles"
                + (f", turnaround {self.t_turn}" if self.t_turn else "")
                + (f", bank switch {self.t_switch}" if self.t_switch else ""))


IDEAL = MemoryModel("ideal", ideal=True)

# Presets (sources and derivations in docs/memory.md).
PRESETS: dict[str, MemoryModel] = {
    "ideal": IDEAL,
    # one HBM2 channel (JEDEC JESD235): 128-bit bus at 2 Gb/s per pin = 32 GB/s, BL4 -> 64 B,
    # 16 banks, 2 KiB page, tCL = tRCD = tRP = 14 ns; accelerator at 1 GHz
    "hbm2": MemoryModel("hbm2", bytes_per_cycle=32.0, burst_bytes=64, latency=0, t_cl=14, t_rcd=14,
                        t_rp=14, banks=16, row_bytes=2048, policy="open", clock_mhz=1000.0),
    # DDR4-2400 x64 DIMM (JEDEC JESD79-4): 19.2 GB/s, BL8 -> 64 B, 16 banks, 8 KiB rank page,
    # CL = tRCD = tRP = 17 clocks at 1200 MHz = 14.2 ns; accelerator at 1 GHz
    "ddr4": MemoryModel("ddr4", bytes_per_cycle=19.2, burst_bytes=64, latency=0, t_cl=15, t_rcd=15,
                        t_rp=15, banks=16, row_bytes=8192, policy="open", clock_mhz=1000.0),
    # 16-bit SDR SDRAM of ULX3S-class boards (256 Mbit, x16, 4 banks, 512-column rows), clocked
    # with the fabric at 100 MHz: 2 B/cycle, burst 8 -> 16 B, CL 2, tRCD = tRP = 2 (15 ns)
    "sdram": MemoryModel("sdram", bytes_per_cycle=2.0, burst_bytes=16, latency=0, t_cl=2, t_rcd=2,
                         t_rp=2, banks=4, row_bytes=1024, policy="open", clock_mhz=100.0),
}

_FIELDS = {f.name: f.type for f in fields(MemoryModel) if f.name not in ("name", "ideal")}


def parse_memory(spec: str | Mapping[str, Any] | MemoryModel | None, *, where: str = "--memory") -> MemoryModel:
    """A preset name, ``PRESET:key=value,...`` (a preset with fields changed), a mapping of
    fields (``preset`` = the base, default ``hbm2``), or a model; ``None`` is ``ideal``."""
    if spec is None:
        return IDEAL
    if isinstance(spec, MemoryModel):
        return spec
    if isinstance(spec, str):
        base, _, rest = spec.partition(":")
        overrides: dict[str, Any] = {}
        for item in filter(None, (s.strip() for s in rest.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise MemoryError(f"{where} {spec!r}: expected PRESET:key=value,..., got {item!r}")
            if key.strip() in overrides:
                raise MemoryError(f"{where} {spec}: field {key.strip()} is given twice; give it once")
            overrides[key.strip()] = _number(value.strip())
        return _from(base.strip(), overrides, f"{where} {spec!r}")
    if isinstance(spec, Mapping):
        d = dict(spec)
        base = d.pop("preset", "hbm2")
        if not isinstance(base, str):
            raise MemoryError(f"{where}: preset = {base!r} must be a preset name")
        return _from(base, d, where)
    raise MemoryError(f"{where}: expected a preset name or a table of fields, got {spec!r}")


def _number(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _from(base: str, overrides: Mapping[str, Any], where: str) -> MemoryModel:
    if base not in PRESETS:
        raise MemoryError(f"{where}: unknown memory preset {base!r} (presets: {', '.join(PRESETS)})")
    model = PRESETS[base]
    if not overrides:
        return model
    unknown = [k for k in overrides if k not in _FIELDS]
    if unknown:
        raise MemoryError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))} "
                          f"(fields: {', '.join(_FIELDS)})")
    if model.ideal:
        raise MemoryError(f"{where}: the ideal model has no parameters to change; start from hbm2, "
                          "ddr4 or sdram")
    name = f"{base}*" if base != "custom" else base
    try:
        return replace(model, name=name, **overrides)
    except MemoryError as exc:
        raise MemoryError(f"{where}: {exc}") from None


# --------------------------------------------------------------------------- placement
@dataclass(frozen=True)
class Placement:
    """Which tensors stay on chip (everything else is off-chip unless the model is ideal).
    ``strict``: a name that is not a tensor of the graph is an error (a program's or model's
    runner checks names against all its graphs and passes ``strict=False``)."""

    onchip: frozenset[str] = frozenset()
    strict: bool = True

    @classmethod
    def of(cls, names: Iterable[str] | None, strict: bool = True) -> Placement:
        """The placement of ``names`` (:class:`MemoryError` for a name that is not a tensor
        name: empty, or a path)."""
        names = list(names or ())
        bad = [n for n in names if not is_tensor_name(n)]
        if bad:
            raise MemoryError(f"--onchip {bad[0]!r}: not a tensor name (an identifier such as B or "
                              "fc1.weight), but empty or a path")
        return cls(frozenset(names), strict)

    def check(self, tensors: Iterable[str], where: str) -> None:
        """An error naming the on-chip names that are none of ``tensors``."""
        known = set(tensors)
        unknown = sorted(self.onchip - known)
        if unknown:
            raise MemoryError(f"--onchip: no tensor {', '.join(map(repr, unknown))} in {where} "
                              f"(tensors: {', '.join(sorted(known))})")

    def offchip(self, model: MemoryModel, tensor: str) -> bool:
        return not model.ideal and tensor not in self.onchip


def is_tensor_name(name: object) -> bool:
    """Not empty and not a path: no ``/`` or ``\\``, no ``.`` at either end or twice in a row
    (tensors are named by identifiers, a module's parameter ``fc1.weight``)."""
    return (isinstance(name, str) and name.strip() == name and bool(name) and not any(c in name for c in "/\\")
            and all(name.split(".")))


def word_bytes(width: int) -> int:
    """Bytes one memory word of ``width`` bits occupies (a power of two)."""
    b = max(1, (width + 7) // 8)
    return 1 << (b - 1).bit_length()


@dataclass(frozen=True)
class MemPort:
    """One node's access to one off-chip array (``seg``/``crd`` of a level, or ``vals``)."""

    index: int  # arbitration order (0 first after the round-robin pointer)
    node: str
    array: str  # "seg" | "crd" | "vals"
    tensor: str
    level: int | None
    array_id: int  # the array's number: sets its bank offset and row tags
    word_bytes: int
    write: bool

    @property
    def key(self) -> str:
        lv = "" if self.level is None else str(self.level)
        return f"{self.tensor}.{self.array}{lv}"

    def line(self, model: MemoryModel, word: int) -> int:
        """The burst-sized line that holds word ``word`` of the array."""
        return word * self.word_bytes // model.burst_bytes

    def bank_row(self, model: MemoryModel, line: int) -> tuple[int, int]:
        """(bank, row) of a line: the array's rows (``lines_per_row`` lines each) go round the
        banks starting at bank ``array_id``; the row tag is (array_id, row number) packed."""
        chunk = line // model.lines_per_row
        bank = (chunk + self.array_id) % model.banks
        return bank, (self.array_id << 32) | (chunk // model.banks)


def plan_ports(graph, model: MemoryModel, placement: Placement = Placement(), *,
               cw: int = CRD_WIDTH, vw: int = VAL_WIDTH) -> list[MemPort]:
    """The memory ports of ``graph`` under ``model``: every (node, array) that reads or writes an
    array of an off-chip tensor, ordered by node name then array (seg, crd, vals).  Empty for the
    ideal model.  Unknown tensor names in the placement are errors."""
    if placement.strict:
        placement.check(graph.tensors, f"graph {graph.name!r}")
    if model.ideal:
        return []
    wanted: list[tuple[str, str, str, int | None, int, bool]] = []
    for name in sorted(graph.nodes):
        node = graph.nodes[name]
        use = node.spec.tensor
        if use is None:
            continue
        tensor = node.params["tensor"]
        if not placement.offchip(model, tensor):
            continue
        spec = graph.tensors[tensor]
        if use.level:
            lvl = node.params["level"]
            f = spec.fmt.levels[lvl]
            if not f.has_crd:
                continue  # a dense level has no arrays
            if use.writes:
                wanted += [(name, "seg", tensor, lvl, cw, True), (name, "crd", tensor, lvl, cw, True)]
            else:
                if node.params.get("skip"):
                    raise MemoryError(
                        f"node {name!r} scans level {lvl} of tensor {tensor!r} with coordinate skipping, "
                        f"and {tensor!r} is off-chip under memory {model.name!r}: skipping searches the "
                        f"crd array on chip; place {tensor!r} on chip or compile without skip")
                if f.has_seg:  # a singleton level has crd only
                    wanted.append((name, "seg", tensor, lvl, cw, False))
                wanted.append((name, "crd", tensor, lvl, cw, False))
        else:
            lanes = node.params.get("lanes", 1)
            if lanes > 1 and lanes * word_bytes(vw) > model.burst_bytes:
                raise MemoryError(
                    f"node {name!r} moves {lanes}-lane vectors of tensor {tensor!r} ({lanes * word_bytes(vw)} "
                    f"bytes each), and {tensor!r} is off-chip under memory {model.name!r}, whose bursts are "
                    f"{model.burst_bytes} bytes: a vector must fit one burst; place {tensor!r} on chip "
                    f"(--onchip {tensor}) or use fewer lanes")
            wanted.append((name, "vals", tensor, None, vw, use.writes))
    widest = max((word_bytes(w) for *_, w, _ in wanted), default=1)
    if widest > model.burst_bytes:
        raise MemoryError(f"memory model {model.name!r}: burst_bytes = {model.burst_bytes} is smaller than a "
                          f"{widest}-byte memory word; use bursts of at least {widest} bytes")
    arrays = sorted({(t, a, lv if lv is not None else -1) for _, a, t, lv, _, _ in wanted})
    ids = {k: i for i, k in enumerate(arrays)}
    return [MemPort(i, n, a, t, lv, ids[(t, a, lv if lv is not None else -1)], word_bytes(w), wr)
            for i, (n, a, t, lv, w, wr) in enumerate(wanted)]
