"""Moved to :mod:`fuseflow.compiler.passes.fifo` (this path goes away in the next release)."""

from fuseflow._moved import moved

moved(__name__, "fuseflow.compiler.passes.fifo")
