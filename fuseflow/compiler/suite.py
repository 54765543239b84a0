"""Moved to :mod:`fuseflow.suites.compiler` (this path goes away in the next release)."""

from fuseflow._moved import moved

moved(__name__, "fuseflow.suites.compiler")
