"""Amaranth helpers for the SAMML hardware word (:mod:`fuseflow.tokens`; README "Tokens and streams").

A stream of data width ``w`` carries ``w + 1``-bit words: bit ``w`` is the control flag;
control words hold an opcode in bits 9..8 (0 stop, 1 done, 2 empty) and the stop level in 7..0.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Value

from fuseflow.tokens import OP_DONE, OP_EMPTY, OP_STOP

__all__ = [
    "CTL_WIDTH",
    "data_word",
    "done_word",
    "empty_word",
    "is_ctl",
    "is_data",
    "is_done",
    "is_empty",
    "is_stop",
    "level",
    "recast",
    "stop_word",
]


CTL_WIDTH = 10  # bits of a control word below the flag: opcode in 9..8, stop level in 7..0


def is_ctl(v: Value, w: int) -> Value:
    return v[w]


def is_data(v: Value, w: int) -> Value:
    return ~v[w]


def is_stop(v: Value, w: int) -> Value:
    return v[w] & (v[8:10] == OP_STOP)


def is_done(v: Value, w: int) -> Value:
    return v[w] & (v[8:10] == OP_DONE)


def is_empty(v: Value, w: int) -> Value:
    return v[w] & (v[8:10] == OP_EMPTY)


def level(v: Value) -> Value:
    return v[0:8]


def stop_word(lvl: Value | int, w: int) -> Value:
    lv = Const(lvl, 8) if isinstance(lvl, int) else lvl[:8]
    return Cat(lv, Const(OP_STOP, 2), Const(0, w - 10), Const(1, 1))


def done_word(w: int) -> Const:
    return Const((1 << w) | (OP_DONE << 8), w + 1)


def empty_word(w: int) -> Const:
    return Const((1 << w) | (OP_EMPTY << 8), w + 1)


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
