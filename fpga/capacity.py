"""Will a graph's tensors fit on the chip?  A check made before anything is elaborated.

A board top keeps every tensor array in on-chip RAM (block RAM, and on ECP5 the LUTs'
distributed RAM).  The arrays' sizes follow from the tensor shapes and formats and the
``--max-nnz`` bounds alone (:func:`hw.elaborate.tensor_arrays`), so a design whose tensors need
more bits than the device's RAM holds is refused at once, naming the tensors that need them,
instead of after minutes of elaboration and synthesis.  The test is a lower bound on the need
(FIFOs and accumulators take RAM too; rounding to block shapes is left out) against an upper
bound on the supply (every block and every distributed-RAM bit), so it never refuses a design
that fits; synthesis still reports the exact use (:class:`fpga.synth.DoesNotFit`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fuseflow.ir.samml import Graph
from hw.elaborate import HwConfig, tensor_arrays

from .boards import Board

__all__ = ["DEVICE_RAM", "DeviceRam", "TooLargeForChip", "check_fits", "onchip_bits"]


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
}
_LISTED = 4  # tensors named in the refusal, largest first


class TooLargeForChip(ValueError):
    """The tensors of a graph need more on-chip RAM than the board's device has."""


def onchip_bits(graph: Graph, cfg: HwConfig) -> dict[str, int]:
    """Bits of on-chip memory each tensor of ``graph``'s top needs, largest first."""
    per: dict[str, int] = {}
    for tensor, depth, width in tensor_arrays(graph, cfg).values():
        per[tensor] = per.get(tensor, 0) + depth * width
    return dict(sorted(per.items(), key=lambda kv: -kv[1]))


def _mbit(bits: int) -> str:
    return f"{bits / 2**20:.2f} Mbit" if bits >= 2**20 else f"{bits / 1024:.1f} kbit"


def check_fits(graph: Graph, cfg: HwConfig, board: Board) -> None:
    """Raise :class:`TooLargeForChip` when ``graph``'s tensors cannot fit ``board``'s device."""
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
        f"or run smaller data")
