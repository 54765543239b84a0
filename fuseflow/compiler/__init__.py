"""The FuseFlow compiler: Einsum programs -> cross-expression fusion -> fusion tables -> SAMML.

Pipeline (each stage can be dumped by name, see :meth:`CompiledGroup.explain`)::

    Program --plan_groups--> GroupPlan --fuse_group--> Group (fused einsum, POG, order)
            --build_table--> FusionTable --lower_group--> verified samml.Graph
"""

from .codegen import CompiledGroup, CompiledProgram, compile_program, lower_group
from .fusion import (MAX_ORDERS, Fusion, FusionError, Group, PermutedCopy, View, all_orders,
                     fuse_program, plan_groups, set_order)
from .program import (Program, ProgramError, Tensor, TensorExpr, einsum, parse_format)
from .runner import ProgramResult, reference, run_program
from .table import FusionTable, LoweringError, build_table

__all__ = [
    "Program", "ProgramError", "Tensor", "TensorExpr", "einsum", "parse_format", "Fusion",
    "FusionError", "Group", "PermutedCopy", "View", "all_orders", "fuse_program", "plan_groups",
    "set_order", "MAX_ORDERS", "FusionTable", "LoweringError", "build_table", "CompiledGroup",
    "CompiledProgram", "compile_program", "lower_group", "ProgramResult", "run_program",
    "reference",
]
