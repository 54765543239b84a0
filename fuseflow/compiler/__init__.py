"""The FuseFlow compiler: Einsum programs -> cross-expression fusion -> fusion tables -> SAMML.

Pipeline (each stage can be dumped by name, see :meth:`CompiledGroup.explain`)::

    Program --plan_groups--> GroupPlan --fuse_group--> Group (fused einsum, POG, order)
            --build_table--> FusionTable --lower_group--> verified samml.Graph
"""

from . import catalog
from .codegen import CompiledGroup, CompiledProgram, compile_program, lower_group
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
from .program import (
                      Program,
                      ProgramError,
                      Tensor,
                      TensorExpr,
                      UnOp,
                      einsum,
                      exp,
                      gelu,
                      neg,
                      parse_format,
                      relu,
                      rsqrt,
                      sigmoid,
)
from .runner import ProgramResult, graph_runs, reference, reference_all, run_program
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
                     "UnOp",
                     "View",
                     "all_orders",
                     "build_table",
                     "catalog",
                     "compile_program",
                     "einsum",
                     "exp",
                     "fuse_group",
                     "gelu",
                     "graph_runs",
                     "lower_group",
                     "neg",
                     "parse_format",
                     "plan_groups",
                     "reference",
                     "reference_all",
                     "relu",
                     "rsqrt",
                     "run_program",
                     "set_order",
                     "sigmoid",
]
