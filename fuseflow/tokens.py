"""Moved to :mod:`fuseflow.ir.tokens` (this path goes away in the next release)."""

from fuseflow._moved import moved

moved(__name__, "fuseflow.ir.tokens")
