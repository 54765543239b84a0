"""A registered product: operand registers, a multiplier, a product register.

:func:`registered_product` is what every multiplier lane of :class:`hw.alu.Alu` is built
from: ``x`` and ``y`` are loaded into operand registers when ``take``, their product into the
product register when ``load``, and the product register is returned (two cycles from
operands to product, whatever the target).

Generic targets (simulation, iCE40, Gowin) get the registers as flip-flops around a ``*``,
which synthesis maps to a DSP block.  On the ECP5 the three registers are the DSP block's own:
yosys maps a product to ``MULT18X18D`` but does not pack flip-flops into its input or output
registers, so every product was fabric register → DSP → fabric register, and with lanes spread
over the die the route between them was the critical path.  The ECP5 variant instantiates the
block with its input registers (clock enable ``CE0`` = ``take``) and its output register
(``CE1`` = ``load``): the same cycle behaviour, with the routes before and after the registers.
Operands must fit the block's 18-bit signed inputs (an unsigned operand up to 17 bits); a wider
pair falls back to the generic form.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import ClockSignal, Const, Instance, Signal, Value, signed
from amaranth.vendor import LatticePlatform

__all__ = ["ECP5_DSP_WIDTH", "ecp5_mult18x18d_params", "is_ecp5", "registered_product"]

ECP5_DSP_WIDTH = 18  # MULT18X18D: 18 × 18 bits, two's complement when SIGNEDA / SIGNEDB


def is_ecp5(platform) -> bool:
    """The design is being built for an ECP5 part (its DSP blocks are ``MULT18X18D``)."""
    return isinstance(platform, LatticePlatform) and platform.family == "ecp5"


def _fits_signed(v: Value, width: int) -> bool:
    shape = v.shape()
    return shape.width + (0 if shape.signed else 1) <= width


def ecp5_mult18x18d_params(a: Value, b: Value, p: Value, take: Value, load: Value) -> dict:
    """The ``Instance("MULT18X18D", **params)`` keywords of one registered 18 × 18 product:
    ``a``, ``b`` 18-bit signed operands, ``p`` its 36-bit product; input registers enabled by
    ``take`` (``CE0``), the output register by ``load`` (``CE1``), no reset (``RST0`` low).
    ``SRIA`` / ``SRIB`` (the cascade inputs) stay unconnected: fabric cannot drive them."""
    params: dict = {
        "p_REG_INPUTA_CLK": "CLK0", "p_REG_INPUTA_CE": "CE0", "p_REG_INPUTA_RST": "RST0",
        "p_REG_INPUTB_CLK": "CLK0", "p_REG_INPUTB_CE": "CE0", "p_REG_INPUTB_RST": "RST0",
        "p_REG_INPUTC_CLK": "NONE", "p_REG_PIPELINE_CLK": "NONE",
        "p_REG_OUTPUT_CLK": "CLK0", "p_REG_OUTPUT_CE": "CE1", "p_REG_OUTPUT_RST": "RST0",
        "p_GSR": "DISABLED", "p_RESETMODE": "SYNC", "p_MULT_BYPASS": "DISABLED",
        "p_SOURCEB_MODE": "B_SHIFT", "p_CAS_MATCH_REG": "FALSE",
        "p_CLK0_DIV": "ENABLED", "p_CLK1_DIV": "ENABLED", "p_CLK2_DIV": "ENABLED",
        "p_CLK3_DIV": "ENABLED", "p_HIGHSPEED_CLK": "NONE",
        "i_CLK0": ClockSignal("sync"), "i_CE0": take, "i_CE1": load,
        "i_RST0": Const(0, 1), "i_SIGNEDA": Const(1, 1), "i_SIGNEDB": Const(1, 1),
        "i_SOURCEA": Const(0, 1), "i_SOURCEB": Const(0, 1),
    }
    for k in range(ECP5_DSP_WIDTH):
        params[f"i_A{k}"], params[f"i_B{k}"], params[f"i_C{k}"] = a[k], b[k], Const(0, 1)
    for k in range(2 * ECP5_DSP_WIDTH):
        params[f"o_P{k}"] = p[k]
    return params


def registered_product(m, x: Value, y: Value, take: Value, load: Value, name: str, platform=None,
                       instance: Callable[..., object] | None = None, init: tuple[int, int] = (0, 0)) -> Value:
    """``x * y`` two cycles later, through operand registers (loaded when ``take``) and a
    product register (loaded when ``load``); a signed value of ``x.width + y.width + 1`` bits.

    ``instance``: what builds the ECP5 block from :func:`ecp5_mult18x18d_params` (default:
    an ``Instance("MULT18X18D")``; a test passes a behavioural model).  ``init``: the operand
    registers' initial values on generic targets (the copies of one operand that feed separate
    DSP blocks must differ, or synthesis merges them back into one register)."""
    width = len(x) + len(y) + 1  # the product of two unsigned operands is signed here
    prod = Signal(signed(width), name=f"pp{name}", reset_less=True)
    if is_ecp5(platform) and _fits_signed(x, ECP5_DSP_WIDTH) and _fits_signed(y, ECP5_DSP_WIDTH):
        a, b = Signal(signed(ECP5_DSP_WIDTH), name=f"a{name}"), Signal(signed(ECP5_DSP_WIDTH), name=f"b{name}")
        p = Signal(signed(2 * ECP5_DSP_WIDTH), name=f"p{name}")
        m.d.comb += [a.eq(x), b.eq(y), prod.eq(p)]
        make = instance or (lambda **kw: Instance("MULT18X18D", **kw))
        m.submodules[f"dsp{name}"] = make(**ecp5_mult18x18d_params(a, b, p, take, load))
        return prod
    xr = Signal(x.shape(), name=f"x{name}", reset_less=True, init=init[0])
    yr = Signal(y.shape(), name=f"y{name}", reset_less=True, init=init[1])
    with m.If(take):
        m.d.sync += [xr.eq(x), yr.eq(y)]
    with m.If(load):
        m.d.sync += prod.eq(xr * yr)
    return prod
