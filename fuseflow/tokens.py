"""The one SAMML token type, its text form and its hardware word encoding.

A token is either a *data* token — a plain Python ``int`` (coordinate, reference or integer
value) or ``float`` (value in float mode) — or a *control* token, an instance of
:class:`Control`: ``Stop(k)``, ``DONE``, ``EMPTY`` or ``REPEAT``.  Control tokens are interned,
so ``tok is DONE`` and ``stop(1) is stop(1)`` hold and the simulators compare by identity.

Text form (README.md, "Tokens and streams"): ``0,2,S0,5,S1,D``; ``Sk`` closes ``k + 1`` fibers,
``D`` is done, ``N`` is empty, ``R`` is a repeat signal.

Hardware word (``width + 1`` bits): bit ``width`` is the control flag.  Data tokens have flag 0
and two's-complement data in bits ``width-1..0``.  Control tokens have flag 1, an opcode in bits
9..8 (0 stop, 1 done, 2 empty) and the stop level in bits 7..0.  Repeat signals travel as
``R`` = data 1, ``S`` = stop 0, ``D`` = done.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "CRD_WIDTH",
    "DONE",
    "EMPTY",
    "MAX_STOP_LEVEL",
    "OP_DONE",
    "OP_EMPTY",
    "OP_STOP",
    "REPEAT",
    "VAL_WIDTH",
    "Control",
    "Stop",
    "Token",
    "decode",
    "encode",
    "format_stream",
    "format_token",
    "is_data",
    "parse_stream",
    "parse_token",
    "stop",
    "wrap",
]

CRD_WIDTH = 16  # default data width of crd / ref streams
VAL_WIDTH = 32  # default data width of val streams (integers, two's complement)

OP_STOP, OP_DONE, OP_EMPTY = 0, 1, 2
MAX_STOP_LEVEL = 255


class Control:
    """Base class of the non-data tokens (interned singletons)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __reduce__(self):  # keep identity across pickling (multiprocessing)
        return (parse_token, (self.text,))


class Stop(Control):
    """``Sk``: closes ``k + 1`` nested fibers at once."""

    __slots__ = ("level",)

    def __init__(self, level: int) -> None:
        super().__init__(f"S{level}")
        self.level = level


_STOPS = tuple(Stop(k) for k in range(MAX_STOP_LEVEL + 1))
DONE = Control("D")
EMPTY = Control("N")
REPEAT = Control("R")

Token = int | float | Control


def stop(level: int) -> Stop:
    """The interned stop token of ``level``."""
    if not 0 <= level <= MAX_STOP_LEVEL:
        raise ValueError(f"stop level {level} out of range 0..{MAX_STOP_LEVEL}")
    return _STOPS[level]


def is_data(tok: Token) -> bool:
    return not isinstance(tok, Control)


def parse_token(text: str) -> Token:
    t = text.strip()
    if t == "D":
        return DONE
    if t == "N":
        return EMPTY
    if t == "R":
        return REPEAT
    if t == "S":  # repeat-signal stop (encoded as S0)
        return _STOPS[0]
    if t[:1] == "S" and t[1:].isdigit():
        return stop(int(t[1:]))
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        raise ValueError(
            f"bad token {text!r}: expected an integer, a number, Sk, D, N or R"
        ) from None


def parse_stream(stream: str | Iterable[Token | str]) -> list[Token]:
    """Parse ``"0,2,S0,D"`` (or a list mixing tokens and token strings) into tokens."""
    if isinstance(stream, str):
        parts = [p for p in stream.replace(" ", "").split(",") if p != ""]
        return [parse_token(p) for p in parts]
    return [parse_token(t) if isinstance(t, str) else t for t in stream]


def format_token(tok: Token) -> str:
    if isinstance(tok, Control):
        return tok.text
    if isinstance(tok, float) and tok.is_integer():
        return repr(tok)
    return str(tok)


def format_stream(tokens: Sequence[Token]) -> str:
    return ",".join(format_token(t) for t in tokens)


def encode(tok: Token, width: int, *, repsig: bool = False) -> int:
    """Hardware word of ``tok`` for a stream of data ``width`` bits (``width + 1`` bits total)."""
    flag = 1 << width
    if repsig:
        if tok is REPEAT:
            return 1
        if isinstance(tok, Stop):
            return flag | (OP_STOP << 8)
        if tok is DONE:
            return flag | (OP_DONE << 8)
        raise ValueError(f"token {format_token(tok)} is not a repeat signal (R, S0 or D)")
    if isinstance(tok, Stop):
        return flag | (OP_STOP << 8) | tok.level
    if tok is DONE:
        return flag | (OP_DONE << 8)
    if tok is EMPTY:
        return flag | (OP_EMPTY << 8)
    if tok is REPEAT:
        raise ValueError("R is only valid on a repsig stream")
    if not isinstance(tok, int):
        raise TypeError(f"hardware words carry integers, got {tok!r}")
    lo, hi = -(1 << (width - 1)), (1 << width) - 1
    if not lo <= tok <= hi:
        raise ValueError(f"data token {tok} does not fit in {width} bits")
    return tok & ((1 << width) - 1)


def decode(word: int, width: int, *, signed: bool = False, repsig: bool = False) -> Token:
    """Inverse of :func:`encode`.  ``signed`` reads data as two's complement (value streams)."""
    if word >> width & 1:
        op = (word >> 8) & 3
        if op == OP_STOP:
            return _STOPS[word & 0xFF]
        if op == OP_DONE:
            return DONE
        if op == OP_EMPTY:
            return EMPTY
        raise ValueError(f"word {word:#x} has an unknown control opcode {op}")
    data = word & ((1 << width) - 1)
    if repsig:
        return REPEAT
    if signed and data >> (width - 1):
        data -= 1 << width
    return data


def wrap(value: int, width: int) -> int:
    """Two's-complement wrap of an integer to ``width`` bits (the hardware's arithmetic)."""
    half = 1 << (width - 1)
    return ((value + half) & ((1 << width) - 1)) - half
