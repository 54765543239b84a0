"""Off-chip DRAM through a LiteDRAM controller (issue 34, first slice; ``docs/dram.md``).

The controller is generated at build time from LiteDRAM's Python API (``litedram``, ``litex``
and ``migen``: the ``fpga`` extra): a module definition per board (:data:`DRAM_BOARDS`), the
board's PHY (``GENSDRPHY`` for the ULX3S SDR SDRAM) or, for simulation, LiteDRAM's
``SDRAMPHYModel`` given the real PHY's settings, ``LiteDRAMCore`` with one native user port,
and a hardware init sequencer (:class:`_InitSequencer`): a ROM of the mode-register sequence
LiteDRAM computes, played on the DFI injector's external port from reset, so no CPU is needed.
The user port is gated by ``init_done``.  LiteX's Verilog backend converts it to one Verilog
module, which :class:`LiteDRAMCore` instantiates (``amaranth.hdl.Instance``).

The graph's memory ports (``hw.dram``'s read and write gates, two line tags each with
next-line prefetch) are served by :class:`LineEngine`: the project's own arbiter (round robin,
one line at a time) behind the single native port.  A read line is fetched from DRAM and
written into the node's memory before the gate sees it resident; a written line is read from
the writer's memory and written back to DRAM.  The host loads input arrays into DRAM through
the same port (:class:`DramGraphTop`); the DRAM memory map (:func:`dram_layout`) gives each
off-chip array its base address.

In this slice a node's memory behind its gate is still array-sized (it is filled only from
DRAM, line by line, and is the gate's line storage); shrinking it to the two line buffers is
left for later (``docs/dram.md``).
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from fuseflow.ir.memory import MemoryModel, MemPort, word_bytes

from .base import MemRead, MemWrite, addr_bits
from .dram import CYCLE_WIDTH, SLOT_WIDTH, MemBus, bus_link, line_width, round_robin
from .elaborate import GraphTop, tensor_capacities

__all__ = [
    "DRAM_BOARDS",
    "DramAllocator",
    "DramBoard",
    "DramGraphTop",
    "LineEngine",
    "LiteDRAMCore",
    "NativeSlice",
    "connect_native",
    "dram_layout",
    "dram_memory_model",
    "dram_onchip",
    "dram_placement",
    "generate_core",
    "placement_report",
    "sdram_pins",
]


# --------------------------------------------------------------------------- boards
@dataclass(frozen=True)
class DramBoard:
    """A board's DRAM: the LiteDRAM module class, the PHY, the controller clock and rate, and
    the line (burst) size the project's arbiter moves.  ``port_bits``: the width of the user
    port the project's engine sees (None: the controller's native width); a narrower port goes
    through LiteDRAM's own port converter (``crossbar.get_port(data_width=...)``), which packs
    consecutive user words into one native word."""

    name: str
    module: str  # class name in litedram.modules
    phy: str  # "GENSDRPHY" (SDR), "ECP5DDRPHY" (DDR3)
    sys_clk_hz: float
    rate: str  # "1:1": controller clock = DRAM clock; "1:2": DRAM clock = 2 x controller clock
    line_bytes: int = 32
    boards: tuple[str, ...] = ()  # fpga/boards.py names that carry it
    port_bits: int | None = None
    kind: str = "sdram"  # the memory's name in rtl --memory <board>-<kind> and the preset's
    # a register slice on the user port (NativeSlice): a cycle more each way, no combinational
    # path between the controller and the graphs' line engines (the ULX3S's whole-model top)
    registered_port: bool = False

    @property
    def memory_name(self) -> str:
        """``rtl --memory`` spelling and the cycle-model preset's name (``ulx3s-sdram``)."""
        return f"{self.name}-{self.kind}"


DRAM_BOARDS: dict[str, DramBoard] = {
    # ULX3S: 256 Mbit x16 SDR SDRAM (4 banks x 8192 rows x 512 columns = 32 MB), controller at
    # 50 MHz, SDRAM clock = controller clock
    "ulx3s": DramBoard("ulx3s", "MT48LC16M16", "GENSDRPHY", 50e6, "1:1", 32,
                       ("ulx3s-12f", "ulx3s-25f", "ulx3s-45f", "ulx3s-85f"), registered_port=True),
    # ECPIX-5: 4 Gbit x16 DDR3 (MT41K256M16: 8 banks x 32768 rows x 1024 columns = 512 MB; the
    # board's ddr3 resource has 15 address, 3 bank and 16 data bits), ECP5DDRPHY at 1:2: the
    # controller at 50 MHz, the DDR3 clock at 100 MHz; the native word is one BL8 burst (128
    # bits), the engine's port 16 bits through LiteDRAM's converter (which keeps one burst in
    # flight: a register slice would add two cycles to every burst, so the port stays direct)
    "ecpix5": DramBoard("ecpix5", "MT41K256M16", "ECP5DDRPHY", 50e6, "1:2", 32,
                        ("ecpix5-45f", "ecpix5-85f"), port_bits=16, kind="ddr3"),
}


def dram_board(name: str) -> DramBoard:
    """The DRAM of board or DRAM name ``name`` (``ulx3s``, ``ulx3s-85f``)."""
    if name in DRAM_BOARDS:
        return DRAM_BOARDS[name]
    for b in DRAM_BOARDS.values():
        if name in b.boards:
            return b
    raise ValueError(f"no LiteDRAM DRAM for {name!r}; DRAM boards: "
                     f"{', '.join(sorted({*DRAM_BOARDS, *(n for b in DRAM_BOARDS.values() for n in b.boards)}))}")


def _module(board: DramBoard):
    from litedram import modules as ld_modules
    return getattr(ld_modules, board.module)(board.sys_clk_hz, board.rate)


_PHYS = ("GENSDRPHY", "ECP5DDRPHY")


def _dram_pads(board: DramBoard, module):
    """A migen record of the DRAM's pins as the board's PHY names them."""
    from migen.genlib.record import Record
    g = module.geom_settings
    if board.phy == "GENSDRPHY":
        return Record([("a", g.addressbits), ("ba", g.bankbits), ("cs_n", 1), ("cke", 1), ("ras_n", 1),
                       ("cas_n", 1), ("we_n", 1), ("dm", 2), ("dq", 16)], name="sdram")
    if board.phy == "ECP5DDRPHY":  # x16 DDR3 (no cs_n, reset_n: the ECPIX-5 ties them on the board)
        return Record([("clk_p", 1), ("a", g.addressbits), ("ba", g.bankbits), ("cke", 1), ("ras_n", 1),
                       ("cas_n", 1), ("we_n", 1), ("odt", 1), ("dm", 2), ("dq", 16), ("dqs_p", 2)],
                      name="sdram")
    raise ValueError(f"{board.name}: PHY {board.phy!r} is not supported (supported: {', '.join(_PHYS)})")


def _make_phy(board: DramBoard, pads):
    if board.phy == "GENSDRPHY":
        from litedram.phy.gensdrphy import GENSDRPHY
        return GENSDRPHY(pads, board.sys_clk_hz)
    if board.phy == "ECP5DDRPHY":
        from litedram.phy.ecp5ddrphy import ECP5DDRPHY
        return ECP5DDRPHY(pads, sys_clk_freq=board.sys_clk_hz)
    raise ValueError(f"{board.name}: PHY {board.phy!r} is not supported (supported: {', '.join(_PHYS)})")


def _phy_settings(board: DramBoard, module):
    """The real PHY's settings (the PHY built on throwaway pads): the simulation model must get
    these, not LiteDRAM's generic model settings (their SDR read latency differs)."""
    return _make_phy(board, _dram_pads(board, module)).settings


# --------------------------------------------------------------------------- timings
@functools.cache
def dram_timings(name: str) -> dict[str, Any]:
    """The board's DRAM parameters in controller cycles, from LiteDRAM's module definition and
    PHY settings: geometry, tRCD, tRP, tWR, tWTR, tREFI, tRFC, tCCD, CL, read/write latency;
    ``word_bytes`` is the user port's word (the engine's), ``native_bytes`` the controller's
    (one burst: nphases x the DFI data width)."""
    board = dram_board(name)
    module = _module(board)
    ps = _phy_settings(board, module)
    ts, gs = module.timing_settings, module.geom_settings
    native_bytes = ps.nphases * ps.dfi_databits // 8  # the controller's word
    word_bytes = (board.port_bits or native_bytes * 8) // 8  # the user port's (the engine's)
    return {"board": board.name, "module": board.module, "memtype": module.memtype, "phy": board.phy,
            "rate": board.rate, "sys_clk_mhz": board.sys_clk_hz / 1e6, "banks": module.nbanks,
            "rows": module.nrows, "cols": module.ncols, "bus_bits": ps.databits, "word_bytes": word_bytes,
            "native_bytes": native_bytes, "nphases": ps.nphases,
            "row_bytes": module.ncols * ps.databits // 8,
            "size_bytes": module.nbanks * module.nrows * module.ncols * ps.databits // 8,
            "cl": ps.cl, "read_latency": ps.read_latency, "write_latency": ps.write_latency,
            "tRCD": ts.tRCD, "tRP": ts.tRP, "tWR": ts.tWR, "tWTR": ts.tWTR, "tREFI": ts.tREFI,
            "tRFC": ts.tRFC, "tCCD": ts.tCCD or 1, "addressbits": gs.addressbits,
            "colbits": gs.colbits, "bankbits": gs.bankbits, "rowbits": gs.rowbits,
            "line_bytes": board.line_bytes, "registered_port": board.registered_port}


# The preset terms fitted to the RTL with the real controller (rtl_sim.dram_correlate: the fit
# on all measured kernels; the errors it reports are each on a kernel the fit did not see).
DRAM_FITS: dict[str, dict[str, float]] = {
    "ulx3s": {"latency": 4, "bytes_per_cycle": 1.6, "t_turn": 8, "t_switch": 2},
    # the 16-bit port behind LiteDRAM's converter: one burst in flight (docs/dram.md)
    "ecpix5": {"latency": 4, "bytes_per_cycle": 0.5, "t_turn": 0, "t_switch": 4},
}


def dram_memory_model(name: str, *, fit: dict[str, float] | None = None, fitted: bool = True) -> MemoryModel:
    """The cycle model's memory preset for board ``name``'s LiteDRAM controller behind
    :class:`LineEngine` (``docs/dram.md``).  Every figure comes from :func:`dram_timings`:

    * ``bytes_per_cycle``: one user-port word per cycle (``tCCD`` 1 on SDR; on DDR3 a 128-bit
      burst every tCCD = 2 cycles carries more than the 16-bit port takes);
    * ``burst_bytes``: the engine's line; ``banks`` and ``row_bytes`` the module's;
    * ``t_cl`` = CL, ``t_rcd`` = tRCD + 1, ``t_rp`` = tRP (the controller's activate and
      precharge as the user port sees them);
    * ``latency``: the controller pipeline (read latency of the PHY + 3: lookahead, command
      buffer, CAS issue) less CL, plus the engine's own cycles (grant, last fill write to the
      gate's resident flag: 3), plus the refresh share: a line meets a refresh (tRFC + tRP + 6
      cycles lost) once in tREFI / line cycles.

    With ``fitted`` (default) the terms of :data:`DRAM_FITS` (``latency``, ``bytes_per_cycle``,
    the turnaround ``t_turn`` and bank switch ``t_switch``) replace the derived ones; ``fit``
    overrides fields by name after that."""
    t = dram_timings(name)
    wb = t["word_bytes"]
    line = t["line_bytes"]
    words = line // wb
    # a user word per cycle, unless the controller's words (one per tCCD) carry fewer bytes
    bpc = min(float(wb), t["native_bytes"] / t["tCCD"])
    refresh_stall = t["tRFC"] + t["tRP"] + 6
    per_line = round(words * wb / bpc) + t["read_latency"] + 3 + 3
    refresh_share = round(refresh_stall * per_line / t["tREFI"])
    latency = t["read_latency"] + 3 - t["cl"] + 3 + refresh_share
    m = MemoryModel(dram_board(name).memory_name, bytes_per_cycle=bpc, burst_bytes=line,
                    latency=latency, t_cl=t["cl"], t_rcd=t["tRCD"] + 1, t_rp=t["tRP"], banks=t["banks"],
                    row_bytes=t["row_bytes"], policy="open", clock_mhz=t["sys_clk_mhz"])
    if fitted:
        m = replace(m, **DRAM_FITS.get(t["board"], {}))
    return replace(m, **fit) if fit else m


# --------------------------------------------------------------------------- generation
_CMD_BITS = {"DFII_COMMAND_CS": "cs", "DFII_COMMAND_WE": "we", "DFII_COMMAND_CAS": "cas",
             "DFII_COMMAND_RAS": "ras"}
_CTL_BITS = {"DFII_CONTROL_CKE": "cke", "DFII_CONTROL_ODT": "odt", "DFII_CONTROL_RESET_N": "reset_n"}


# The init sequence's minimum waits per memory type: ``power_us`` before the first control step
# (the pins held with CKE low and, on DDR3, RESET# low: JEDEC's 200 us), ``control_us`` after
# each control step (SDR: 200 us power-up with CKE; DDR3: 500 us from RESET# high to CKE high,
# and as long again before the first mode register, well above tXPR), ``cmd_cycles`` after each
# command (tRP, tRFC, tMRD on SDR; DDR3's tMOD and the ZQ calibration's tZQinit of 512 DRAM
# clocks, 256 controller cycles at 1:2, with a margin).
INIT_WAITS: dict[str, dict[str, float]] = {
    "SDR": {"power_us": 10, "control_us": 200, "cmd_cycles": 64},
    "DDR3": {"power_us": 200, "control_us": 500, "cmd_cycles": 512},
}


def init_steps(phy_settings, timing_settings, sys_clk_hz: float, *, min_gap: int | None = None) -> list[dict]:
    """LiteDRAM's init sequence as sequencer steps ``{ctl, cmd, address, bank, wait}``, with the
    memory type's minimum waits (:data:`INIT_WAITS`; ``min_gap`` overrides the command gap):
    a first step with every control pin low, then LiteDRAM's control steps and commands."""
    from litedram.init import get_sdram_phy_init_sequence
    memtype = phy_settings.memtype
    if memtype not in INIT_WAITS:
        raise ValueError(f"init sequence: memory type {memtype!r} has no minimum waits "
                         f"(known: {', '.join(INIT_WAITS)})")
    waits = INIT_WAITS[memtype]
    gap = waits["cmd_cycles"] if min_gap is None else min_gap
    seq, _ = get_sdram_phy_init_sequence(phy_settings, timing_settings)
    us = lambda t: math.ceil(t * 1e-6 * sys_clk_hz)
    first = "power-up: CKE low" + (", RESET# low" if memtype != "SDR" else "")
    steps = [{"comment": first, "ctl": {"cke": 0, "odt": 0, "reset_n": 0}, "cmd": None,
              "address": 0, "bank": 0, "wait": us(waits["power_us"])}]
    ctl = dict(steps[0]["ctl"])
    for comment, a, ba, cmd, delay in seq:
        names = [n.strip() for n in cmd.split("|")]
        if names[0].startswith("DFII_CONTROL"):
            ctl = {k: int(any(_CTL_BITS.get(n) == k for n in names)) for k in ("cke", "odt", "reset_n")}
            steps.append({"comment": comment, "ctl": dict(ctl), "cmd": None, "address": a, "bank": ba,
                          "wait": max(delay, us(waits["control_us"]))})
        else:
            c = {k: int(any(_CMD_BITS.get(n) == k for n in names)) for k in ("cs", "we", "cas", "ras")}
            steps.append({"comment": comment, "ctl": dict(ctl), "cmd": c, "address": a, "bank": ba,
                          "wait": max(delay, gap)})
    return steps


def _init_sequencer(dfi, steps: list[dict]):
    """A migen module playing ``steps`` on ``dfi`` (the DFI injector's ``ext_dfi``) from reset;
    ``sel`` (to ``ext_dfi_sel``) is 1 until the last wait has passed, then ``done`` rises and
    the controller owns the DFI.  Between commands every phase carries a NOP."""
    from migen import Case, If, Module, Replicate
    from migen import Signal as MSignal

    class _InitSequencer(Module):
        def __init__(self):
            self.done = MSignal()
            self.sel = MSignal(reset=1)
            n = len(steps)
            idx = MSignal(max=n + 1)
            cnt = MSignal(max=max(s["wait"] for s in steps) + 2)
            issue = MSignal()
            cke, odt, reset_n = MSignal(), MSignal(), MSignal()
            cs, we, cas, ras = MSignal(), MSignal(), MSignal(), MSignal()
            addr = MSignal(len(dfi.phases[0].address))
            bank = MSignal(len(dfi.phases[0].bank))
            cases = {}
            for i, s in enumerate(steps):
                c = s["cmd"] or {"cs": 0, "we": 0, "cas": 0, "ras": 0}
                cases[i] = [cke.eq(s["ctl"]["cke"]), odt.eq(s["ctl"]["odt"]), reset_n.eq(s["ctl"]["reset_n"]),
                            cs.eq(c["cs"]), we.eq(c["we"]), cas.eq(c["cas"]), ras.eq(c["ras"]),
                            addr.eq(s["address"]), bank.eq(s["bank"]), issue.eq(s["cmd"] is not None),
                            cnt.eq(s["wait"])]
            self.sync += [
                issue.eq(0),
                If(~self.done,
                   If(cnt == 0,
                      If(idx == n, self.done.eq(1), self.sel.eq(0)
                         ).Else(Case(idx, cases), idx.eq(idx + 1))
                      ).Else(cnt.eq(cnt - 1)))]
            for p, phase in enumerate(dfi.phases):
                nr = len(phase.cs_n)
                on = issue if p == 0 else 0
                self.comb += [phase.cs_n.eq(Replicate(~(on & cs), nr)), phase.we_n.eq(~(on & we)),
                              phase.cas_n.eq(~(on & cas)), phase.ras_n.eq(~(on & ras)),
                              phase.address.eq(addr), phase.bank.eq(bank), phase.cke.eq(Replicate(cke, nr)),
                              phase.wrdata_en.eq(0), phase.rddata_en.eq(0), phase.wrdata.eq(0),
                              phase.wrdata_mask.eq(0)]
                if hasattr(phase, "odt"):
                    self.comb += phase.odt.eq(Replicate(odt, len(phase.odt)))
                if hasattr(phase, "reset_n"):
                    self.comb += phase.reset_n.eq(reset_n)

    return _InitSequencer()


def level_pattern(lanes: int, words: int = 8) -> list[int]:
    """The read-leveling test burst: ``words`` user words (one BL8 burst of a x16 part: a word
    a beat, lane ``l`` its byte ``l``), every byte of a lane different, so a read a beat early
    or late (a wrong bitslip) or a garbled capture (a wrong delay) does not compare equal."""
    return [sum((((0x35 * (i + 1) + 0x5A * lane) ^ (0x0F * lane)) & 0xFF) << (8 * lane) for lane in range(lanes))
            for i in range(words)]


def _phy_leveling_controls(top, phy, sim: bool) -> dict:
    """The PHY's read-leveling CSRs as signals the leveler drives (LiteX drives them from its
    CPU): lane select (its DQSBUFM is paused while selected), read-delay reset and increment,
    bitslip reset and increment.  The simulation model has no delays: free signals there."""
    from migen import Signal as MSignal
    lanes = phy.settings.databits // 8
    ctl = {"sel": MSignal(lanes), "rdly_rst": MSignal(), "rdly_inc": MSignal(), "bitslip_rst": MSignal(),
           "bitslip": MSignal()}
    if not sim:
        top.comb += [phy._dly_sel.storage.eq(ctl["sel"]), phy._rdly_dq_rst.re.eq(ctl["rdly_rst"]),
                     phy._rdly_dq_inc.re.eq(ctl["rdly_inc"]), phy._rdly_dq_bitslip_rst.re.eq(ctl["bitslip_rst"]),
                     phy._rdly_dq_bitslip.re.eq(ctl["bitslip"])]
    return ctl


def _read_leveler(port, ctl: dict, lanes: int, bitslips: int, delays: int):
    """Read leveling in hardware, from ``start`` (the DRAM initialised) until ``done``, owning
    the user ``port`` meanwhile: write :func:`level_pattern` at words 0..7 once; for every
    bitslip ``b`` and read delay ``d`` (all lanes at once) set the PHY (``ctl``), let it settle,
    read the burst back and note per lane whether its bytes compare equal; then per lane take
    the bitslip with the longest run of passing delays and the middle delay of that run, and set
    each lane so.  ``done`` rises only if every lane passed somewhere (else the port stays
    closed).  ``choice`` holds the lanes' (bitslip, delay) after (lane 0 lowest, 8 bits each)."""
    from migen import FSM, Array, Cat, Constant, If, Module, Mux, NextState, NextValue
    from migen import Signal as MSignal

    words = 8
    pattern = level_pattern(lanes, words)
    width = len(port.wdata.data)
    if width != 8 * lanes:
        raise ValueError(f"read leveling: a user word of {width} bits is not one beat of {lanes} byte lanes")
    n = bitslips * delays

    class _Leveler(Module):
        def __init__(self):
            self.start, self.done = MSignal(), MSignal()
            self.cmd_valid, self.cmd_we, self.cmd_addr = MSignal(), MSignal(), MSignal(len(port.cmd.addr))
            self.cmd_ready, self.wdata_take, self.rdata_valid = MSignal(), MSignal(), MSignal()
            self.wdata, self.rdata = MSignal(width), MSignal(width)
            self.choice = MSignal(16 * lanes)
            pat = Array([Constant(w, width) for w in pattern])
            expected = MSignal(width)
            issued, taken, got = MSignal(max=words + 1), MSignal(max=words + 1), MSignal(max=words + 1)
            b, d = MSignal(max=bitslips), MSignal(max=delays)
            k = MSignal(max=delays + bitslips + 4)  # the step inside SET
            wait = MSignal(6)
            lane_ok = MSignal(lanes)
            self.passed = passed = [MSignal(n, name=f"passed{lane}") for lane in range(lanes)]
            # the window search, per lane: runs of passing delays of one bitslip
            run_len = [MSignal(max=delays + 1) for _ in range(lanes)]
            run_start = [MSignal(max=delays) for _ in range(lanes)]
            best_len = [MSignal(max=delays + 1) for _ in range(lanes)]
            best_start = [MSignal(max=delays) for _ in range(lanes)]
            best_b = [MSignal(max=bitslips) for _ in range(lanes)]
            lane = MSignal(max=lanes + 1)  # APPLY: the lane being set
            tgt_b, tgt_d = MSignal(max=bitslips), MSignal(max=delays)
            applying = MSignal()
            sel = MSignal(lanes)
            self.comb += [self.wdata.eq(pat[taken]), self.cmd_addr.eq(issued), expected.eq(pat[got]),
                          ctl["sel"].eq(sel)]
            self.sync += If(self.wdata_take, taken.eq(taken + 1))
            # a read's data, lane by lane, against the pattern
            for lane_i in range(lanes):
                lo = 8 * lane_i
                self.sync += If(self.rdata_valid & (self.rdata[lo:lo + 8] != expected[lo:lo + 8]),
                                lane_ok[lane_i].eq(0))
            self.sync += If(self.rdata_valid, got.eq(got + 1))
            idx = MSignal(max=n)
            self.comb += idx.eq(b * delays + d)
            self.submodules.fsm = fsm = FSM(reset_state="IDLE")
            fsm.act("IDLE", If(self.start, NextValue(issued, 0), NextState("WRITE")))
            fsm.act("WRITE",
                    self.cmd_valid.eq(1), self.cmd_we.eq(1),
                    If(self.cmd_ready, NextValue(issued, issued + 1),
                       If(issued == words - 1, NextState("WDRAIN"))))
            fsm.act("WDRAIN", If(taken == words, NextValue(k, 0), NextValue(b, 0), NextValue(d, 0),
                                 NextValue(tgt_b, 0), NextValue(tgt_d, 0), NextState("SET")))
            # SET: lanes selected for the whole state; step 1 resets the delay, then tgt_d
            # increments, a bitslip reset, tgt_b bitslips
            fsm.act("SET",
                    NextValue(k, k + 1),
                    If(k == 1, ctl["rdly_rst"].eq(1)),
                    If((k >= 2) & (k < 2 + tgt_d), ctl["rdly_inc"].eq(1)),
                    If(k == 2 + tgt_d, ctl["bitslip_rst"].eq(1)),
                    If((k > 2 + tgt_d) & (k <= 2 + tgt_d + tgt_b), ctl["bitslip"].eq(1)),
                    If(k == 3 + tgt_d + tgt_b,
                       NextValue(wait, 0),
                       If(applying, NextState("NEXT_LANE")).Else(NextState("SETTLE"))))
            fsm.act("SETTLE", NextValue(wait, wait + 1),
                    If(wait == 2 ** len(wait) - 1, NextValue(issued, 0), NextValue(got, 0),
                       NextValue(lane_ok, 2 ** lanes - 1), NextState("READ")))
            fsm.act("READ",
                    self.cmd_valid.eq(1),
                    If(self.cmd_ready, NextValue(issued, issued + 1),
                       If(issued == words - 1, NextState("RWAIT"))))
            fsm.act("RWAIT",
                    If(got == words,
                       *[NextValue(passed[i], passed[i] | (lane_ok[i] << idx)) for i in range(lanes)],
                       If(d == delays - 1,
                          NextValue(d, 0),
                          If(b == bitslips - 1, NextValue(b, 0), NextState("PICK")
                             ).Else(NextValue(b, b + 1), NextValue(tgt_b, b + 1), NextValue(tgt_d, 0),
                                    NextValue(k, 0), NextState("SET"))
                          ).Else(NextValue(d, d + 1), NextValue(tgt_d, d + 1), NextValue(k, 0), NextState("SET"))))
            # PICK: one (b, d) a cycle; a run of passing delays ends at a failing one or at the
            # end of the bitslip's delays
            pick = []
            for i in range(lanes):
                bit = MSignal()
                self.comb += bit.eq((passed[i] >> idx)[0])
                length = MSignal(max=delays + 1)
                self.comb += length.eq(Mux(d == 0, 0, run_len[i]) + 1)
                pick.append(If(bit,
                               NextValue(run_len[i], length),
                               If(length == 1, NextValue(run_start[i], d)),
                               If(length > best_len[i], NextValue(best_len[i], length), NextValue(best_b[i], b),
                                  NextValue(best_start[i], Mux(length == 1, d, run_start[i]))))
                            .Else(NextValue(run_len[i], 0)))
            fsm.act("PICK", *pick,
                    If(d == delays - 1,
                       NextValue(d, 0),
                       If(b == bitslips - 1, NextState("CHECK")).Else(NextValue(b, b + 1))
                       ).Else(NextValue(d, d + 1)))
            every = MSignal()
            self.comb += every.eq(Cat(*[best_len[i] != 0 for i in range(lanes)]) == 2 ** lanes - 1)
            fsm.act("CHECK", If(every, NextValue(lane, 0), NextState("NEXT_LANE")).Else(NextState("FAILED")))
            fsm.act("FAILED")  # no window: the port stays closed (the host sees host_wait high)
            mid = [MSignal(max=delays) for _ in range(lanes)]
            for i in range(lanes):
                self.comb += mid[i].eq(best_start[i] + ((best_len[i] - 1) >> 1))
                self.comb += [self.choice[16 * i:16 * i + 8].eq(mid[i]), self.choice[16 * i + 8:16 * i + 16].eq(best_b[i])]
            fsm.act("NEXT_LANE",
                    If(lane == lanes,
                       NextState("DONE")
                       ).Else(NextValue(applying, 1), NextValue(k, 0),
                              NextValue(tgt_b, Array(best_b)[lane]), NextValue(tgt_d, Array(mid)[lane]),
                              NextValue(lane, lane + 1), NextState("SET")))
            fsm.act("DONE", self.done.eq(1))
            # the lanes selected in SET: all while scanning, the one being set while applying
            self.comb += If(fsm.ongoing("SET"),
                            If(applying, sel.eq(Array([Constant(1 << i, lanes) for i in range(lanes)])[lane - 1])
                               ).Else(sel.eq(2 ** lanes - 1)))

    return _Leveler()


CORE_NAME = "litedram_core"
# the board oscillator's input of a core that makes its own clocks (ECP5DDRPHY), and its frequency
CLK_IN = "clk_in"
ECP5_DDR_CLK_IN_HZ = 100e6  # the ECPIX-5's oscillator


def _ecp5_overrides() -> dict:
    """migen's special overrides for the ECP5 under yosys/nextpnr (LiteX's, for the reset
    synchronisers), with tristates as ``TRELLIS_IO`` cells whose pad is an ``inout`` of the core
    (the data and strobe pins go straight to the board top's pins)."""
    from litex.build.lattice.common import lattice_ecp5_trellis_special_overrides
    from migen import Instance, Module
    from migen.fhdl.specials import Tristate

    class _Impl(Module):
        def __init__(self, pad, o, oe, i):
            n = len(pad)
            for bit in range(n):
                self.specials += Instance("TRELLIS_IO", p_DIR="BIDIR", io_B=pad[bit] if n > 1 else pad,
                                          i_I=o[bit] if n > 1 else o, o_O=i[bit] if n > 1 else i, i_T=~oe)

    class _Tristate:
        @staticmethod
        def lower(dr):
            return _Impl(dr.target, dr.o, dr.oe, dr.i)

    return {**lattice_ecp5_trellis_special_overrides, Tristate: _Tristate}


def _ecp5_ddr_clocking(top, phy, board: DramBoard) -> set:
    """The clocks of a real ECP5DDRPHY inside the generated core: an ``EHXPLLL`` (LiteX's
    ``ECP5PLL``) from the oscillator (``clk_in``) to twice the controller clock and to 25 MHz for
    the PHY's start-up (``init``: LiteDRAM's ``ECP5DDRPHYInit`` locks the ``DDRDLLA`` and then
    stops, resets and restarts the edge clock); the edge clock (``sys2x``) through
    ``ECLKBRIDGECS``/``ECLKSYNCB`` (stopped by the start-up) and the controller clock ``sys``
    divided from it by ``CLKDIVF`` (2), so the two are phase-aligned as the PHY's ``ODDRX2F``
    and ``IDDRX2F`` need.  ``sys_clk``/``sys_rst`` become outputs: the rest of the design runs
    on them.  A power-on counter on the oscillator holds the PLL in reset for 2**16 cycles
    after configuration."""
    from litex.soc.cores.clock import ECP5PLL
    from migen import ClockDomain, Instance, If
    from migen import Signal as MSignal
    from migen.genlib.resetsync import AsyncResetSynchronizer

    clk_in = MSignal(name=CLK_IN)
    top.clock_domains.cd_init = ClockDomain("init")
    top.clock_domains.cd_por = ClockDomain("por", reset_less=True)
    top.clock_domains.cd_sys2x = ClockDomain("sys2x")
    top.clock_domains.cd_sys2x_i = ClockDomain("sys2x_i", reset_less=True)
    por = MSignal(16, reset=2**16 - 1)
    top.comb += top.cd_por.clk.eq(clk_in)
    top.sync.por += If(por != 0, por.eq(por - 1))
    top.submodules.pll = pll = ECP5PLL()
    top.comb += pll.reset.eq(por != 0)
    pll.register_clkin(clk_in, ECP5_DDR_CLK_IN_HZ)
    pll.create_clkout(top.cd_sys2x_i, 2 * board.sys_clk_hz, with_reset=False)
    pll.create_clkout(top.cd_init, 25e6)
    ecs = MSignal()
    top.specials += [
        Instance("ECLKBRIDGECS", i_CLK0=top.cd_sys2x_i.clk, i_SEL=0, o_ECSOUT=ecs),
        Instance("ECLKSYNCB", i_ECLKI=ecs, i_STOP=phy.init.stop, o_ECLKO=top.cd_sys2x.clk),
        Instance("CLKDIVF", p_DIV="2.0", i_ALIGNWD=0, i_CLKI=top.cd_sys2x.clk, i_RST=phy.init.reset,
                 o_CDIVX=top.cd_sys.clk),
        AsyncResetSynchronizer(top.cd_sys, ~pll.locked | phy.init.reset),
        AsyncResetSynchronizer(top.cd_sys2x, ~pll.locked | phy.init.reset),
    ]
    return {clk_in}


@functools.lru_cache(maxsize=8)
def generate_core(name: str, sim: bool = True) -> tuple[str, dict]:
    """Verilog of board ``name``'s controller (module :data:`CORE_NAME`) and its info: with
    ``sim``, LiteDRAM's ``SDRAMPHYModel`` (the whole memory as Verilog arrays) stands behind
    the DFI instead of the pins.  Ports: ``sys_clk``, ``sys_rst`` (synchronous, active high),
    ``init_done``, ``dbg_refresh`` and ``user_port0_{cmd,wdata,rdata}_*``.  LiteX's date
    lines are removed, so equal configurations give equal text."""
    from litedram.core import LiteDRAMCore as _Core
    from litedram.core.controller import ControllerSettings
    from litedram.phy.model import SDRAMPHYModel
    from litex.gen.fhdl.verilog import convert
    from migen import ClockDomain, If, Module
    from migen import Signal as MSignal

    board = dram_board(name)
    module = _module(board)

    class _Top(Module):
        def __init__(self):
            self.ios = set()
            self.extra = {}  # more info (a core that makes its own clocks: its pins)
            self.clock_domains.cd_sys = ClockDomain("sys")
            self.ios |= {self.cd_sys.clk, self.cd_sys.rst}
            if sim:
                self.submodules.phy = phy = SDRAMPHYModel(module, _phy_settings(board, module),
                                                          clk_freq=board.sys_clk_hz)
            else:
                pads = _dram_pads(board, module)
                self.submodules.phy = phy = _make_phy(board, pads)
                for fname, _ in pads.layout:
                    sig = getattr(pads, fname)
                    sig.name_override = f"sdram_{fname}"
                    self.ios.add(sig)
                if board.phy == "ECP5DDRPHY":
                    self.ios |= _ecp5_ddr_clocking(self, phy, board)
                    # the core's pins, each direct to the FPGA's pad: i (oscillator), o, io
                    self.extra = {"own_clock": True,
                                  "pins": {CLK_IN: "i", **{f"sdram_{f}": "io" if f in ("dq", "dqs_p") else "o"
                                                           for f, _ in pads.layout}}}
            self.settings = ControllerSettings()  # fresh: LiteDRAM writes into it
            self.submodules.core = core = _Core(phy=phy, geom_settings=module.geom_settings,
                                                timing_settings=module.timing_settings,
                                                clk_freq=board.sys_clk_hz, controller_settings=self.settings)
            self.steps = init_steps(phy.settings, module.timing_settings, board.sys_clk_hz)
            self.submodules.init = init = _init_sequencer(core.dfii.ext_dfi, self.steps)
            self.comb += core.dfii.ext_dfi_sel.eq(init.sel)
            done, refresh = MSignal(name="init_done"), MSignal(name="dbg_refresh")
            self.comb += refresh.eq(core.controller.refresher.cmd.valid)
            self.ios |= {done, refresh}
            self.port = port = self._user_port(core)
            ready = init.done
            self.leveler = None
            if phy.settings.read_leveling:  # before the user: the PHY's read delays found
                ctl = _phy_leveling_controls(self, phy, sim)
                self.submodules.leveler = self.leveler = _read_leveler(
                    port, ctl, phy.settings.databits // 8, phy.settings.bitslips, phy.settings.delays)
                self.comb += self.leveler.start.eq(init.done)
                ready = init.done & self.leveler.done
                self.extra["read_leveling"] = {"bitslips": phy.settings.bitslips, "delays": phy.settings.delays,
                                               "pattern": level_pattern(phy.settings.databits // 8)}
            self.comb += [done.eq(ready)]
            self.ios |= self._expose(port, ready)

        def _user_port(self, core):
            """The native port; narrower than the controller's word, through LiteDRAM's converter."""
            width = board.port_bits
            if width is None or width == core.crossbar.controller.data_width:
                return core.crossbar.get_port()
            return core.crossbar.get_port(data_width=width)

        def _expose(self, port, en):
            """The user port's signals as the core's ports, closed until ``en`` (the DRAM is
            initialised).  The native controller takes write data when it pulses ``wdata.ready``
            (``wdata.valid`` may stay high); LiteDRAM's converter queues whatever is valid, so
            behind it ``wdata.valid`` says that a write command was taken whose data has not
            been (the user puts a write's data in its queue as the command is taken), and
            ``flush`` ends the converter's group of words in any cycle without a command (the
            last words of a burst are not held back for a later command).  ``wdata_ready`` is
            the take (ready and valid): the user pops a word only when the port takes it."""
            s = lambda n, w=1: MSignal(w, name=f"user_port0_{n}")
            io = {"cmd_valid": s("cmd_valid"), "cmd_ready": s("cmd_ready"), "cmd_we": s("cmd_we"),
                  "cmd_addr": s("cmd_addr", port.address_width), "wdata_ready": s("wdata_ready"),
                  "wdata_we": s("wdata_we", port.data_width // 8), "wdata_data": s("wdata_data", port.data_width),
                  "rdata_valid": s("rdata_valid"), "rdata_data": s("rdata_data", port.data_width)}
            native = port.data_width == self.core.crossbar.controller.data_width
            lev = self.leveler
            if lev is None:
                drive = [port.cmd.valid.eq(io["cmd_valid"] & en), port.cmd.we.eq(io["cmd_we"]),
                         port.cmd.addr.eq(io["cmd_addr"])]
                wdata = [port.wdata.we.eq(io["wdata_we"]), port.wdata.data.eq(io["wdata_data"])]
            else:  # the leveler owns the port until it is done
                drive = [If(en, port.cmd.valid.eq(io["cmd_valid"]), port.cmd.we.eq(io["cmd_we"]),
                            port.cmd.addr.eq(io["cmd_addr"])
                            ).Else(port.cmd.valid.eq(lev.cmd_valid), port.cmd.we.eq(lev.cmd_we),
                                   port.cmd.addr.eq(lev.cmd_addr))]
                wdata = [If(en, port.wdata.we.eq(io["wdata_we"]), port.wdata.data.eq(io["wdata_data"])
                            ).Else(port.wdata.we.eq(2 ** len(port.wdata.we) - 1), port.wdata.data.eq(lev.wdata))]
                self.comb += [lev.cmd_ready.eq(port.cmd.ready & ~en), lev.wdata_take.eq(port.wdata.valid &
                              port.wdata.ready & ~en), lev.rdata_valid.eq(port.rdata.valid & ~en),
                              lev.rdata.eq(port.rdata.data)]
            self.comb += [*drive[:1], io["cmd_ready"].eq(port.cmd.ready & en), *drive[1:],
                          *([port.wdata.valid.eq(en)] if native else []),
                          io["wdata_ready"].eq(port.wdata.ready & port.wdata.valid & en), *wdata,
                          io["rdata_valid"].eq(port.rdata.valid & en), port.rdata.ready.eq(1),
                          io["rdata_data"].eq(port.rdata.data)]
            if not native:
                owed = MSignal(max=64)
                take = MSignal()
                self.comb += [take.eq(port.wdata.valid & port.wdata.ready), port.wdata.valid.eq(owed != 0),
                              port.flush.eq(~port.cmd.valid)]
                self.sync += If(port.cmd.valid & port.cmd.ready & port.cmd.we,
                                If(~take, owed.eq(owed + 1))
                                ).Elif(take, owed.eq(owed - 1))
            return set(io.values())

    top = _Top()
    overrides = {}
    if not sim and board.phy == "ECP5DDRPHY":  # tristates and reset synchronisers as ECP5 cells
        overrides = _ecp5_overrides()
    text = str(convert(top, ios=top.ios, name=CORE_NAME, special_overrides=overrides))
    # the generation time (a "Date" line at the top, "Auto-Generated by LiteX on <date>" at the
    # end) is removed, so equal configurations give equal text (and equal build keys)
    text = re.sub(r"//[^\n]*(Date\s*:|Auto-Generated by LiteX on)[^\n]*\n", "", text)
    info = {"board": board.name, "sim": sim, "timings": dram_timings(name),
            "address_width": top.port.address_width, "data_width": top.port.data_width,
            "init_steps": top.steps, "init_cycles": sum(s["wait"] + 1 for s in top.steps) + 1,
            "verilog_lines": text.count("\n"), **top.extra,
            "digest": hashlib.sha256(text.encode()).hexdigest()[:12]}
    return text, info


def NativePort(aw: int, dw: int) -> wiring.Signature:
    """LiteDRAM's native user port as the generated core exposes it (seen from the user).  The
    controller ignores ``rdata.ready`` (read data comes when it comes) and takes a write's data
    in the cycle ``wdata_ready`` pulses, in command order."""
    return wiring.Signature({"cmd_valid": Out(1), "cmd_ready": In(1), "cmd_we": Out(1), "cmd_addr": Out(aw),
                             "wdata_ready": In(1), "wdata_we": Out(dw // 8), "wdata_data": Out(dw),
                             "rdata_valid": In(1), "rdata_data": In(dw)})


class NativeSlice(wiring.Component):
    """A register slice on the native port (``up``: the users' side, ``down``: the
    controller's), so no combinational path joins the controller's logic to the users' (the
    line engines of every graph and the host's loader, spread over the chip).

    * Commands: a two-entry skid buffer; ``down``'s command and ``up``'s ready are registers
      (a command reaches the controller a cycle after the user's, one per cycle as before).
    * Write data: the slice counts the write commands it has taken whose data it has not
      pulled (``owed``) and pulls each from the user's queue (``up.wdata_ready``, from its own
      registers) into its own queue, which the controller's ``wdata_ready`` pops.  The user
      puts a write's data in its queue as the command is taken, so a pull is always a cycle
      after its command is taken, before the controller (which takes a write's data at least
      two cycles after it takes the command) can ask for it; ``late`` is a sticky flag that it
      did ask first (the tests check it stays low).
    * Read data: registered (a cycle more of latency).
    * ``quiet``: no read taken without its data back, no write data held, no command held."""

    def __init__(self, aw: int, dw: int, wdepth: int = 8) -> None:
        self.aw, self.dw, self.wdepth = aw, dw, wdepth
        super().__init__({"up": In(NativePort(aw, dw)), "down": Out(NativePort(aw, dw)),
                          "quiet": Out(1), "late": Out(1)})

    def elaborate(self, platform):
        m = Module()
        up, dn, aw, dw = self.up, self.down, self.aw, self.dw
        cmd_w = 1 + aw
        main, main_v = Signal(cmd_w), Signal()
        skid, skid_v = Signal(cmd_w), Signal()
        beat = Cat(up.cmd_we, up.cmd_addr)
        m.d.comb += [up.cmd_ready.eq(~skid_v), dn.cmd_valid.eq(main_v), dn.cmd_we.eq(main[0]),
                     dn.cmd_addr.eq(main[1:])]
        take = up.cmd_valid & ~skid_v
        with m.If(~main_v | dn.cmd_ready):  # the main register moves on
            m.d.sync += [main_v.eq(skid_v | up.cmd_valid), main.eq(Mux(skid_v, skid, beat)), skid_v.eq(0)]
        with m.Elif(take):
            m.d.sync += [skid.eq(beat), skid_v.eq(1)]
        # write data: pulled a cycle after its command, queued for the controller
        m.submodules.wq = wq = fifo.SyncFIFO(width=dw + dw // 8, depth=self.wdepth)
        owed = Signal(range(2 * self.wdepth + 4))
        pull = Signal()
        m.d.comb += [pull.eq((owed != 0) & wq.w_rdy), up.wdata_ready.eq(pull),
                     wq.w_en.eq(pull), wq.w_data.eq(Cat(up.wdata_data, up.wdata_we)),
                     dn.wdata_data.eq(wq.r_data[:dw]), dn.wdata_we.eq(wq.r_data[dw:]), wq.r_en.eq(dn.wdata_ready)]
        m.d.sync += owed.eq(owed + (take & up.cmd_we) - pull)
        with m.If(dn.wdata_ready & ~wq.r_rdy):
            m.d.sync += self.late.eq(1)
        # read data: registered; reads taken without their data back
        m.d.sync += [up.rdata_valid.eq(dn.rdata_valid), up.rdata_data.eq(dn.rdata_data)]
        outstanding = Signal(8)
        m.d.sync += outstanding.eq(outstanding + (take & ~up.cmd_we) - up.rdata_valid)
        m.d.comb += self.quiet.eq((outstanding == 0) & (owed == 0) & ~wq.r_rdy & ~main_v & ~skid_v)
        return m


class LiteDRAMCore(wiring.Component):
    """The generated controller (:func:`generate_core`) as an ``Instance`` in the ``sync``
    domain; its reset is the domain's (it restarts the init sequence).  A core that makes its
    own clocks (``info["own_clock"]``: the real ECP5DDRPHY) drives the ``sync`` domain's clock
    and reset instead, from the oscillator pin it is given.

    The real PHY's pins: ``pins`` (SDR: output signals the board top buffers) and ``dq`` (SDR:
    the data pins' I/O port; with ``own_clock``: a dict of every pin the core drives or reads
    directly, by core port name: ``clk_in``, ``sdram_a``, ``sdram_dq``, ...).

    ``port`` reaches the controller through a :class:`NativeSlice` on a board whose DRAM has
    ``registered_port`` (the ULX3S), directly otherwise; ``quiet``: nothing in flight on it."""

    def __init__(self, info: dict, pins: dict[str, Signal] | None = None, dq=None) -> None:
        self.info, self.pins, self.dq = info, pins, dq
        super().__init__({"init_done": Out(1), "dbg_refresh": Out(1), "quiet": Out(1), "late": Out(1),
                          "port": In(NativePort(info["address_width"], info["data_width"]))})

    def elaborate(self, platform):
        m = Module()
        aw, dw = self.info["address_width"], self.info["data_width"]
        inner = NativePort(aw, dw).create(path=("ctrl_port",))  # the controller's side
        if self.info["timings"].get("registered_port"):
            m.submodules.slice = sl = NativeSlice(aw, dw)
            m.d.comb += [*connect_native(self.port, sl.up, through=True), *connect_native(sl.down, inner),
                         self.quiet.eq(sl.quiet), self.late.eq(sl.late)]
        else:  # direct: quiet when every read taken has had its data back
            outstanding = Signal(8)
            m.d.sync += outstanding.eq(outstanding + (inner.cmd_valid & inner.cmd_ready & ~inner.cmd_we)
                                       - inner.rdata_valid)
            m.d.comb += [*connect_native(self.port, inner, through=True), self.quiet.eq(outstanding == 0)]
        kw: dict[str, Any] = {"o_init_done": self.init_done, "o_dbg_refresh": self.dbg_refresh}
        own = self.info.get("own_clock", False)
        if own:
            kw.update(o_sys_clk=ClockSignal("sync"), o_sys_rst=ResetSignal("sync"))
        else:
            kw.update(i_sys_clk=ClockSignal("sync"), i_sys_rst=ResetSignal("sync"))
        for name, member in inner.signature.members.items():  # the user's outputs are the core's inputs
            kw[("i_" if member.flow == Out else "o_") + f"user_port0_{name}"] = getattr(inner, name)
        if not self.info["sim"]:  # the real PHY: its pins (the data pins bidirectional)
            if self.pins is None or self.dq is None:
                raise ValueError("LiteDRAMCore: a controller with the real PHY needs its SDRAM pins "
                                 "(fpga.board_top.BoardTop gives them)")
            for name, sig in self.pins.items():
                kw[f"o_sdram_{name}"] = sig
            if own:
                missing = sorted(set(self.info["pins"]) - set(self.dq))
                if missing:
                    raise ValueError(f"LiteDRAMCore: pins {', '.join(missing)} not given")
                for name, kind in self.info["pins"].items():
                    kw[f"{kind}_{name}"] = self.dq[name]
            else:
                kw["io_sdram_dq"] = self.dq
        m.submodules.ctrl = Instance(CORE_NAME, **kw)
        return m


def sdram_pins(info: dict) -> dict[str, Signal]:
    """The output pins of a real-PHY SDR controller (:func:`generate_core` with ``sim=False``),
    as LiteDRAM names them (active-low ``*_n``); ``dq`` is bidirectional and is given apart.
    A core that makes its own clocks (DDR3) drives every pin itself: none here."""
    if info.get("own_clock"):
        return {}
    t = info["timings"]
    widths = {"a": t["addressbits"], "ba": t["bankbits"], "cs_n": 1, "cke": 1, "ras_n": 1, "cas_n": 1,
              "we_n": 1, "dm": t["bus_bits"] // 8}
    return {n: Signal(w, name=f"sdram_{n}") for n, w in widths.items()}


# --------------------------------------------------------------------------- placement, layout
def tensor_bytes(graph, caps: dict[str, dict[str, int]], cw: int, vw: int) -> dict[str, int]:
    """Bytes of every tensor's arrays at their capacities."""
    return {t: sum(n * word_bytes(vw if a == "vals" else cw) for a, n in c.items())
            for t, c in caps.items() if t in graph.tensors}


def dram_placement(graph, onchip=(), *, min_bytes: int = 0, cw: int = 16, vw: int = 32,
                   max_nnz: tuple = ()) -> list[dict]:
    """The placement rule on DRAM boards, tensor by tensor: every tensor lives in DRAM except
    those named in ``onchip``, those whose arrays hold fewer than ``min_bytes`` bytes, and those
    a node scans with coordinate skipping (skipping searches its crd array on chip).  Rows
    ``{"tensor", "place": "dram" | "onchip", "bytes", "why"}`` in tensor order."""
    caps = {t: tensor_capacities(s, dict(max_nnz).get(t)) for t, s in graph.tensors.items()}
    size = tensor_bytes(graph, caps, cw, vw)
    skipped = {node.params["tensor"] for node in graph.nodes.values()
               if node.spec.tensor is not None and node.spec.tensor.level and node.params.get("skip")}
    rows = []
    for t in sorted(graph.tensors):
        why = ("--onchip" if t in onchip else f"under {min_bytes} bytes" if size.get(t, 0) < min_bytes
               else "scanned with skipping" if t in skipped else "")
        rows.append({"tensor": t, "place": "onchip" if why else "dram", "bytes": size.get(t, 0), "why": why})
    return rows


def dram_onchip(graph, onchip=(), *, min_bytes: int = 0, cw: int = 16, vw: int = 32,
                max_nnz: tuple = ()) -> tuple[str, ...]:
    """The tensors :func:`dram_placement` keeps on chip."""
    return tuple(r["tensor"] for r in dram_placement(graph, onchip, min_bytes=min_bytes, cw=cw, vw=vw,
                                                     max_nnz=max_nnz) if r["place"] == "onchip")


@dataclass(frozen=True)
class ArraySlot:
    region: str  # memory-map region ("A.1.crd", "A.vals")
    base: int  # byte address in DRAM
    nbytes: int  # bytes reserved (whole lines)
    word_bytes: int


class DramAllocator:
    """Base addresses in one DRAM for the arrays of one or more graph tops: each array at the
    start of a DRAM row, its capacity rounded up to whole lines plus one line (the prefetch past
    its end reads there).  LiteDRAM maps addresses row | bank | column, so consecutive rows of an
    array go round the banks; the array with number ``array_id`` starts in bank ``array_id mod
    banks``, as the cycle model places it (``fuseflow.ir.memory.MemPort.bank_row``).  An array
    placed again under the same name (a tensor one graph writes and a later one reads, in the
    same format) gets the same slot if it fits there."""

    def __init__(self, line_bytes: int, row_bytes: int, banks: int = 4) -> None:
        self.line_bytes, self.row_bytes, self.banks = line_bytes, row_bytes, banks
        self.next = 0
        self.slots: dict[str, ArraySlot] = {}

    def place(self, name: str, depth: int, word_bytes: int, array_id: int) -> ArraySlot:
        nbytes = (-(-depth * word_bytes // self.line_bytes) + 1) * self.line_bytes
        old = self.slots.get(name)
        if old is not None and old.word_bytes == word_bytes and old.nbytes >= nbytes:
            return old
        addr = self.next
        while (addr // self.row_bytes) % self.banks != array_id % self.banks:
            addr += self.row_bytes
        slot = self.slots[name] = ArraySlot(name, addr, nbytes, word_bytes)
        self.next = -(-(addr + nbytes) // self.row_bytes) * self.row_bytes
        return slot


def dram_layout(mmap, ports: list[MemPort], line_bytes: int, row_bytes: int,
                banks: int = 4, allocator: DramAllocator | None = None) -> dict[str, ArraySlot]:
    """The DRAM memory map of a graph top: every off-chip array (a region of ``mmap`` some port
    uses) gets a slot from ``allocator`` (default: a fresh one, from address 0), in region order."""
    alloc = allocator or DramAllocator(line_bytes, row_bytes, banks)
    used = {_region_of(p): p for p in ports}
    return {r.name: alloc.place(r.name, r.depth, used[r.name].word_bytes, used[r.name].array_id)
            for r in mmap.regions if r.name in used}


def _region_of(p: MemPort) -> str:
    return f"{p.tensor}.vals" if p.array == "vals" else f"{p.tensor}.{p.level}.{p.array}"


def placement_report(graph, onchip: tuple[str, ...], layout: dict[str, ArraySlot] | None = None) -> list[dict]:
    """Where each tensor went: ``{"tensor", "place": "dram" | "onchip", "arrays": {region:
    base}}`` in tensor order."""
    out = []
    for t in sorted(graph.tensors):
        arrays = {k: v.base for k, v in (layout or {}).items() if k.split(".")[0] == t}
        out.append({"tensor": t, "place": "onchip" if t in onchip or not arrays else "dram", "arrays": arrays})
    return out


# --------------------------------------------------------------------------- the line engine
IDLE, READ, FETCH, ISSUE, DRAIN = range(5)


class LineEngine(wiring.Component):
    """The project's arbiter and line mover in front of LiteDRAM's native port.

    Port ``p<i>`` is the controller side of gate ``i``'s :func:`hw.dram.MemBus`.  The engine
    has an issue stage and a receive stage.  When the issue stage is idle it grants the first
    waiting gate at or after its round-robin pointer:

    * a read line is ``L`` native reads issued back to back; the receive stage (a queue of two
      lines: the next line's reads are issued while the data of the last one still arrives, so
      the data bus stays busy) assembles the returning words into array words and writes them
      into the node's memory through ``fill<i>``; two cycles after the line's last write it
      acknowledges the fill (the gate's tags change; a read of the memory then sees the words);
    * a written line is read from the writer's memory through ``drain<i>`` into a line
      register and written to DRAM back to back (while the data of read lines issued before it
      still arrives: the port keeps its commands in order); it is acknowledged when the
      controller has taken its last data.

    The nodes' memories are line buffers (``hw.dram``): a read line goes into the slot its
    gate names when granted, a written line is read from the slot of its parity (the low bits
    of the word index address the writer's two lines).  Words past an array's capacity are
    neither written into a memory nor read from it."""

    def __init__(self, specs: list[MemPort], slots: list[Any], depths: list[int], widths: list[int],
                 addr_widths: list[int], cw: int, line_bytes: int, aw: int, dw: int) -> None:
        self.specs, self.slots, self.depths, self.widths = specs, slots, depths, widths
        self.lw, self.line_bytes, self.aw, self.dw = line_width(cw), line_bytes, aw, dw
        members: dict[str, Any] = {f"p{i}": In(MemBus(self.lw)) for i in range(len(specs))}
        for i, s in enumerate(specs):
            members[f"{'drain' if s.write else 'fill'}{i}"] = Out(
                (MemRead if s.write else MemWrite)(addr_widths[i], widths[i]))
        members["native"] = Out(NativePort(aw, dw))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n, nb, wd = len(self.specs), self.dw // 8, self.dw
        ports = [getattr(self, f"p{i}") for i in range(n)]
        nat = self.native
        pw = max(1, (n - 1).bit_length())
        cycle = Signal(CYCLE_WIDTH)
        m.d.sync += cycle.eq(cycle + 1)
        for p in ports:
            m.d.comb += [p.cycle.eq(cycle), p.done.eq(cycle - 1)]  # done by acknowledgement only
        words_per_line = [self.line_bytes // s.word_bytes for s in self.specs]
        pieces = [max(1, s.word_bytes // nb) for s in self.specs]
        nat_words = self.line_bytes // nb
        # ---- arbitration: the first waiting port at or after rr
        state = Signal(range(5), init=IDLE)
        rr, sel, any_w = round_robin(m, ports)
        sel_write = Signal()
        with m.Switch(sel):
            for i, s in enumerate(self.specs):
                with m.Case(i):
                    m.d.comb += sel_write.eq(int(s.write))
        # in-flight read lines: (port, line, buffer slot), oldest first
        m.submodules.inflight = q = fifo.SyncFIFO(width=pw + self.lw + SLOT_WIDTH, depth=2)
        ack1, ack1_port, ack2, ack2_port = Signal(), Signal(pw), Signal(), Signal(pw)
        grant = Signal()
        m.d.comb += grant.eq((state == IDLE) & any_w & (sel_write | q.w_rdy))
        for i, p in enumerate(ports):
            m.d.comb += p.grant.eq(grant & (sel == i))
        cur, line = Signal(pw), Signal(self.lw)  # the issue stage's port and line
        base = Signal(self.aw)  # the line's first native word
        issued = Signal(range(nat_words + 1))
        widx_i = Signal(self.lw + 8)
        sel_line, sel_slot = Signal(self.lw), Signal(SLOT_WIDTH)
        with m.Switch(sel):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += [sel_line.eq(ports[i].line), sel_slot.eq(ports[i].slot)]
        m.d.comb += [q.w_data.eq(Cat(sel[:pw], sel_line, sel_slot)), q.w_en.eq(grant & ~sel_write)]
        with m.If(grant):
            m.d.sync += [cur.eq(sel), line.eq(sel_line), rr.eq(Mux(sel == n - 1, 0, sel + 1)),
                         issued.eq(0), widx_i.eq(0), state.eq(Mux(sel_write, FETCH, READ))]
            with m.Switch(sel):
                for i in range(n):
                    with m.Case(i):
                        m.d.sync += base.eq((self.slots[i].base // nb) + ports[i].line * nat_words)
        m.d.comb += [nat.cmd_addr.eq(base + issued), nat.wdata_we.eq((1 << nb) - 1)]
        # write data: taken in command order when the controller pulses wdata_ready
        m.submodules.wfifo = wf = fifo.SyncFIFO(width=self.dw, depth=8)
        m.d.comb += [nat.wdata_data.eq(wf.r_data), wf.r_en.eq(nat.wdata_ready)]
        # ---- issue: read lines
        with m.If(state == READ):
            m.d.comb += [nat.cmd_valid.eq(1), nat.cmd_we.eq(0)]
            with m.If(nat.cmd_ready):
                m.d.sync += issued.eq(issued + 1)
                with m.If(issued == nat_words - 1):
                    m.d.sync += state.eq(IDLE)
        st = SimpleNamespace(nat=nat, state=state, cur=cur, line=line, issued=issued, widx_i=widx_i,
                             nat_words=nat_words, words_per_line=words_per_line, pieces=pieces, wd=wd,
                             wf=wf, q=q, pw=pw)
        write_done = self._write_issue(m, st)
        rport = self._receive(m, st)
        # ---- acknowledgement: read lines two cycles after their last write, written lines
        # when the controller has taken their last data
        m.d.sync += [ack1.eq(q.r_en), ack1_port.eq(rport), ack2.eq(ack1), ack2_port.eq(ack1_port)]
        for i, (p, s) in enumerate(zip(ports, self.specs, strict=True)):
            # a written line's acknowledgement only on write ports: on a read port the write
            # FIFO's level would sit in front of the gate's tags and the node's memory address
            # (the ULX3S GCN top's critical path; the term is never true there)
            done_w = (write_done & (cur == i)) if s.write else 0
            m.d.comb += p.ack.eq((ack2 & (ack2_port == i)) | done_w)
        return m

    def _write_issue(self, m, st):
        """Written lines: FETCH reads the line's words from the writer's memory into a line
        register (one address per cycle, data a cycle later), ISSUE writes it to DRAM, DRAIN
        waits until the controller has taken the data.  Returns the signal that is high in the
        cycle it has (the line is done)."""
        nat, state, cur, line, issued, widx_i = st.nat, st.state, st.cur, st.line, st.issued, st.widx_i
        nat_words, words_per_line, wd, wf = st.nat_words, st.words_per_line, st.wd, st.wf
        lbits = self.line_bytes * 8
        lreg = Signal(lbits)
        lvalid = Signal()
        m.d.sync += lvalid.eq(0)
        with m.Switch(cur):
            for i, s in enumerate(self.specs):
                if not s.write:
                    continue
                with m.Case(i):
                    dp = getattr(self, f"drain{i}")
                    w = s.word_bytes * 8  # a word's slot in the line (a narrower word: zero above)
                    m.d.comb += dp.addr.eq(line * words_per_line[i] + widx_i)
                    with m.If((state == FETCH) & (widx_i < words_per_line[i])):
                        m.d.sync += [widx_i.eq(widx_i + 1), lvalid.eq(1)]
                    with m.If(lvalid):
                        m.d.sync += lreg.eq((dp.data << (lbits - w)) | (lreg >> w))
                        with m.If(widx_i == words_per_line[i]):
                            m.d.sync += state.eq(ISSUE)
        with m.If(state == ISSUE):
            m.d.comb += [nat.cmd_valid.eq(wf.w_rdy), nat.cmd_we.eq(1), wf.w_data.eq(lreg[:wd]),
                         wf.w_en.eq(nat.cmd_ready & wf.w_rdy)]
            with m.If(nat.cmd_ready & wf.w_rdy):
                m.d.sync += [issued.eq(issued + 1), lreg.eq(lreg >> wd)]
                with m.If(issued == nat_words - 1):
                    m.d.sync += state.eq(DRAIN)
        write_done = Signal()
        m.d.comb += write_done.eq((state == DRAIN) & ~wf.r_rdy)
        with m.If(write_done):
            m.d.sync += state.eq(IDLE)
        return write_done

    def _receive(self, m, st):
        """The head read line's data, assembled into array words (little-endian: the first
        native word is the low part) and written into the node's memory; pops the line with its
        last word.  Returns the head line's port."""
        nat, q, pw, nat_words, words_per_line, pieces, wd = (st.nat, st.q, st.pw, st.nat_words,
                                                             st.words_per_line, st.pieces, st.wd)
        rport, rline, rslot = Signal(pw), Signal(self.lw), Signal(SLOT_WIDTH)
        m.d.comb += [rport.eq(q.r_data[:pw]), rline.eq(q.r_data[pw:pw + self.lw]), rslot.eq(q.r_data[pw + self.lw:])]
        got = Signal(range(nat_words + 1))
        piece = Signal(range(max(pieces) + 1))
        widx = Signal(self.lw + 8)
        asm = Signal(max(self.widths) + wd)
        data_in = Signal()
        m.d.comb += data_in.eq(q.r_rdy & nat.rdata_valid)
        for i, s in enumerate(self.specs):
            if s.write:
                continue
            fp = getattr(self, f"fill{i}")
            k = pieces[i]
            word = Signal(self.widths[i], name=f"fill_word{i}")
            if k > 1:  # the k - 1 earlier pieces are the top of asm
                m.d.comb += word.eq((nat.rdata_data << (wd * (k - 1))) | (asm >> (len(asm) - wd * (k - 1))))
                last_piece = piece == k - 1
            else:
                m.d.comb += word.eq(nat.rdata_data)
                last_piece = Const(1)
            index = rline * words_per_line[i] + widx
            kw = words_per_line[i].bit_length() - 1  # the word's offset in its line, below the slot
            m.d.comb += [fp.addr.eq(Cat(widx[:kw], rslot) if kw else rslot), fp.data.eq(word),
                         fp.en.eq(data_in & (rport == i) & last_piece & (index < self.depths[i]))]
        with m.If(data_in):
            m.d.sync += [asm.eq((nat.rdata_data << (len(asm) - wd)) | (asm >> wd)), got.eq(got + 1)]
            with m.Switch(rport):
                for i, s in enumerate(self.specs):
                    if s.write:
                        continue
                    with m.Case(i):
                        if pieces[i] > 1:
                            with m.If(piece == pieces[i] - 1):
                                m.d.sync += [piece.eq(0), widx.eq(widx + 1)]
                            with m.Else():
                                m.d.sync += piece.eq(piece + 1)
                        else:
                            m.d.sync += widx.eq(widx + 1)
            with m.If(got == nat_words - 1):  # the line's last word: pop it, acknowledge later
                m.d.comb += q.r_en.eq(1)
                m.d.sync += [got.eq(0), piece.eq(0), widx.eq(0)]
        return rport


# --------------------------------------------------------------------------- the graph top
class _Loader(wiring.Component):
    """The host's access to DRAM (outside the datapath's reset), one array word at a time, split
    into native words (the first is the low part).  ``we``: write ``data``; ``re``: read the
    word into ``rdata``.  ``busy`` until the controller has taken all the data of a write, or
    until all the pieces of a read have arrived."""

    def __init__(self, aw: int, dw: int, width: int) -> None:
        self.aw, self.dw = aw, dw
        self.width = -(-width // dw) * dw
        super().__init__({"we": In(1), "re": In(1), "addr": In(aw), "data": In(self.width), "pieces": In(4),
                          "rdata": Out(self.width), "busy": Out(1), "native": Out(NativePort(aw, dw))})

    def elaborate(self, platform):
        m = Module()
        nat, dw = self.native, self.dw
        left, wanted, got = Signal(4), Signal(4), Signal(4)
        reading = Signal()
        addr, data = Signal(self.aw), Signal(self.width)
        m.submodules.wfifo = wf = fifo.SyncFIFO(width=self.dw, depth=8)
        m.d.comb += [nat.wdata_data.eq(wf.r_data), wf.r_en.eq(nat.wdata_ready), nat.wdata_we.eq(-1),
                     nat.cmd_we.eq(~reading), nat.cmd_addr.eq(addr),
                     nat.cmd_valid.eq((left != 0) & (reading | wf.w_rdy)),
                     wf.w_data.eq(data), wf.w_en.eq(nat.cmd_valid & nat.cmd_ready & ~reading),
                     self.busy.eq((left != 0) | wf.r_rdy | (reading & (got != wanted)))]
        with m.If(self.we | self.re):
            m.d.sync += [left.eq(self.pieces), addr.eq(self.addr), data.eq(self.data), reading.eq(self.re),
                         wanted.eq(self.pieces), got.eq(0)]
        with m.Elif(nat.cmd_valid & nat.cmd_ready):
            m.d.sync += [left.eq(left - 1), addr.eq(addr + 1), data.eq(data >> self.dw)]
        with m.If(reading & nat.rdata_valid & (got != wanted)):
            m.d.sync += [self.rdata.word_select(got, dw).eq(nat.rdata_data), got.eq(got + 1)]
        return m


class DramGraphTop(GraphTop):
    """A :class:`hw.elaborate.GraphTop` whose off-chip arrays live in the board's DRAM behind a
    generated LiteDRAM controller (``docs/dram.md``); ``cfg.memory`` must be the board's
    :func:`dram_memory_model` (its line size is the gates' line).

    Host port as ``GraphTop``'s plus ``host_wait``: while it is high the host must not write
    (DRAM is initialising, or a word written into DRAM is still on its way).  A write into an
    off-chip input array goes to DRAM (at the array's base in :attr:`layout`) instead of the
    nodes' memories; output arrays are written back to DRAM by their writers and stay readable
    from the writers' memories."""

    def __init__(self, graph, cfg, board: str = "ulx3s", sim: bool = True, *,
                 allocator: DramAllocator | None = None, shared: bool = False) -> None:
        # ``allocator``: the DRAM slots, shared with other tops of one model; ``shared``: the
        # controller is outside (hw.dram_model.ModelTop): the top drives ``dram_port`` and takes
        # ``init_done_in`` and ``quiet_in`` (no read of the controller's port outstanding)
        self.allocator, self.shared = allocator, shared
        b = dram_board(board)
        text, info = generate_core(b.name, sim)
        self.dram_info, self.dram_verilog, self.dram_board = info, text, b
        if cfg.memory.ideal or cfg.memory.burst_bytes != b.line_bytes:
            self._MustUse__silence = True  # refused before it was built
            raise ValueError(f"DramGraphTop: memory model {cfg.memory.name!r} is not board {b.name!r}'s "
                             f"(use hw.litedram.dram_memory_model({b.name!r}))")
        super().__init__(graph, replace(cfg, line_buffers=True))
        self.host_wait = Signal(name="host_wait")
        # the real PHY's pins (sim=False): outputs here, the data pins' I/O port set by the board
        # top (fpga.board_top.BoardTop) before elaboration
        self.sdram_pins = None if sim else sdram_pins(info)
        self.sdram_dq = None

    @property
    def signature(self):
        sig = super().signature
        if not hasattr(self, "host_wait"):
            return sig
        return wiring.Signature({**dict(sig.members), "host_wait": Out(1)})

    def summary(self) -> dict:
        out = super().summary()
        out["dram"] = {"board": self.dram_board.name, "controller": f"LiteDRAM {self.dram_board.module} "
                       f"{self.dram_board.phy}", "verilog_lines": self.dram_info["verilog_lines"],
                       "layout": {k: {"base": v.base, "bytes": v.nbytes} for k, v in self.layout.items()},
                       "placement": placement_report(self.graph, self.cfg.onchip, self.layout)}
        return out

    def _wire(self, graph, cfg) -> None:
        _wire(self, graph, cfg)

    def elaborate(self, platform):
        return _elaborate(self, platform)


def _wire(self, graph, cfg) -> None:
    ports = self.mem_ports
    mem_ports, self.mem_ports = self.mem_ports, []
    GraphTop._wire(self, graph, cfg)  # streams only: the memory ports are joined here
    self.mem_ports = mem_ports
    info, b = self.dram_info, self.dram_board
    t = info["timings"]
    self.layout = dram_layout(self.mmap, ports, b.line_bytes, t["row_bytes"], t["banks"], self.allocator)
    aw, dw = info["address_width"], info["data_width"]
    self.engine_native = NativePort(aw, dw).create(path=("engine",))
    if self.shared:
        self.dram_port = NativePort(aw, dw).create(path=("dram_port",))
        self.init_done_in, self.quiet_in = Signal(name="init_done_in"), Signal(name="quiet_in")
    if not ports:
        return
    slots, depths, widths, addr_widths = [], [], [], []
    for p in ports:
        r = self.mmap.region(_region_of(p))
        slots.append(self.layout[r.name])
        depths.append(r.depth)
        widths.append(r.width)
        addr_widths.append(len(getattr(self.components[p.node], f"{p.array}_{'rd' if p.write else 'wr'}").addr))
    eng = self.core.subs["memory"] = LineEngine(ports, slots, depths, widths, addr_widths, cfg.cw, b.line_bytes,
                                                aw, dw)
    self.core.stmts.append(connect_native(eng.native, self.engine_native))
    offchip = {_region_of(p) for p in ports}
    self.dram_reads = {}  # output region -> the host's view of it (read from DRAM after the run)
    for p in ports:
        comp = self.components[p.node]
        self.core.stmts += bus_link(getattr(eng, f"p{p.index}"), getattr(comp, f"mem_{p.array}"))
        if p.write:  # the engine drains the writer's line buffers; the host reads DRAM after
            rd = getattr(comp, f"{p.array}_rd")
            drain = getattr(eng, f"drain{p.index}")
            self.core.stmts += [rd.addr.eq(drain.addr), drain.data.eq(rd.data)]
            region = _region_of(p)
            proxy = SimpleNamespace(addr=Signal(len(rd.addr), name=f"host_{p.array}_{p.index}_addr"),
                                    data=Signal(len(rd.data), name=f"host_{p.array}_{p.index}_data"))
            self.bus.reads[region] = self.dram_reads[region] = proxy
        else:
            fill = getattr(eng, f"fill{p.index}")
            wr = getattr(comp, f"{p.array}_wr")
            self.core.stmts += [wr.addr.eq(fill.addr), wr.data.eq(fill.data), wr.en.eq(fill.en)]
    for region in offchip:  # the host writes these into DRAM, not into the nodes' memories
        self.bus.writes.pop(region, None)


def connect_native(src, dst, through: bool = False) -> list:
    """Statements joining two native-port interfaces of the same direction (engine -> top);
    ``through``: both are the controller's side (a component's port passed on to the
    controller side of a submodule)."""
    out = []
    for name, member in src.signature.members.items():
        a, b = getattr(src, name), getattr(dst, name)
        out.append(b.eq(a) if (member.flow == Out) != through else a.eq(b))
    return out


def _elaborate(self, platform):
    m = GraphTop.elaborate(self, platform)
    info = self.dram_info
    aw, dw = info["address_width"], info["data_width"]
    if self.shared:
        port, init_done, quiet = self.dram_port, self.init_done_in, self.quiet_in
    else:
        m.submodules.dram = ctrl = LiteDRAMCore(info, self.sdram_pins, self.sdram_dq)
        port, init_done, quiet = ctrl.port, ctrl.init_done, ctrl.quiet
    # host writes into off-chip input arrays and reads of off-chip outputs -> the loader
    width = max([r.width for r in self.mmap.regions] + [32])
    m.submodules.loader = ld = _Loader(aw, dw, width)
    addr = self.host_addr
    nb = dw // 8
    # a read of an off-chip output: fetched from DRAM into the loader's rdata; the host waits
    # (host_wait) until the word at its address is there
    fetched, fetched_ok, pending = Signal(len(addr)), Signal(), Signal()
    need, active = Signal(), Signal()
    m.d.comb += active.eq(self.running & ~self.done)
    # ``quiet`` low: native reads whose data has not come back (a line the graph prefetched
    # before its end may still arrive after it) or writes in the controller's slice: the host
    # waits for them, so the loader never takes their data
    for r in self.mmap.regions:
        slot = self.layout.get(r.name)
        if slot is None:
            continue
        k = (r.size - 1).bit_length()
        inside = addr[k:] == (r.base >> k)
        pieces = max(1, slot.word_bytes // nb)
        target = slot.base // nb + addr[:addr_bits(r.depth)] * pieces
        if r.access == "w":
            with m.If(self.host_we & inside):
                m.d.comb += [ld.we.eq(1), ld.pieces.eq(pieces), ld.data.eq(self.host_wdata), ld.addr.eq(target)]
        elif r.name in self.dram_reads:
            m.d.comb += self.dram_reads[r.name].data.eq(ld.rdata)
            with m.If(inside & ~(fetched_ok & (fetched == addr))):  # (the host never writes here)
                m.d.comb += need.eq(1)
                with m.If(~pending & ~ld.busy & init_done & ~active & quiet):
                    m.d.comb += [ld.re.eq(1), ld.pieces.eq(pieces), ld.addr.eq(target)]
    with m.If(ld.re):
        m.d.sync += [fetched.eq(addr), fetched_ok.eq(0), pending.eq(1)]
    with m.Elif(pending & ~ld.busy):
        m.d.sync += [fetched_ok.eq(1), pending.eq(0)]
    with m.If(self.host_we):  # a new run or new data: what was fetched is stale
        m.d.sync += fetched_ok.eq(0)
    # the native port: the engine while the graph runs, the loader otherwise
    eng = self.engine_native
    with m.If(active):
        m.d.comb += connect_native(eng, port)
    with m.Else():
        m.d.comb += connect_native(ld.native, port)
    m.d.comb += self.host_wait.eq(~init_done | ld.busy | pending | need | ~quiet)
    return m
