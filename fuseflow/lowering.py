"""Moved to :mod:`fuseflow.compiler.lowering` (this path goes away in the next release)."""

from fuseflow._moved import moved

moved(__name__, "fuseflow.compiler.lowering")
