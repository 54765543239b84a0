"""The FuseFlow compiler: Einsum programs -> cross-expression fusion -> fusion tables -> SAMML.

Pipeline (each stage can be dumped by name, see :meth:`CompiledGroup.explain`)::

    Program --plan_groups--> GroupPlan --fuse_group--> Group (fused einsum, POG, order)
            --build_table--> FusionTable --lower_group--> verified samml.Graph
"""

from .codegen import CompiledGroup, CompiledProgram, compile_program, lower_group, verify_routing
from .fusion import (
                     MAX_ORDERS,
                     Fusion,
                     FusionError,
                     Group,
                     GroupPlan,
                     PermutedCopy,
                     View,
                     all_orders,
                     fuse_group,
                     plan_groups,
                     set_order,
)
from .program import Program, ProgramError, Tensor, TensorExpr, einsum, parse_format
from .runner import ProgramResult, reference, run_program
from .table import FusionTable, LoweringError, build_table

__all__ = [
                     "MAX_ORDERS",
                     "CompiledGroup",
                     "CompiledProgram",
                     "Fusion",
                     "FusionError",
                     "FusionTable",
                     "Group",
                     "GroupPlan",
                     "LoweringError",
                     "PermutedCopy",
                     "Program",
                     "ProgramError",
                     "ProgramResult",
                     "Tensor",
                     "TensorExpr",
                     "View",
                     "all_orders",
                     "build_table",
                     "compile_program",
                     "einsum",
                     "fuse_group",
                     "lower_group",
                     "parse_format",
                     "plan_groups",
                     "reference",
                     "run_program",
                     "set_order",
                     "verify_routing",
]
