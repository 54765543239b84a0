"""The one SAMML token type, its text form and its hardware word encoding.

A token is either a *data* token — a plain Python ``int`` (coordinate, reference or integer
value), ``float`` (value in float mode) or a :class:`Vec` of ``W`` lane values (a value of a
vector stream, ``W >= 2``) — or a *control* token, an instance of :class:`Control`: ``Stop(k)``,
``DONE``, ``EMPTY`` or ``REPEAT``.  Control tokens are interned, so ``tok is DONE`` and
``stop(1) is stop(1)`` hold and the simulators compare by identity.

Text form (README.md, "Tokens and streams"): ``0,2,S0,5,S1,D``; ``Sk`` closes ``k + 1`` fibers,
``D`` is done, ``N`` is empty, ``R`` is a repeat signal; a vector is its lanes between
parentheses, lane 0 first, separated by ``|``: ``(1|2|3|4),S0,D``.

Hardware word (``width + 1`` bits): bit ``width`` is the control flag.  Data tokens have flag 0
and two's-complement data in bits ``width-1..0``.  Control tokens have flag 1, an opcode in bits
9..8 (0 stop, 1 done, 2 empty) and the stop level in bits 7..0.  Repeat signals travel as
``R`` = data 1, ``S`` = stop 0, ``D`` = done.  A stream of ``lanes`` lanes of ``width`` bits has
``lanes * width + 1``-bit words: lane ``l`` of a vector in bits ``[l*width, (l+1)*width)``, the
flag in bit ``lanes * width``, control words laid out as above in the low bits.
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
    "Vec",
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

class Vec(tuple):
    """A vector data token: the ``W`` lane values of one value of a vector stream (``W >= 2``;
    a one-lane stream carries plain numbers).  Immutable; equal to the tuple of its lanes."""

    __slots__ = ()

    def __new__(cls, lanes=()):
        v = super().__new__(cls, lanes)
        if len(v) < 2:
            raise ValueError(f"a vector token has at least 2 lanes, got {len(v)}: a one-lane "
                             "stream carries plain numbers")
        return v

    def __repr__(self) -> str:
        return "(" + "|".join(format_token(x) for x in self) + ")"


Token = int | float | Vec | Control


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
    if t[:1] == "(" and t[-1:] == ")":
        try:
            return Vec(_number(x) for x in t[1:-1].split("|"))
        except ValueError:
            raise ValueError(f"bad token {text!r}: a vector is (v0|v1|...) with at least 2 numbers") from None
    try:
        return _number(t)
    except ValueError:
        raise ValueError(
            f"bad token {text!r}: expected an integer, a number, a vector (v0|v1|...), Sk, D, N or R"
        ) from None


def _number(t: str) -> int | float:
    try:
        return int(t)
    except ValueError:
        pass
    return float(t)


def parse_stream(stream: str | Iterable[Token | str]) -> list[Token]:
    """Parse ``"0,2,S0,D"`` (or a list mixing tokens and token strings) into tokens."""
    if isinstance(stream, str):
        parts = [p for p in stream.replace(" ", "").split(",") if p != ""]
        return [parse_token(p) for p in parts]
    return [parse_token(t) if isinstance(t, str) else t for t in stream]


def format_token(tok: Token) -> str:
    if isinstance(tok, Control):
        return tok.text
    if isinstance(tok, Vec):
        return repr(tok)
    if isinstance(tok, float) and tok.is_integer():
        return repr(tok)
    return str(tok)


def format_stream(tokens: Sequence[Token]) -> str:
    return ",".join(format_token(t) for t in tokens)


def encode(tok: Token, width: int, *, repsig: bool = False, lanes: int = 1) -> int:
    """Hardware word of ``tok`` for a stream of data ``width`` bits (``width + 1`` bits total);
    ``lanes``: a vector stream of that many ``width``-bit lanes (``lanes * width + 1`` bits)."""
    if lanes > 1:
        return _encode_vector(tok, width, lanes)
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
        raise TypeError(f"hardware words carry integers, got {tok!r} (a {lanes}-lane stream)")
    lo, hi = -(1 << (width - 1)), (1 << width) - 1
    if not lo <= tok <= hi:
        raise ValueError(f"data token {tok} does not fit in {width} bits")
    return tok & ((1 << width) - 1)


def _encode_vector(tok: Token, width: int, lanes: int) -> int:
    if isinstance(tok, Control):
        return encode(tok, lanes * width)
    if not isinstance(tok, Vec) or len(tok) != lanes:
        raise TypeError(f"a {lanes}-lane stream carries vectors of {lanes} lanes, got {format_token(tok)}")
    word = 0
    for i, x in enumerate(tok):
        word |= encode(x, width) << (i * width)
    return word


def decode(word: int, width: int, *, signed: bool = False, repsig: bool = False, lanes: int = 1) -> Token:
    """Inverse of :func:`encode`.  ``signed`` reads data as two's complement (value streams)."""
    if lanes > 1:
        if word >> (lanes * width) & 1:
            return decode(word, lanes * width)
        mask = (1 << width) - 1
        return Vec(decode(word >> (i * width) & mask, width, signed=signed) for i in range(lanes))
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
