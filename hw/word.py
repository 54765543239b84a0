"""The SAMML hardware word as an Amaranth data layout, with the helpers every primitive and
testbench shares (:mod:`fuseflow.ir.tokens`; README "Tokens and streams").

A stream of data width ``w`` carries ``w + 1``-bit words (:func:`word_layout`): ``body`` in bits
``w - 1 .. 0`` and the control ``flag`` in bit ``w``.  A data word's body is the value (a vector
stream of ``lanes`` lanes of ``vw`` bits: ``w = lanes * vw``, lane ``l`` in bits
``[l * vw, (l + 1) * vw)``); a control word's body is :func:`control_layout`: the stop
``level`` in bits 7..0 and the :class:`Opcode` in bits 9..8 (the bits above are zero).  The
layout describes exactly the bits the primitives slice, so a view over a payload
(:func:`word_view`) and the bit-level helpers below generate the same logic.

Testbenches build and read words with :func:`encode_word` / :func:`decode_word`, which go
through the layout (``tests/test_word_layout.py`` checks them against
:func:`fuseflow.ir.tokens.encode` for every kind of token).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Value
from amaranth.lib import data, enum

from fuseflow.ir.tokens import DONE, EMPTY, OP_DONE, OP_EMPTY, OP_STOP, REPEAT, Stop, Token, Vec
from fuseflow.ir.tokens import decode as _decode

__all__ = [
    "CTL_WIDTH",
    "Opcode",
    "check_width",
    "control_layout",
    "data_word",
    "decode_word",
    "done_word",
    "empty_word",
    "encode_word",
    "is_ctl",
    "is_data",
    "is_done",
    "is_done_word",
    "is_empty",
    "is_stop",
    "level",
    "recast",
    "stop_word",
    "word_layout",
    "word_view",
]


class Opcode(enum.Enum, shape=2):
    """The opcode of a control word (bits 9..8)."""

    STOP = OP_STOP
    DONE = OP_DONE
    EMPTY = OP_EMPTY


CTL_WIDTH = 10  # bits of a control word below the flag: opcode in 9..8, stop level in 7..0


def check_width(w: int, lanes: int = 1) -> None:
    """A stream data width (and lane count) a word can have: an error naming it otherwise."""
    if not isinstance(w, int) or isinstance(w, bool) or w < CTL_WIDTH:
        raise ValueError(f"stream data width {w!r}: must be an integer of at least {CTL_WIDTH} bits "
                         f"(control words use bits {CTL_WIDTH - 1}..0)")
    if not isinstance(lanes, int) or lanes < 1 or w % lanes:
        raise ValueError(f"lanes = {lanes!r}: must be a positive integer dividing the data width {w}")


def control_layout(w: int) -> data.StructLayout:
    """The body of a control word of a ``w``-bit stream: ``level``, ``op``, zero ``pad``."""
    check_width(w)
    return data.StructLayout({"level": 8, "op": Opcode, "pad": w - CTL_WIDTH})


def word_layout(w: int, lanes: int = 1) -> data.StructLayout:
    """The ``w + 1``-bit word of a stream of data width ``w`` (``lanes`` lanes of ``w // lanes``
    bits for a vector stream): ``body`` (a union of ``data``, or ``lanes`` for a vector, and
    ``ctl``) and ``flag``."""
    check_width(w, lanes)
    body = {"data": w, "ctl": control_layout(w)}
    if lanes > 1:
        body["lanes"] = data.ArrayLayout(w // lanes, lanes)
    return data.StructLayout({"body": data.UnionLayout(body), "flag": 1})


def word_view(v: Value, w: int, lanes: int = 1) -> data.View:
    """``v`` (a stream payload of ``w + 1`` bits) seen through :func:`word_layout`."""
    return data.View(word_layout(w, lanes), v)


def _control(tok: Token, repsig: bool) -> tuple[Opcode, int] | None:
    """The opcode and level of a control token (a repeat signal's stop has level 0)."""
    if isinstance(tok, Stop):
        return Opcode.STOP, 0 if repsig else tok.level
    if tok is DONE:
        return Opcode.DONE, 0
    if tok is EMPTY and not repsig:
        return Opcode.EMPTY, 0
    return None


def encode_word(tok: Token, w: int, *, lanes: int = 1, repsig: bool = False) -> int:
    """The word of ``tok`` on a ``w``-bit stream, built through :func:`word_layout` (a testbench
    helper; :func:`fuseflow.ir.tokens.encode` is the same function on plain integers)."""
    layout = word_layout(w, lanes)
    ctl = _control(tok, repsig)
    if ctl is not None:
        fields = {"body": {"ctl": {"level": ctl[1], "op": ctl[0]}}, "flag": 1}
    elif repsig:
        if tok is not REPEAT:
            raise ValueError(f"token {tok!r} is not a repeat signal (R, S0 or D)")
        fields = {"body": {"data": 1}, "flag": 0}
    elif isinstance(tok, Vec) and len(tok) == lanes > 1:
        vw = w // lanes
        if not all(-(1 << (vw - 1)) <= x < 1 << vw for x in tok):
            raise ValueError(f"vector {tok!r} has a lane that does not fit in {vw} bits")
        fields = {"body": {"lanes": [x & ((1 << vw) - 1) for x in tok]}, "flag": 0}
    elif isinstance(tok, int) and not isinstance(tok, bool) and lanes == 1:
        if not -(1 << (w - 1)) <= tok < 1 << w:
            raise ValueError(f"data token {tok} does not fit in {w} bits")
        fields = {"body": {"data": tok & ((1 << w) - 1)}, "flag": 0}
    else:
        raise ValueError(f"token {tok!r} cannot be carried by a {w}-bit stream of {lanes} lane(s)")
    return layout.const(fields).as_value().value


def decode_word(word: int, w: int, *, lanes: int = 1, signed: bool = False, repsig: bool = False) -> Token:
    """The token of ``word`` on a ``w``-bit stream (``lanes`` lanes; ``signed`` values)."""
    return _decode(word, w // lanes if lanes > 1 else w, signed=signed, repsig=repsig, lanes=lanes)


def is_done_word(word: int, w: int) -> bool:
    """Whether ``word`` (an integer read from a ``w``-bit stream) is the done token."""
    return bool(word >> w & 1) and (word >> 8 & 3) == Opcode.DONE.value


def is_ctl(v: Value, w: int) -> Value:
    return v[w]


def is_data(v: Value, w: int) -> Value:
    return ~v[w]


def _op(v: Value) -> Value:
    """The opcode bits of a control word (``body.ctl.op`` of :func:`word_layout`)."""
    return v[8:CTL_WIDTH]


def is_stop(v: Value, w: int) -> Value:
    return v[w] & (_op(v) == Opcode.STOP.value)


def is_done(v: Value, w: int) -> Value:
    return v[w] & (_op(v) == Opcode.DONE.value)


def is_empty(v: Value, w: int) -> Value:
    return v[w] & (_op(v) == Opcode.EMPTY.value)


def level(v: Value) -> Value:
    """The stop level of a control word (``body.ctl.level``)."""
    return v[0:8]


def stop_word(lvl: Value | int, w: int) -> Value:
    lv = Const(lvl, 8) if isinstance(lvl, int) else lvl[:8]
    return Cat(lv, Const(Opcode.STOP.value, 2), Const(0, w - CTL_WIDTH), Const(1, 1))


def done_word(w: int) -> Const:
    return Const(encode_word(DONE, w), w + 1)


def empty_word(w: int) -> Const:
    return Const(encode_word(EMPTY, w), w + 1)


def data_word(value: Value | int, w: int) -> Value:
    """A data word from ``value`` truncated, or zero/sign-extended, to ``w`` bits."""
    v = Const(value, w) if isinstance(value, int) else Value.cast(value)
    n = len(v)
    if n >= w:
        body = v[:w]
    elif v.shape().signed:
        body = Cat(v, v[-1].replicate(w - n))
    else:
        body = Cat(v, Const(0, w - n))
    return Cat(body, Const(0, 1))


def recast(v: Value, w_in: int, w_out: int) -> Value:
    """A control word of a ``w_in`` stream re-encoded for a ``w_out`` stream."""
    return Cat(v[0:10], Const(0, w_out - 10), v[w_in])
