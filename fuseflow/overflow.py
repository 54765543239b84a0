"""Moved to :mod:`fuseflow.ir.overflow` (this path goes away in the next release)."""

from fuseflow._moved import moved

moved(__name__, "fuseflow.ir.overflow")
