"""Moved to :mod:`fuseflow.ir.primitives` (this path goes away in the next release)."""

from fuseflow._moved import moved

moved(__name__, "fuseflow.ir.primitives")
