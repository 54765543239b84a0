"""cocotb tests of rtl_sim.streams.StreamSource / StreamSink on the reduce harness of
examples/cocotb_user (run by tests/rtl/test_cocotb_user.py): the stream rule under pauses, sink
back-pressure, pause generators that run out or are replaced, the payload width check."""

from __future__ import annotations

import itertools

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout

from fuseflow.ir.tokens import DONE, stop
from hw.word import decode_word, encode_word, is_done_word
from rtl_sim.streams import StreamSink, StreamSource

VW = 32


async def _start(dut) -> None:
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.go.value = 0
    dut.host_we.value = 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0


async def _until_done(sink: StreamSink) -> list:
    out = []
    while True:
        w = await with_timeout(sink.recv(), 10, "us")
        if is_done_word(w, VW):
            return out
        out.append(decode_word(w, VW, signed=True))


async def _watch_valid(dut, prefix: str, log: list) -> None:
    """Record a violation whenever valid drops, or the payload changes, before a transfer."""
    valid, ready, payload = (getattr(dut, f"{prefix}__{m}") for m in ("valid", "ready", "payload"))
    held = None
    while True:
        await ReadOnly()
        v, r, p = int(valid.value), int(ready.value), int(payload.value)
        if held is not None and (not v or p != held):
            log.append((v, p, held))
        held = p if v and not r else None
        await RisingEdge(dut.clk)


@cocotb.test()
async def source_pauses_never_withdraw_a_word(dut):
    await _start(dut)
    violations: list = []
    cocotb.start_soon(_watch_valid(dut, "in_val", violations))
    src = StreamSource(dut, "in_val", dut.clk, pause=itertools.cycle([True, False]))
    # the sink stalls long stretches so that the source holds words while its pause says True
    sink = StreamSink(dut, "out_val", dut.clk, pause=itertools.cycle([True] * 5 + [False]))
    values = list(range(1, 21))
    src.send_all(encode_word(t, VW) for t in [*values, stop(1), DONE])
    got = await _until_done(sink)
    assert got == [sum(values), stop(0)]
    await with_timeout(src.wait_idle(), 1, "us")
    assert src.idle() and src.count == len(values) + 2 and sink.count == 3
    assert violations == []


@cocotb.test()
async def paused_sink_holds_ready_low_then_takes_everything(dut):
    await _start(dut)
    src = StreamSource(dut, "in_val", dut.clk)
    sink = StreamSink(dut, "out_val", dut.clk, pause=[True] * 40)  # runs out after 40 cycles
    src.send_all(encode_word(t, VW) for t in [4, stop(0), 5, 6, stop(1), DONE])
    for _ in range(30):
        await RisingEdge(dut.clk)
        await ReadOnly()
        assert int(dut.out_val__ready.value) == 0
    assert sink.empty() and sink.count == 0
    assert await _until_done(sink) == [4, 11, stop(0)]
    await src.wait_idle()


@cocotb.test()
async def pause_generator_can_be_replaced(dut):
    await _start(dut)
    src = StreamSource(dut, "in_val", dut.clk, pause=itertools.repeat(True))
    sink = StreamSink(dut, "out_val", dut.clk)
    src.send_all(encode_word(t, VW) for t in [7, stop(1), DONE])
    await ClockCycles(dut.clk, 20)
    assert src.count == 0 and not src.idle()  # paused for ever: nothing offered
    src.set_pause_generator(None)
    assert await _until_done(sink) == [7, stop(0)]


@cocotb.test()
async def send_checks_the_payload_width(dut):
    await _start(dut)
    src = StreamSource(dut, "in_val", dut.clk)
    assert src.width == VW + 1
    for bad in (-1, 1 << (VW + 1)):
        try:
            src.send(bad)
        except ValueError as exc:
            assert "does not fit the 33-bit payload" in str(exc)
        else:
            raise AssertionError(f"send({bad}) accepted")
    src.stop()
