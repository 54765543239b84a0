"""Moved to :mod:`fuseflow.compiler.passes.block` (this path goes away in the next release)."""

from fuseflow._moved import moved

moved(__name__, "fuseflow.compiler.passes.block")
