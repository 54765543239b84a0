"""The board top: a graph accelerator (:class:`hw.elaborate.GraphTop`) behind a UART host bridge.

:class:`BoardCore` is platform-independent (ports ``uart_rx``, ``uart_tx``, ``leds``), so it is
both what cocotb simulates and what :class:`BoardTop` places on a board's pins.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from amaranth.build import ResourceError
from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Elaboratable,
    Fragment,
    Instance,
    Module,
    Signal,
)
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from fuseflow.ir.numerics import Numerics
from fuseflow.ir.samml import Graph
from hw.elaborate import GraphTop, HwConfig, MemoryMap
from hw.litedram import DramGraphTop

from .uart import HostBridge, UARTRx, UARTTx

__all__ = [
    "DEFAULT_BAUD",
    "DRAM_BAUD",
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
# with DRAM the bridge runs at the controller's 50 MHz, which 2 Mbaud divides exactly (25 cycles
# a bit); the boards' USB-serial chips (FT231X on the ULX3S) carry it
DRAM_BAUD = 2_000_000


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
        "spacc_block_ram_min_dim": cfg.spacc_block_ram_min_dim,
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
        spacc_block_ram_min_dim=d.get("spacc_block_ram_min_dim"),
    )


def design_ident(top: GraphTop) -> int:
    """32-bit identity of the hardware built for ``top`` (graph structure + config).

    The bridge returns it for the ``I`` command so the host can refuse a board flashed with a
    different design.
    """
    if hasattr(top, "subs"):  # a model's graphs in one top (hw.dram_model.ModelTop)
        text = json.dumps(["model", [design_ident(s) for s in top.subs]])
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
    cfg = config_to_json(top.cfg)
    if top.cfg.line_buffers:  # tensors in DRAM: which, and under which controller
        cfg["dram"] = [top.dram_board.name, list(top.cfg.onchip)]
    text = json.dumps([top.graph.structure_hash(), cfg], sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def host_view(graph: Graph, cfg: HwConfig, dram: str | None = None) -> tuple[MemoryMap, int]:
    """What the host needs to drive a board built for ``graph`` (tensors in board ``dram``'s
    DRAM when given): its memory map and ident.

    The top is elaborated once (no Verilog) so Amaranth does not warn about an unused design.
    """
    if dram:
        top = DramGraphTop(graph, cfg, dram, sim=True)  # the same map and ident as the real PHY's
    else:
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
        waits = hasattr(top, "host_wait")  # tensors in DRAM (hw.litedram.DramGraphTop)
        aw = top.addr_width if hasattr(top, "subs") else top.mmap.addr_width  # a model's top: graph | local
        m.submodules.bridge = bridge = HostBridge(aw, self.ident, wait=waits)
        if waits:
            m.d.comb += bridge.host_wait.eq(top.host_wait)
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
        clock's timing constraint was raised to measure Fmax; with DRAM, the controller's clock
        (the PLL's output)."""
        if self.dram:
            return round(self.top.dram_board.sys_clk_hz / self.baud)
        return round((self.clock_hz or platform.default_clk_frequency) / self.baud)

    @property
    def dram(self) -> bool:
        """The top keeps its tensors in the board's DRAM (a real-PHY ``DramGraphTop``)."""
        return getattr(self.top, "sdram_pins", None) is not None

    def elaborate(self, platform):
        m = Module()
        if self.dram:
            _dram_board_io(m, platform, self.top)
        m.submodules.core = core = BoardCore(self.top, self.uart_divisor(platform))
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx_buf = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx_buf = io.Buffer("o", uart.tx)
        m.d.comb += [core.uart_rx.eq(rx_buf.i), tx_buf.o.eq(core.uart_tx)]
        for i, led in enumerate(_request_leds(platform, N_LEDS)):
            m.submodules[f"led_{i}"] = buf = io.Buffer("o", led)
            m.d.comb += buf.o.eq(core.leds[i])
        return m


def ecp5_pll(m: Module, clk_in, f_in: float, f_out: float):
    """An ECP5 ``EHXPLLL`` from ``clk_in`` (``f_in`` Hz) to ``f_out`` Hz on its ``CLKOP``, with
    the VCO in 400..800 MHz; returns ``(clock, locked)``.  Refused if no integer dividers give
    ``f_out`` within 0.1 %."""
    best = None
    for ref_div in range(1, 129):
        for fb_div in range(1, 81):
            for op_div in range(1, 129):
                vco = f_in / ref_div * fb_div * op_div
                out = vco / op_div
                if 400e6 <= vco <= 800e6 and abs(out - f_out) <= f_out * 1e-3:
                    cand = (abs(out - f_out), ref_div, fb_div, op_div)
                    best = min(best, cand) if best else cand
            if best:
                break
        if best:
            break
    if best is None:
        raise ValueError(f"ECP5 PLL: no dividers give {f_out / 1e6:g} MHz from {f_in / 1e6:g} MHz")
    _, ref_div, fb_div, op_div = best
    clk, locked = Signal(name="pll_clk"), Signal(name="pll_locked")
    m.submodules.pll = Instance(
        "EHXPLLL",
        a_FREQUENCY_PIN_CLKI=f"{f_in / 1e6:g}", a_FREQUENCY_PIN_CLKOP=f"{f_out / 1e6:g}",
        a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
        p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
        p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
        p_CLKI_DIV=ref_div, p_CLKFB_DIV=fb_div, p_CLKOP_DIV=op_div, p_CLKOP_CPHASE=op_div - 1,
        p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
        i_CLKI=clk_in, i_CLKFB=clk, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=0,
        i_PHASESTEP=0, i_PHASELOADREG=0, i_PLLWAKESYNC=0, i_ENCLKOP=0,
        o_CLKOP=clk, o_LOCK=locked)
    return clk, locked


def _dram_board_io(m: Module, platform, top) -> None:
    """The ``sync`` domain at the DRAM controller's clock (a PLL from the board's oscillator,
    held in reset until it locks) and the SDRAM's pins: the controller's outputs through output
    buffers, its data pins straight into the controller (its PHY has the tristate), and the
    SDRAM clock from a DDR output, inverted, so commands and data are sampled mid-cycle."""
    if top.dram_info.get("own_clock"):
        _ddr3_board_io(m, platform, top)
        return
    clk_res = platform.request(platform.default_clk, dir="-")
    m.submodules.clk_in = clk_buf = io.Buffer("i", clk_res)
    clk, locked = ecp5_pll(m, clk_buf.i, platform.default_clk_frequency, top.dram_board.sys_clk_hz)
    m.domains.sync = ClockDomain("sync")
    m.d.comb += ClockSignal("sync").eq(clk)
    m.submodules.reset_sync = ResetSynchronizer(~locked, domain="sync")
    # (no constraint on the PLL's output: nextpnr derives it from the oscillator's and the dividers)
    sd = platform.request("sdram", 0, dir="-")
    pins = top.sdram_pins
    outs = {"a": pins["a"], "ba": pins["ba"], "cs": ~pins["cs_n"], "we": ~pins["we_n"], "ras": ~pins["ras_n"],
            "cas": ~pins["cas_n"], "clk_en": pins["cke"], "dqm": pins["dm"]}
    for name, value in outs.items():
        m.submodules[f"sdram_{name}"] = buf = io.Buffer("o", getattr(sd, name))
        m.d.comb += buf.o.eq(value)
    m.submodules.sdram_clk = ck = io.DDRBuffer("o", sd.clk)
    m.d.comb += ck.o.eq(0b10)  # low after the rising edge, high after the falling one
    top.sdram_dq = sd.dq.io
    platform.add_file("litedram_core.v", top.dram_verilog)


# the ECPIX-5's ddr3 resource (amaranth-boards) by the core's pin names (LiteDRAM's)
_DDR3_PINS = {"sdram_clk_p": "clk", "sdram_a": "a", "sdram_ba": "ba", "sdram_cke": "clk_en", "sdram_ras_n": "ras",
              "sdram_cas_n": "cas", "sdram_we_n": "we", "sdram_odt": "odt", "sdram_dm": "dm", "sdram_dq": "dq",
              "sdram_dqs_p": "dqs"}


def _ddr3_board_io(m: Module, platform, top) -> None:
    """The ``sync`` domain and the DDR3's pins of a controller that makes its own clocks (the
    real ECP5DDRPHY, ``hw.litedram``): the core takes the oscillator's pin and drives the domain's
    clock and reset; every DDR3 pin goes straight to the core (its DDR output and input cells and
    tristates sit at the pads), the active-low ones as the pins are (the core's ``*_n``), the
    differential clock and strobes by their true pin (the ECP5 drives the pair from it)."""
    m.domains.sync = ClockDomain("sync")
    clk = platform.request(platform.default_clk, dir="-")
    d = platform.request("ddr3", 0, dir="-")
    pins = {"clk_in": clk.io}
    for core, res in _DDR3_PINS.items():
        port = getattr(d, res)
        pins[core] = port.p if hasattr(port, "p") else port.io
    top.sdram_dq = pins
    platform.add_file("litedram_core.v", top.dram_verilog)


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
