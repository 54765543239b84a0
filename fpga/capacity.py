"""Will a graph's tensors fit on the chip?  A check made before anything is elaborated.

A board top keeps every tensor array in on-chip RAM (block RAM, and on ECP5 the LUTs'
distributed RAM), except, on a board with DRAM, the tensors placed there (their nodes keep only
line buffers; the DRAM's own size bounds them).  The arrays' sizes follow from the tensor shapes and formats and the
``--max-nnz`` bounds alone (:func:`hw.elaborate.tensor_arrays`), so a design whose tensors need
more bits than the device's RAM holds is refused at once, naming the tensors that need them,
instead of after minutes of elaboration and synthesis.  The test is a lower bound on the need
(FIFOs and accumulators take RAM too; rounding to block shapes is left out) against an upper
bound on the supply (every block and every distributed-RAM bit), so it never refuses a design
that fits; synthesis still reports the exact use (:class:`fpga.synth.DoesNotFit`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.ir.memory import word_bytes
from fuseflow.ir.samml import Graph
from hw.elaborate import HwConfig, tensor_arrays

from .boards import Board

__all__ = ["DEVICE_RAM", "DeviceRam", "TooLargeForChip", "check_fits", "check_max_nnz", "dram_bytes", "in_dram", "onchip_bits"]


@dataclass(frozen=True)
class DeviceRam:
    """The RAM of one FPGA device: ``blocks`` block RAMs of ``block_bits`` each (data and
    parity bits) and ``distributed_bits`` of LUT RAM."""

    blocks: int
    block_bits: int
    distributed_bits: int = 0

    @property
    def bits(self) -> int:
        return self.blocks * self.block_bits + self.distributed_bits

    def describe(self) -> str:
        text = f"{self.blocks} block RAMs of {self.block_bits // 1024} kbit"
        if self.distributed_bits:
            text += f" and {self.distributed_bits // 1024} kbit of distributed RAM"
        return text


# the devices of fpga.boards: iCE40 4 kbit EBRs (the UP5K's SPRAM is not used by the tops);
# ECP5 18 kbit DP16KD blocks and the distributed RAM of its RAM-capable slices
DEVICE_RAM: dict[str, DeviceRam] = {
    "iCE40HX1K": DeviceRam(16, 4096),
    "iCE40UP5K": DeviceRam(30, 4096),
    "LFE5U-12F": DeviceRam(32, 18432, 97 * 1024),
    "LFE5U-25F": DeviceRam(56, 18432, 194 * 1024),
    "LFE5U-45F": DeviceRam(108, 18432, 351 * 1024),
    "LFE5U-85F": DeviceRam(208, 18432, 669 * 1024),
    # the ECP5-5G parts (ECPIX-5): the same block and distributed RAM as the non-5G ones
    "LFE5UM5G-45F": DeviceRam(108, 18432, 351 * 1024),
    "LFE5UM5G-85F": DeviceRam(208, 18432, 669 * 1024),
    # Gowin: 18 kbit B-SRAM blocks and the S-SRAM (RAM16SDP4) of the datasheets
    "GW2A-LV18PG256C8/I7": DeviceRam(46, 18432, 41472),
    "GW1NR-LV9QN88PC6/I5": DeviceRam(26, 18432, 17280),
}
_LISTED = 4  # tensors named in the refusal, largest first


class TooLargeForChip(ValueError):
    """The tensors of a graph need more on-chip RAM than the board's device has."""


def in_dram(cfg: HwConfig, tensor: str) -> bool:
    """``tensor`` lives in the board's DRAM under ``cfg`` (a top with line buffers places every
    tensor there but the ``onchip`` ones; their nodes keep a few lines, left out of the bound)."""
    return cfg.line_buffers and not cfg.memory.ideal and tensor not in cfg.onchip


def onchip_bits(graph: Graph, cfg: HwConfig) -> dict[str, int]:
    """Bits of on-chip memory each tensor of ``graph``'s top needs, largest first (tensors in
    DRAM: none)."""
    per: dict[str, int] = {}
    for tensor, depth, width in tensor_arrays(graph, cfg).values():
        if not in_dram(cfg, tensor):
            per[tensor] = per.get(tensor, 0) + depth * width
    return dict(sorted(per.items(), key=lambda kv: -kv[1]))


def dram_bytes(graph: Graph, cfg: HwConfig) -> dict[str, int]:
    """Bytes of DRAM each tensor placed there needs (its arrays at their capacities, each word
    in a power-of-two number of bytes, as the DRAM layout stores it), largest first."""
    per: dict[str, int] = {}
    for tensor, depth, width in tensor_arrays(graph, cfg).values():
        if in_dram(cfg, tensor):
            per[tensor] = per.get(tensor, 0) + depth * word_bytes(width)
    return dict(sorted(per.items(), key=lambda kv: -kv[1]))


def _mbit(bits: int) -> str:
    return f"{bits / 2**20:.2f} Mbit" if bits >= 2**20 else f"{bits / 1024:.1f} kbit"


def check_max_nnz(cfg: HwConfig, board: Board) -> None:
    """Raise :class:`TooLargeForChip` for a ``--max-nnz`` capacity of an on-chip tensor whose
    entries alone (a coordinate and a value word each) need more bits than ``board``'s device
    has, whatever the graph (a capacity above the tensor's size would otherwise be cut to it
    silently)."""
    ram = DEVICE_RAM.get(board.device)
    if ram is None:
        return
    for tensor, n in cfg.max_nnz:
        need = n * (cfg.cw + cfg.vw)
        if not in_dram(cfg, tensor) and need > ram.bits:
            raise TooLargeForChip(
                f"--max-nnz {tensor}={n}: {n:,} entries of {cfg.cw}-bit coordinates and {cfg.vw}-bit values "
                f"need {_mbit(need)}, more than the {board.name} ({board.device}) has ({_mbit(ram.bits)}: "
                f"{ram.describe()}); at most {ram.bits // (cfg.cw + cfg.vw):,}")


def check_fits(graph: Graph, cfg: HwConfig, board: Board, dram_size: int | None = None) -> None:
    """Raise :class:`TooLargeForChip` when ``graph``'s tensors cannot fit ``board``'s device
    (those in DRAM: its ``dram_size`` bytes)."""
    if dram_size is not None:
        per = dram_bytes(graph, cfg)
        if sum(per.values()) > dram_size:
            listed = "; ".join(f"{t} {b / 2**20:.1f} MB" for t, b in list(per.items())[:_LISTED])
            raise TooLargeForChip(
                f"graph {graph.name!r} does not fit the {board.name}'s DRAM: its tensors there need "
                f"{sum(per.values()) / 2**20:.1f} MB, the board has {dram_size / 2**20:.0f} MB; largest: "
                f"{listed}.  Bound sparse tensors with --max-nnz TENSOR=N, or run smaller data")
    ram = DEVICE_RAM.get(board.device)
    if ram is None:
        return  # a device without a RAM record: synthesis is the check
    per = onchip_bits(graph, cfg)
    need = sum(per.values())
    if need <= ram.bits:
        return
    arrays = tensor_arrays(graph, cfg)
    largest = []
    for tensor, bits in list(per.items())[:_LISTED]:
        parts = ", ".join(f"{region.split('.', 1)[1]} {depth:,}x{width}"
                          for region, (t, depth, width) in arrays.items() if t == tensor)
        largest.append(f"{tensor} {_mbit(bits)} ({parts})")
    more = f" and {len(per) - _LISTED} more" if len(per) > _LISTED else ""
    raise TooLargeForChip(
        f"graph {graph.name!r} does not fit the {board.name} ({board.device}): its tensors need "
        f"{_mbit(need)} of on-chip RAM, the device has {_mbit(ram.bits)} ({ram.describe()}); "
        f"largest: {'; '.join(largest)}{more}.  Bound sparse tensors with --max-nnz TENSOR=N, "
        f"or run smaller data" + ("" if not cfg.line_buffers else
                                  " (these tensors are kept on chip: --onchip or --dram-min-bytes)"))
