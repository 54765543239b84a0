"""The code generator's entry points: :func:`compile_program` runs the pass pipeline
(:mod:`fuseflow.compiler.pipeline`), :func:`emit_graph` is its ``lower`` pass
(:mod:`fuseflow.compiler.passes.lower`), and the records of a compiled program."""

from __future__ import annotations

from .passes.lower import CompiledGroup, CompiledProgram, emit_graph
from .pipeline import compile_program, lower_group

__all__ = ["CompiledGroup", "CompiledProgram", "compile_program", "emit_graph", "lower_group"]
