"""fpga: synthesis with yosys/nextpnr (YoWASP) for open FPGAs, reports, board tops and flashing.

* :func:`synthesize` — any :class:`hw.elaborate.GraphTop` on a board (:data:`BOARDS`) ->
  bitstream + :class:`SynthReport` (LUT / FF / BRAM / DSP, Fmax, critical path);
* :data:`FAMILIES` — one :class:`Family` record per FPGA family (tools, resources, programmer,
  clock goal, family-dependent defaults), which boards point at;
* :class:`BoardTop` / :class:`BoardCore` — the accelerator behind a UART host bridge with LEDs;
* :func:`run_on_board` over a :class:`ByteTransport` (:class:`SerialTransport` on hardware, the
  cocotb UART model in :func:`simulate_board`) — the one host driver for both;
* :func:`flash_command` / :func:`flash` — iceprog / openFPGALoader / dfu-util.
"""

from .board_sim import simulate_board
from .board_top import DEFAULT_BAUD, BoardCore, BoardTop, design_ident, host_view
from .boards import BOARDS, Board, get_board
from .families import FAMILIES, Family
from .flash import FlashError, flash, flash_command
from .host import BoardLink, BoardResult, ByteTransport, LinkError, SerialTransport, run_on_board
from .synth import DoesNotFit, ResourceUse, SynthError, SynthReport, ToolMissing, synthesize
from .uart import HostBridge, UARTRx, UARTTx

__all__ = [
    "BOARDS",
    "DEFAULT_BAUD",
    "FAMILIES",
    "Board",
    "BoardCore",
    "BoardLink",
    "BoardResult",
    "BoardTop",
    "ByteTransport",
    "DoesNotFit",
    "Family",
    "FlashError",
    "HostBridge",
    "LinkError",
    "ResourceUse",
    "SerialTransport",
    "SynthError",
    "SynthReport",
    "ToolMissing",
    "UARTRx",
    "UARTTx",
    "design_ident",
    "flash",
    "flash_command",
    "get_board",
    "host_view",
    "run_on_board",
    "simulate_board",
    "synthesize",
]

