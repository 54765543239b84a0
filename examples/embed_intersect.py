"""Embedding one fuseflow-hw primitive in your own Amaranth design (docs/embedding.md).

``MatchPositions`` is a user component with three ``amaranth.lib.stream`` ports: two streams of
sorted coordinates in (``a``, ``b``: SAMML crd words, a fiber ``c0, c1, .., S0, D``) and one
stream out per result (``crd``: the coordinates in both; ``a_pos`` / ``b_pos``: where each was
in ``a`` and in ``b``).  Inside it is the :class:`hw.primitives.Intersect` of fuseflow-hw, whose
reference inputs this design makes itself: the position of each coordinate in its stream,
built with the word layout of :mod:`hw.word`.

:func:`simulate` runs it under ``amaranth.sim`` and returns the decoded output streams and the
cycle count.  Run as a script it prints them for a small example::

    python examples/embed_intersect.py
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from fuseflow.ir.tokens import DONE, Token, stop
from hw.primitives import Intersect
from hw.word import decode_word, encode_word, is_done_word, word_layout, word_view

__all__ = ["MatchPositions", "simulate"]


class MatchPositions(wiring.Component):
    """The coordinates two sorted streams share, with their positions in both."""

    def __init__(self, cw: int = 16) -> None:
        self.cw = cw
        word = stream.Signature(word_layout(cw))  # a cw-bit SAMML word: body + flag
        super().__init__({"a": In(word), "b": In(word),
                          "crd": Out(word), "a_pos": Out(word), "b_pos": Out(word)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.isect = isect = Intersect(n=2, cw=self.cw)
        for side, k in (("a", 0), ("b", 1)):
            src = getattr(self, side)
            crd_in, ref_in = getattr(isect, f"i_crd{k}"), getattr(isect, f"i_ref{k}")
            pos = Signal(self.cw, name=f"{side}_count")
            # One input stream feeds both of the joiner's inputs of this side: the joiner takes
            # a crd and its ref in the same cycle, so one valid and one ready serve both.
            word = word_view(src.payload.as_value(), self.cw)
            m.d.comb += [
                crd_in.payload.eq(src.payload),
                crd_in.valid.eq(src.valid),
                ref_in.valid.eq(src.valid),
                src.ready.eq(crd_in.ready),
                # a data word's reference is its position; a control word passes as it is
                ref_in.payload.eq(Mux(word.flag, src.payload.as_value(), pos)),
            ]
            with m.If(src.valid & src.ready):
                m.d.sync += pos.eq(Mux(word.flag, 0, pos + 1))  # positions restart after a stop
        wiring.connect(m, isect.o_crd, wiring.flipped(self.crd))
        wiring.connect(m, isect.o_ref0, wiring.flipped(self.a_pos))
        wiring.connect(m, isect.o_ref1, wiring.flipped(self.b_pos))
        return m


def fiber(coords: list[int]) -> list[Token]:
    """One fiber of sorted coordinates as SAMML tokens."""
    return [*coords, stop(0), DONE]


def simulate(a: list[int], b: list[int], cw: int = 16, max_cycles: int = 10_000) -> tuple[dict, int]:
    """Run :class:`MatchPositions` on coordinate lists ``a`` and ``b`` under amaranth.sim.

    Returns ``({"crd": tokens, "a_pos": tokens, "b_pos": tokens}, cycles)``: each output stream
    decoded up to and including its done token, and the cycles until the last of them."""
    dut = MatchPositions(cw)
    out: dict[str, list[int]] = {p: [] for p in ("crd", "a_pos", "b_pos")}
    cycles = [0]

    async def clock(ctx):  # counts cycles until every output has seen its done word
        while not all(ws and is_done_word(ws[-1], cw) for ws in out.values()):
            if cycles[0] == max_cycles:
                return
            await ctx.tick()
            cycles[0] += 1

    # ``ctx.tick().until(c)`` waits for the first clock edge at which ``c`` is high, sampled
    # just before that edge (after every testbench has set its signals for the cycle): a
    # transfer happens at an edge where valid and ready are both high.
    def sender(port, tokens):
        async def send(ctx):
            for tok in tokens:
                ctx.set(port.valid, 1)
                ctx.set(port.payload.as_value(), encode_word(tok, cw))  # the word's bits
                await ctx.tick().until(port.ready)  # hold valid and payload until taken
            ctx.set(port.valid, 0)
        return send

    def receiver(port, words):
        async def receive(ctx):
            ctx.set(port.ready, 1)
            while not words or not is_done_word(words[-1], cw):
                word, = await ctx.tick().sample(port.payload.as_value()).until(port.valid)
                words.append(word)
            ctx.set(port.ready, 0)
        return receive

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    # the stream testbenches run in the background: the simulation ends with `clock`
    sim.add_testbench(sender(dut.a, fiber(a)), background=True)
    sim.add_testbench(sender(dut.b, fiber(b)), background=True)
    for name, words in out.items():
        sim.add_testbench(receiver(getattr(dut, name), words), background=True)
    sim.add_testbench(clock)
    sim.run()
    if not all(ws and is_done_word(ws[-1], cw) for ws in out.values()):
        raise TimeoutError(f"no done word after {max_cycles} cycles")
    return {name: [decode_word(w, cw) for w in words] for name, words in out.items()}, cycles[0]


if __name__ == "__main__":
    streams, n = simulate([0, 2, 5, 7, 9], [2, 3, 5, 9, 11])
    for name, toks in streams.items():
        print(f"{name:6} {toks}")
    print(f"{n} cycles")
