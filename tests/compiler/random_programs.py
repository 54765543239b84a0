"""Random small Einsum programs with random formats, mode orders and sparse integer data: the
hypothesis strategy of the compiler's property test and fuzzing (``programs()``, ``build``)."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, event
from hypothesis import strategies as st

from fuseflow.compiler import Fusion, FusionError, LoweringError, Program, compile_program, einsum

__all__ = ["SIZES", "build", "compile_or_assume", "operand", "programs"]

SIZES = {"i": 3, "j": 4, "k": 3, "l": 2, "m": 2}


@st.composite
def operand(draw, letters: list[str]) -> tuple[str, tuple[str, ...], tuple[int, ...], float]:
    idx = "".join(draw(st.permutations(letters)))
    levels = tuple(draw(st.sampled_from(["d", "c"])) for _ in idx)
    mode_order = tuple(draw(st.permutations(range(len(idx)))))
    density = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    return idx, levels, mode_order, density


@st.composite
def programs(draw):
    out = "".join(draw(st.permutations(draw(st.sampled_from(["i", "ij", "ji"])))))
    red = draw(st.sampled_from(["", "k", "kl"]))
    n_ops = draw(st.integers(1, 3))
    ops = []
    for _ in range(n_ops):
        pool = list(out + red)
        k = draw(st.integers(1, min(2, len(pool))))
        ops.append(draw(operand(draw(st.permutations(pool)).__getitem__(slice(0, k)))))
    used = set("".join(o[0] for o in ops))
    missing = [c for c in out + red if c not in used]
    if missing:
        ops.append(draw(operand(missing[:2])))
        if len(missing) > 2:
            ops.append(draw(operand(missing[2:])))
    addend = draw(st.none() | operand(list(out)))
    scale = draw(st.sampled_from([1, 1, 2, -3]))
    chain = draw(st.booleans())
    return out, ops, addend, scale, chain


def build(spec) -> tuple[Program, dict[str, np.ndarray]]:
    out, ops, addend, scale, chain = spec
    rng = np.random.default_rng(abs(hash(repr(spec))) % 2**32)
    p = Program("prop")
    tensors, data = [], {}

    def declare(name, idx, levels, mode_order, density):
        shape = tuple(SIZES[c] for c in idx)
        t = p.tensor(name, shape, levels, mode_order=mode_order)
        a = rng.integers(-3, 4, shape)
        a[rng.random(shape) >= density] = 0
        data[name] = a
        return t

    for n, (idx, levels, mo, dens) in enumerate(ops):
        tensors.append(declare(f"T{n}", idx, levels, mo, dens))
    spec_in = ",".join(o[0] for o in ops)
    expr = einsum(f"{spec_in}->{out}", *tensors)
    if scale != 1:
        expr = scale * expr
    if addend is not None:
        idx, levels, mo, dens = addend
        b = declare("B", idx, levels, mo, dens)
        expr = expr + einsum(f"{idx}->{out}", b) if idx != out else expr + b
    y = p.let("Y", expr)
    if chain:
        w = declare("W", out[-1] + "m", ("d", "d"), (0, 1), 1.0)
        p.output(p.let("Z", einsum(f"{out},{out[-1]}m->{out[:-1]}m", y, w)))
    else:
        p.output(y)
    return p, data


def compile_or_assume(program: Program, fusion: Fusion, factored: bool):
    """``program`` compiled; a program the compiler refuses with a reason (an order-2
    accumulator, a broadcast over a compressed level) is no example (``assume(False)``), the
    refusal recorded as a hypothesis event."""
    try:
        compiled = compile_program(program, fusion, factored=factored)
    except (FusionError, LoweringError) as exc:
        event(f"refused: {type(exc).__name__}")
        assume(False)
    event("compiled")
    return compiled
