"""The hardware configuration of a build: data widths, FIFO depths, memory capacities,
numerics, implementation choices (block-RAM FIFOs and accumulators) and the off-chip memory
timing model with the tensors kept on chip (``docs/memory.md``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuseflow.ir.memory import IDEAL, MemoryModel, MemPort, Placement, parse_memory, plan_ports
from fuseflow.ir.numerics import Mode, Numerics
from fuseflow.ir.tokens import CRD_WIDTH, VAL_WIDTH

__all__ = ["DEFAULT_HW", "HwConfig"]


@dataclass(frozen=True)
class HwConfig:
    cw: int = CRD_WIDTH  # crd / ref / repsig data width
    vw: int = VAL_WIDTH  # val data width
    fifo_depth: int | None = None  # None: the graph's default
    max_nnz: tuple[tuple[str, int], ...] = ()  # per-tensor capacity (stored values); default dense size
    numerics: Numerics | None = None  # value arithmetic (fuseflow.ir.numerics); None: int<vw>
    # output FIFOs at least this deep are hw.fifo.RamFIFO (block RAM, same timing); None: never
    ram_fifo_depth: int | None = None
    # sparse accumulators keep their sums in block RAM (synchronous reads, same timing): all of
    # them, or those of at least ``spacc_block_ram_min_dim`` entries (None: by the flag only)
    spacc_block_ram: bool = False
    spacc_block_ram_min_dim: int | None = None
    # off-chip memory timing (hw.dram): every array of a tensor not in ``onchip`` is behind a
    # memory port unless the model is ideal; the data stays in block RAM
    memory: MemoryModel = IDEAL
    onchip: tuple[str, ...] = ()
    # off-chip arrays have no array-sized memory in their nodes: a read port keeps three lines
    # (two resident, one filling), a write port two (hw.dram; set by hw.litedram's DRAM top,
    # whose line engine fills and drains them)
    line_buffers: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.memory, MemoryModel):
            object.__setattr__(self, "memory", parse_memory(self.memory, where="HwConfig memory"))
        if isinstance(self.onchip, str) or not all(isinstance(t, str) for t in self.onchip):
            raise ValueError(f"HwConfig: onchip = {self.onchip!r} must be a sequence of tensor names")
        object.__setattr__(self, "onchip", tuple(sorted(set(self.onchip))))
        num = self.numerics
        if num is None:
            return
        if num.mode is Mode.FLOAT:
            raise ValueError("HwConfig: float numerics are sw_sim only; use Numerics.fixed(m, n) or integer")
        if num.width != self.vw:
            raise ValueError(f"HwConfig: numerics {num} are {num.width} bits wide but vw={self.vw}; "
                             f"pass vw={num.width} (or HwConfig.for_numerics)")

    @classmethod
    def for_numerics(cls, numerics: Numerics | str, **kw: Any) -> HwConfig:
        """A config whose value width follows ``numerics`` (``"q16.16"``, ``Numerics.fixed(8, 8)``)."""
        num = Numerics.parse(numerics)
        return cls(vw=num.width, numerics=num, **kw)

    @property
    def num(self) -> Numerics:
        """The value numerics in force (``int<vw>`` unless set)."""
        return self.numerics or Numerics.integer(self.vw)

    def nnz_for(self, tensor: str) -> int | None:
        return dict(self.max_nnz).get(tensor)

    def mem_ports(self, graph) -> list[MemPort]:
        """The memory ports of ``graph`` under ``memory`` and ``onchip`` (the numbering sw_sim
        uses); raises ``fuseflow.ir.memory.MemoryError`` for an invalid placement."""
        return plan_ports(graph, self.memory, Placement.of(self.onchip), cw=self.cw, vw=self.vw)


DEFAULT_HW = HwConfig()  # frozen: safe to share as a default argument
