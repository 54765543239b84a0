"""The board top: a graph accelerator (:class:`hw.elaborate.GraphTop`) behind a UART host bridge.

:class:`BoardCore` is platform-independent (ports ``uart_rx``, ``uart_tx``, ``leds``), so it is
both what cocotb simulates and what :class:`BoardTop` places on a board's pins.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from amaranth.build import ResourceError
from amaranth.hdl import Cat, Elaboratable, Fragment, Module, Signal
from amaranth.lib import io, wiring
from amaranth.lib.wiring import In, Out

from fuseflow.ir.numerics import Numerics
from fuseflow.ir.samml import Graph
from hw.elaborate import GraphTop, HwConfig, MemoryMap

from .uart import HostBridge, UARTRx, UARTTx

__all__ = [
    "DEFAULT_BAUD",
    "N_LEDS",
    "BoardCore",
    "BoardTop",
    "config_from_json",
    "config_to_json",
    "design_ident",
    "host_view",
]

N_LEDS = 3  # running, done, UART activity
DEFAULT_BAUD = 115_200


def config_to_json(cfg: HwConfig) -> dict[str, Any]:
    """:class:`HwConfig` as JSON (numerics as text, e.g. ``"q16.16"``)."""
    return {
        "cw": cfg.cw,
        "vw": cfg.vw,
        "fifo_depth": cfg.fifo_depth,
        "max_nnz": [[t, n] for t, n in cfg.max_nnz],
        "numerics": None if cfg.numerics is None else str(cfg.numerics),
        "ram_fifo_depth": cfg.ram_fifo_depth,
        "spacc_block_ram": cfg.spacc_block_ram,
    }


def config_from_json(d: dict[str, Any]) -> HwConfig:
    num = d.get("numerics")
    return HwConfig(
        cw=int(d["cw"]),
        vw=int(d["vw"]),
        fifo_depth=d["fifo_depth"],
        max_nnz=tuple((str(t), int(n)) for t, n in d["max_nnz"]),
        numerics=None if num is None else Numerics.parse(num),
        ram_fifo_depth=d.get("ram_fifo_depth"),
        spacc_block_ram=bool(d.get("spacc_block_ram", False)),
    )


def design_ident(top: GraphTop) -> int:
    """32-bit identity of the hardware built for ``top`` (graph structure + config).

    The bridge returns it for the ``I`` command so the host can refuse a board flashed with a
    different design.
    """
    text = json.dumps([top.graph.structure_hash(), config_to_json(top.cfg)], sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def host_view(graph: Graph, cfg: HwConfig) -> tuple[MemoryMap, int]:
    """What the host needs to drive a board built for ``graph``: its memory map and ident.

    The top is elaborated once (no Verilog) so Amaranth does not warn about an unused design.
    """
    top = GraphTop(graph, cfg)
    Fragment.get(top, None)
    return top.mmap, design_ident(top)


class BoardCore(wiring.Component):
    """GraphTop + UART host bridge + status LEDs.

    ``divisor`` is clock cycles per UART bit (clock frequency / baud rate).  LEDs:
    ``leds[0]`` the graph is running, ``leds[1]`` it is done, ``leds[2]`` toggles per command.
    """

    def __init__(self, top: GraphTop, divisor: int) -> None:
        self.top, self.divisor = top, divisor
        self.ident = design_ident(top)
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "leds": Out(N_LEDS)})

    def elaborate(self, platform):
        m = Module()
        top = self.top
        m.submodules.accel = top
        m.submodules.rx = rx = UARTRx(self.divisor)
        m.submodules.tx = tx = UARTTx(self.divisor)
        m.submodules.bridge = bridge = HostBridge(top.mmap.addr_width, self.ident)
        wiring.connect(m, bridge.tx, tx.i)
        m.d.comb += [
            rx.rx.eq(self.uart_rx),
            self.uart_tx.eq(tx.tx),
            bridge.rx_data.eq(rx.data),
            bridge.rx_valid.eq(rx.valid),
            top.host_addr.eq(bridge.host_addr),
            top.host_wdata.eq(bridge.host_wdata),
            top.host_we.eq(bridge.host_we),
        ]
        m.d.sync += bridge.host_rdata.eq(top.host_rdata)  # read data registered (bridge waits)
        blink = Signal()
        with m.If(bridge.activity):
            m.d.sync += blink.eq(~blink)
        m.d.comb += self.leds.eq(Cat(top.running & ~top.done, top.done, blink))
        return m


class BoardTop(Elaboratable):
    """:class:`BoardCore` on a board: UART resource ``uart`` 0 and up to three LEDs.

    ``clock_hz`` is the board clock the UART divisor is computed from (default: the platform's
    clock constraint).  The LEDs are taken in order from the board's ``led`` resources, then ``led_g``, ``led_r``,
    ``led_b``, then the colours of ``rgb_led`` 0; a board with fewer LEDs shows fewer status bits.
    """

    LED_NAMES = ("led", "led_g", "led_r", "led_b")

    def __init__(
        self, top: GraphTop, baud: int = DEFAULT_BAUD, clock_hz: float | None = None
    ) -> None:
        self.top, self.baud, self.clock_hz = top, baud, clock_hz

    def uart_divisor(self, platform) -> int:
        """Clock cycles per UART bit.  The oscillator's real frequency sets it, even when the
        clock's timing constraint was raised to measure Fmax."""
        return round((self.clock_hz or platform.default_clk_frequency) / self.baud)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = BoardCore(self.top, self.uart_divisor(platform))
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx_buf = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx_buf = io.Buffer("o", uart.tx)
        m.d.comb += [core.uart_rx.eq(rx_buf.i), tx_buf.o.eq(core.uart_tx)]
        for i, led in enumerate(_request_leds(platform, N_LEDS)):
            m.submodules[f"led_{i}"] = buf = io.Buffer("o", led)
            m.d.comb += buf.o.eq(core.leds[i])
        return m


def _request_leds(platform, n: int) -> list:
    """I/O ports for up to ``n`` status LEDs."""
    leds = []
    for name in BoardTop.LED_NAMES:
        number = 0
        while len(leds) < n:
            try:
                leds.append(platform.request(name, number, dir="-"))
            except ResourceError:
                break
            number += 1
    if len(leds) < n:
        try:
            rgb = platform.request("rgb_led", 0, dir="-")
        except ResourceError:
            return leds
        leds += [rgb.g, rgb.r, rgb.b][: n - len(leds)]
    return leds
