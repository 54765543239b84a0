"""The stream word as an Amaranth data layout (hw/word.py): the words it builds are the words of
fuseflow.ir.tokens' own encoder for every kind of token, width and lane count; a view over a
payload reads the same fields as the bit-level helpers the primitives use (in amaranth.sim);
constructors name a bad width, lane count, depth or input count."""

from __future__ import annotations

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from fuseflow.ir.tokens import DONE, EMPTY, REPEAT, Vec, encode, stop
from hw.primitives import Alu, Intersect, Scan
from hw.word import (
    Opcode,
    control_layout,
    decode_word,
    encode_word,
    is_ctl,
    is_done,
    is_done_word,
    is_empty,
    is_stop,
    level,
    word_layout,
    word_view,
)


@pytest.mark.parametrize("w", [10, 16, 32])
def test_scalar_words_equal_the_token_encoder(w):
    toks = [0, 1, 5, (1 << (w - 1)) - 1, -1, -(1 << (w - 1)), DONE, EMPTY, *(stop(k) for k in range(6))]
    for tok in toks:
        word = encode_word(tok, w)
        assert word == encode(tok, w), tok
        assert decode_word(word, w, signed=True) == tok
        assert is_done_word(word, w) == (tok is DONE)
    for tok in (REPEAT, stop(0), DONE):
        assert encode_word(tok, w, repsig=True) == encode(tok, w, repsig=True)


@pytest.mark.parametrize(("vw", "lanes"), [(16, 2), (32, 4), (10, 8)])
def test_vector_words_equal_the_token_encoder(vw, lanes):
    w = vw * lanes
    hi, lo = (1 << (vw - 1)) - 1, -(1 << (vw - 1))
    for tok in (Vec([hi, lo, *range(lanes - 2)]), Vec([-1] * lanes), stop(2), DONE, EMPTY):
        word = encode_word(tok, w, lanes=lanes)
        assert word == encode(tok, vw, lanes=lanes), tok
        assert decode_word(word, w, lanes=lanes, signed=True) == tok


def test_layout_shape():
    layout = word_layout(16)
    assert layout.size == 17 and layout["flag"].offset == 16
    ctl = control_layout(16)
    assert (ctl["level"].offset, ctl["op"].offset, ctl["pad"].offset) == (0, 8, 10)
    assert word_layout(32, lanes=4)["body"].shape["lanes"].shape.length == 4


def test_view_reads_what_the_bit_helpers_read():
    """A payload seen through word_view: flag, opcode and level are the bits is_ctl /
    is_stop / is_done / is_empty / level decide on, for every kind of word."""
    w = 16
    m = Module()
    payload = Signal(w + 1)
    view = word_view(payload, w)
    probes = {"flag": Signal(), "op": Signal(2), "lvl": Signal(8), "ctl": Signal(), "stop": Signal(),
              "done": Signal(), "empty": Signal(), "level": Signal(8)}
    m.d.comb += [probes["flag"].eq(view.flag), probes["op"].eq(view.body.ctl.op),
                 probes["lvl"].eq(view.body.ctl.level), probes["ctl"].eq(is_ctl(payload, w)),
                 probes["stop"].eq(is_stop(payload, w)), probes["done"].eq(is_done(payload, w)),
                 probes["empty"].eq(is_empty(payload, w)), probes["level"].eq(level(payload))]
    seen = []

    async def bench(ctx):
        for tok in (7, -3, stop(0), stop(3), DONE, EMPTY):
            ctx.set(payload, encode_word(tok, w))
            got = {k: ctx.get(s) for k, s in probes.items()}
            assert got["flag"] == got["ctl"] == (not isinstance(tok, int)), tok
            if got["flag"]:
                assert got["stop"] == (got["op"] == Opcode.STOP.value) and got["done"] == (tok is DONE)
                assert got["empty"] == (got["op"] == Opcode.EMPTY.value) == (tok is EMPTY)
                assert got["lvl"] == got["level"] == (tok.level if tok not in (DONE, EMPTY) else 0)
            seen.append(tok)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == 6


@pytest.mark.parametrize(("make", "says"), [
    (lambda: Intersect(n=2, cw=8), "Intersect: port 'crd0': stream data width 8: must be an integer of at least 10"),
    (lambda: Intersect(n=1), "Intersect: n = 1: joins at least 2 inputs"),
    (lambda: Alu(op="add", vw=32, depths={"val": 0}), "Alu: output 'val' FIFO depth 0: must be an integer of at least 1"),
    (lambda: Alu(op="add", vw=32, depths={"out": 2}), "Alu: a FIFO depth for 'out', which is not an output"),
    (lambda: word_layout(32, lanes=3), "lanes = 3: must be a positive integer dividing the data width 32"),
    (lambda: control_layout(9), "stream data width 9"),
])
def test_constructors_name_what_is_wrong(make, says):
    with pytest.raises(ValueError) as exc:
        make()
    assert says in str(exc.value)


def test_scan_constructs():
    """A valid primitive still constructs (the checks reject only bad parameters)."""
    Scan(compressed=True, cw=16, seg_depth=8, crd_depth=8)
