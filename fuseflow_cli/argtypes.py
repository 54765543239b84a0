"""Range-checked argument types for the command line: a value out of range is an argparse error
naming the option's value and the range (exit status 2), never a silent clamp."""

from __future__ import annotations

import argparse
import math

from fuseflow.options import int_range

__all__ = ["MAX_FIFO_DEPTH", "MAX_SIZE", "fraction", "int_range", "positive_float"]

MAX_SIZE = 1 << 16  # kernel sizes, nodes, widths: above this a dense operand alone is gigabytes
MAX_FIFO_DEPTH = 1 << 16  # channel FIFO depth: above this one FIFO's registers are megabytes


def _float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return v


def fraction(text: str) -> float:
    """A density: a finite number in (0, 1]."""
    v = _float(text)
    if not 0.0 < v <= 1.0:
        raise argparse.ArgumentTypeError(f"{v} is out of range: a density is above 0 and at most 1")
    return v


def positive_float(text: str) -> float:
    """A finite number above 0."""
    v = _float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{v} is out of range: use a number above 0")
    return v
