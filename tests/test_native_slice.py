"""hw.litedram.NativeSlice, the register slice in front of the LiteDRAM controller's native
port: on random traffic (a user that issues reads and writes as the line engine does, a
controller model that stalls its command ready at random, takes a write's data 2 to 5 cycles
after its command and returns read data 3 to 6 cycles after), every command reaches the
controller once and in order, every write stores its own data, every read returns the word at
its address, the slice is never asked for write data it does not hold, and ``quiet`` says when
nothing is in flight."""

from __future__ import annotations

import random
from collections import deque

from amaranth.hdl import Module
from amaranth.lib.fifo import SyncFIFO
from amaranth.sim import Simulator

from hw.litedram import NativeSlice

AW, DW = 12, 16


class _Controller:
    """The controller's side: command ready at random, write data taken ``wgap`` cycles after
    its command at the earliest, read data returned 3 to 6 cycles after, in order."""

    def __init__(self, rng: random.Random, memory: dict[int, int], wgap: tuple[int, int]) -> None:
        self.rng, self.memory, self.wgap = rng, memory, wgap
        self.wdue: deque[tuple[int, int]] = deque()  # (cycle due, address)
        self.rdue: deque[tuple[int, int]] = deque()  # (cycle due, data)
        self.stalls = 0

    def drive(self, ctx, dn, cycle: int) -> tuple[bool, bool, bool]:
        ready = self.rng.random() < 0.6
        self.stalls += not ready
        if self.wgap[0] == 0 and not self.wdue and ready and ctx.get(dn.cmd_valid) and ctx.get(dn.cmd_we):
            self.wdue.append((cycle, -1))  # the data of the command taken now, in the same cycle
        take_w = bool(self.wdue) and self.wdue[0][0] <= cycle
        give_r = bool(self.rdue) and self.rdue[0][0] <= cycle
        ctx.set(dn.cmd_ready, ready)
        ctx.set(dn.wdata_ready, take_w)
        ctx.set(dn.rdata_valid, give_r)
        if give_r:
            ctx.set(dn.rdata_data, self.rdue[0][1])
        return ready, take_w, give_r

    def observe(self, ctx, dn, cycle: int, ready: bool, take_w: bool, give_r: bool) -> None:
        if ctx.get(dn.cmd_valid) and ready:
            we, addr = ctx.get(dn.cmd_we), ctx.get(dn.cmd_addr)
            if we and self.wdue and self.wdue[-1][1] == -1:
                self.wdue[-1] = (cycle, addr)
            elif we:
                self.wdue.append((cycle + max(1, self.rng.randint(*self.wgap)), addr))
            else:
                after = self.rdue[-1][0] + 1 if self.rdue else 0
                self.rdue.append((max(cycle + self.rng.randint(3, 6), after), self.memory[addr]))
        if take_w:
            _, addr = self.wdue.popleft()
            self.memory[addr] = ctx.get(dn.wdata_data)
        if give_r:
            self.rdue.popleft()

    @property
    def busy(self) -> bool:
        return bool(self.wdue or self.rdue)


def _run(wgap: tuple[int, int]) -> tuple[list[str], dict]:
    m = Module()
    dut = m.submodules.dut = NativeSlice(AW, DW)
    # the user's write data queue, filled as a write command is taken (as LineEngine's)
    uq = m.submodules.uq = SyncFIFO(width=DW, depth=8)
    m.d.comb += [dut.up.wdata_data.eq(uq.r_data), uq.r_en.eq(dut.up.wdata_ready), dut.up.wdata_we.eq(3)]
    rng = random.Random(7)
    preload = {a: rng.randrange(1 << DW) for a in range(256)}  # reads come from here
    ctrl = _Controller(rng, dict(preload), wgap)
    errors: list[str] = []
    seen = {"reads": 0, "writes": 0, "expect": {}}
    reads: deque[int] = deque()  # the user's read addresses, in command order
    free_w = iter(range(256, 4096))

    def offer(cycle: int):
        if cycle >= 3500 or rng.random() >= 0.7:
            return None
        return (0, rng.randrange(256), 0) if rng.random() < 0.5 else (1, next(free_w), rng.randrange(1 << DW))

    def user_takes(ctx, want, cycle: int) -> None:
        if ctx.get(dut.up.rdata_valid):
            addr = reads.popleft()
            if ctx.get(dut.up.rdata_data) != preload[addr]:
                errors.append(f"cycle {cycle}: read {addr} gave {ctx.get(dut.up.rdata_data)}")
        if want is not None and want[0]:
            seen["expect"][want[1]] = want[2]
            seen["writes"] += 1
        elif want is not None:
            reads.append(want[1])
            seen["reads"] += 1

    async def bench(ctx):
        want = None  # the user's command on offer: (we, addr, data)
        for cycle in range(4000):
            want = want or offer(cycle)
            ctx.set(dut.up.cmd_valid, want is not None)
            if want is not None:
                ctx.set(dut.up.cmd_we, want[0])
                ctx.set(dut.up.cmd_addr, want[1])
            handshakes = ctrl.drive(ctx, dut.down, cycle)
            taken = want is not None and bool(ctx.get(dut.up.cmd_ready))
            ctx.set(uq.w_en, taken and want[0])
            ctx.set(uq.w_data, want[2] if taken else 0)
            ctrl.observe(ctx, dut.down, cycle, *handshakes)
            user_takes(ctx, want if taken else None, cycle)
            want = None if taken else want
            if (ctrl.busy or reads or ctx.get(uq.r_rdy)) and ctx.get(dut.quiet):
                errors.append(f"cycle {cycle}: quiet with work in flight")
            await ctx.tick()
        if ctx.get(dut.late):
            errors.append("the controller asked for write data the slice did not hold (late)")
        if not ctx.get(dut.quiet) or reads or ctrl.busy:
            errors.append("traffic left in flight at the end")

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    wrong = {a: (v, ctrl.memory.get(a)) for a, v in seen["expect"].items() if ctrl.memory.get(a) != v}
    if wrong:
        errors.append(f"writes stored wrong data: {list(wrong.items())[:3]}")
    return errors, {"reads": seen["reads"], "writes": seen["writes"], "stalls": ctrl.stalls}


def test_native_slice_keeps_order_and_data() -> None:
    errors, seen = _run((2, 5))
    assert not errors, errors[:5]
    assert seen["reads"] > 500 and seen["writes"] > 500 and seen["stalls"] > 500


def test_native_slice_flags_a_controller_that_asks_for_data_too_early() -> None:
    """A controller that takes a write's data in the cycle it takes the command (sooner than the
    slice can have pulled it) is caught by ``late`` (the check above can fail)."""
    errors, _ = _run((0, 5))
    assert any("late" in e for e in errors), errors[:3]
