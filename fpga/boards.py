"""Boards the flow knows: amaranth-boards platform, FPGA family record and programmer.

Every board needs a UART to the host.  Boards whose amaranth-boards platform has no ``uart``
resource get one on header pins named here (a USB-serial adapter goes there).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from amaranth.build import Attrs, Clock, Resource
from amaranth_boards.resources import UARTResource

from .families import ECP5, GOWIN, ICE40, Family, Programmer

__all__ = ["BOARDS", "Board", "get_board"]


@dataclass(frozen=True)
class Board:
    name: str
    platform: str  # "module:Class" in amaranth_boards
    family: Family
    device: str  # for reports, e.g. "iCE40UP5K", "LFE5U-85F"
    programmer: Programmer | None = None  # None: the family's
    uart_pins: tuple[str, str, str, int] | None = (
        None  # (rx, tx, connector, number) when not in the platform
    )
    # tools the board's build script runs besides the family's: (tool, how to install it)
    extra_tools: tuple[tuple[str, str], ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if self.programmer is None:
            object.__setattr__(self, "programmer", self.family.programmer)

    @property
    def bitstream(self) -> str:
        """File name suffix of the bitstream in the build dir."""
        return self.family.bitstream

    def platform_class(self) -> type:
        mod, cls = self.platform.split(":")
        return getattr(importlib.import_module(f"amaranth_boards.{mod}"), cls)

    def make_platform(self, clock_hz: float | None = None):
        """A platform instance; ``clock_hz`` re-constrains the default clock (the P&R target)."""
        base = self.platform_class()
        attrs: dict = dict(self.family.platform_attrs)
        if clock_hz is not None:
            resources = []
            for r in base.resources:
                if r.name == base.default_clk and r.number == 0:
                    r = Resource(r.name, r.number, *r.ios, Clock(clock_hz), Attrs(**r.attrs))
                resources.append(r)
            attrs["resources"] = resources
        cls = type(base.__name__, (base,), attrs) if attrs else base
        platform = cls(**dict(self.family.platform_options))
        if self.uart_pins is not None:
            rx, tx, conn, number = self.uart_pins
            platform.add_resources(
                [
                    UARTResource(
                        0, rx=rx, tx=tx, conn=(conn, number), attrs=Attrs(IO_TYPE="LVCMOS33")
                    )
                ]
            )
        return platform


_ULX3S = {
    "family": ECP5,
    "programmer": Programmer(("openFPGALoader", "-b", "ulx3s", "-m"), "OPENFPGALOADER"),
}
_ORANGECRAB = {
    "family": ECP5,
    "programmer": Programmer(("dfu-util", "-a", "0", "-D"), "DFU_UTIL"),
    "uart_pins": ("0", "1", "io", 0),
    "extra_tools": (
        ("dfu-suffix", "install dfu-util (Debian: apt-get install dfu-util), which ships dfu-suffix"),
    ),
    "note": "UART on feather pins 0 (RX) / 1 (TX): attach a 3.3 V USB-serial adapter",
}
# ECPIX-5: the FT2232's second channel is the UART; openFPGALoader knows the board's JTAG cable
_ECPIX5 = {
    "family": ECP5,
    "programmer": Programmer(("openFPGALoader", "-b", "ecpix5"), "OPENFPGALOADER"),
}
_ICE40 = {"family": ICE40}
# Sipeed's Tang boards: the on-board USB bridge (BL702 / BL616) is the JTAG cable and the UART
_TANG_PRIMER_20K = {"family": GOWIN,
                    "programmer": Programmer(("openFPGALoader", "-b", "tangprimer20k"), "OPENFPGALOADER")}
_TANG_NANO_9K = {"family": GOWIN,
                 "programmer": Programmer(("openFPGALoader", "-b", "tangnano9k"), "OPENFPGALOADER")}

BOARDS: dict[str, Board] = {
    b.name: b
    for b in [
        Board("icebreaker", "icebreaker:ICEBreakerPlatform", device="iCE40UP5K", **_ICE40),
        Board("icestick", "icestick:ICEStickPlatform", device="iCE40HX1K", **_ICE40),
        Board("ulx3s-12f", "ulx3s:ULX3S_12F_Platform", device="LFE5U-12F", **_ULX3S),
        Board("ulx3s-25f", "ulx3s:ULX3S_25F_Platform", device="LFE5U-25F", **_ULX3S),
        Board("ulx3s-45f", "ulx3s:ULX3S_45F_Platform", device="LFE5U-45F", **_ULX3S),
        Board("ulx3s-85f", "ulx3s:ULX3S_85F_Platform", device="LFE5U-85F", **_ULX3S),
        Board("ecpix5-45f", "ecpix5:ECPIX545Platform", device="LFE5UM5G-45F", **_ECPIX5),
        Board("ecpix5-85f", "ecpix5:ECPIX585Platform", device="LFE5UM5G-85F", **_ECPIX5),
        Board("tang_primer_20k", "tang_primer_20k:TangPrimer20kPlatform", device="GW2A-LV18PG256C8/I7",
              **_TANG_PRIMER_20K),
        Board("tang_nano_9k", "tang_nano_9k:TangNano9kPlatform", device="GW1NR-LV9QN88PC6/I5",
              **_TANG_NANO_9K),
        Board(
            "orangecrab-25f",
            "orangecrab_r0_2:OrangeCrabR0_2_25FPlatform",
            device="LFE5U-25F",
            **_ORANGECRAB,
        ),
        Board(
            "orangecrab-85f",
            "orangecrab_r0_2:OrangeCrabR0_2_85FPlatform",
            device="LFE5U-85F",
            **_ORANGECRAB,
        ),
    ]
}


def get_board(name: str) -> Board:
    try:
        return BOARDS[name]
    except KeyError:
        raise KeyError(f"unknown board {name!r}; known boards: {', '.join(BOARDS)}") from None
