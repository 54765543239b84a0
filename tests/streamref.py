"""Independent reference semantics on streams, written from the stream rules (README "Tokens and
streams") without the simulator."""

from __future__ import annotations

from fuseflow.ir.tokens import DONE, EMPTY, Stop, Token, parse_stream


def fibers(stream) -> list[tuple[list, Stop]]:
    """Split a stream into (innermost fiber elements, closing stop) pairs."""
    toks = parse_stream(stream)
    assert toks[-1] is DONE, "stream must end with D"
    out, cur = [], []
    for t in toks[:-1]:
        if isinstance(t, Stop):
            out.append((cur, t))
            cur = []
        else:
            cur.append(t)
    assert not cur, "data after the last stop"
    return out


def join(fibs: list[tuple[list, Stop]]) -> list[Token]:
    out: list[Token] = []
    for elems, s in fibs:
        out += elems + [s]
    return out + [DONE]


def intersect(crds: list) -> list[Token]:
    fs = [fibers(c) for c in crds]
    res = []
    for parts in zip(*fs):
        common = set(parts[0][0])
        for elems, _ in parts[1:]:
            common &= set(elems)
        res.append((sorted(common), parts[0][1]))
    return join(res)


def union(crds: list) -> list[Token]:
    fs = [fibers(c) for c in crds]
    return join([(sorted(set().union(*[set(e) for e, _ in parts])), parts[0][1]) for parts in zip(*fs)])


def reduce_add(vals) -> list[Token]:
    """One sum per innermost fiber; stop Sk (k>=1) becomes S(k-1) after the sum."""
    out: list[Token] = []
    for elems, s in fibers(vals):
        out.append(sum(0 if e is EMPTY else e for e in elems))
        if s.level:
            out.append(Stop(s.level - 1) if False else __import__("fuseflow").stop(s.level - 1))
    return out + [DONE]
