"""A user's own cocotb test against a generated top (docs/cocotb.md).

The top is the ``reduce`` primitive (``op = add``) behind its stream harness
(:class:`hw.PrimitiveHarness`, built by ``run.py`` beside this file): value stream in on port
``in_val``, value stream out on ``out_val``.  The test sends a random ragged matrix as one
stream of rows (``Sk`` stop tokens between rows, ``D`` at the end), with pauses on both sides,
and checks every row sum against numpy.  The checks are plain ``assert`` statements inside the
cocotb test, so a wrong value fails the test in cocotb's ``results.xml``.

``REDUCE_TB_SEED`` picks the matrix; ``REDUCE_TB_EXPECT_OFFSET`` (default 0) is added to every
expected sum: a non-zero offset is a deliberately wrong expectation, for checking that the check
can fail.
"""

from __future__ import annotations

import itertools
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, with_timeout

from fuseflow.ir.tokens import DONE, Token, stop
from hw.word import decode_word, encode_word, is_done_word
from rtl_sim.streams import StreamSink, StreamSource

VW = 32  # data width of value streams (hw.HwConfig().vw); the payload has VW + 1 bits


def ragged_rows(seed: int, n_rows: int = 12) -> list[np.ndarray]:
    """Rows of 0..6 random int16 values (empty rows included)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-(1 << 15), 1 << 15, size=int(rng.integers(0, 7))) for _ in range(n_rows)]


def row_tokens(rows: list[np.ndarray]) -> list[Token]:
    """The matrix as one SAMML value stream: ``S0`` after each row, ``S1`` after the last, ``D``."""
    toks: list[Token] = []
    for i, row in enumerate(rows):
        toks += [int(x) for x in row]
        toks.append(stop(1 if i == len(rows) - 1 else 0))
    return [*toks, DONE]


async def reset(dut) -> None:
    dut.rst.value = 1
    dut.go.value = 0
    dut.host_we.value = 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0


@cocotb.test()
async def reduce_rows_match_numpy(dut):
    seed = int(os.environ.get("REDUCE_TB_SEED", "1"))
    offset = int(os.environ.get("REDUCE_TB_EXPECT_OFFSET", "0"))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut)

    # the source idles one cycle in three; the sink drops ready on a seeded quarter of cycles
    rng = random.Random(seed)
    src = StreamSource(dut, "in_val", dut.clk, pause=itertools.cycle([False, False, True]))
    sink = StreamSink(dut, "out_val", dut.clk, pause=(rng.random() < 0.25 for _ in itertools.count()))

    rows = ragged_rows(seed)
    for tok in row_tokens(rows):
        src.send(encode_word(tok, VW))

    got: list[Token] = []
    while True:
        word = await with_timeout(sink.recv(), 20, "us")
        if is_done_word(word, VW):
            break
        got.append(decode_word(word, VW, signed=True))
    await with_timeout(src.wait_idle(), 1, "us")

    sums = [int(np.sum(row, dtype=np.int64)) + offset for row in rows]  # the reference: numpy
    assert got[:-1] == sums, f"row sums: RTL {got[:-1]}, numpy {sums}"
    assert got[-1] is stop(0), f"the sums end with {got[-1]}, not S0"
    assert src.count == len(row_tokens(rows)) and sink.count == len(rows) + 2
