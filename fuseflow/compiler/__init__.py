"""The FuseFlow compiler: Einsum programs -> cross-expression fusion -> fusion tables -> SAMML.

The compiler is a named, ordered pipeline of passes (:mod:`fuseflow.compiler.pipeline`;
:func:`describe_pipeline` lists them, :func:`dump_ir` gives the IR after any of them)::

    Program --plan--> list[GroupPlan] --fuse--> Group (fused einsum, POG, order)
            --table--> list[FusionTable] --lower--> samml.Graph --fifo--> --verify--> samml.Graph
"""

from . import catalog
from .fused import MAX_ORDERS, Group, PermutedCopy, View
from .fusion import Fusion, FusionError, GroupPlan, all_orders, fuse_group, plan_groups, set_order
from .passes.lower import CompiledGroup, CompiledProgram
from .pipeline import (
                     PIPELINE,
                     Options,
                     Pass,
                     UnknownPass,
                     check_par_used,
                     check_program,
                     compile_program,
                     describe_pipeline,
                     dump_ir,
                     graph_text,
                     lower_group,
                     pass_names,
                     pass_options,
                     run_pipeline,
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
                     layernorm,
                     maximum,
                     minimum,
                     neg,
                     parse_format,
                     relu,
                     rsqrt,
                     sigmoid,
                     softmax,
)
from .runner import ProgramResult, graph_runs, reference, reference_all, run_program
from .table import LoweringError, Rejected, build_table
from .table_records import FusionTable

__all__ = [
                     "MAX_ORDERS",
                     "PIPELINE",
                     "CompiledGroup",
                     "CompiledProgram",
                     "Fusion",
                     "FusionError",
                     "FusionTable",
                     "Group",
                     "GroupPlan",
                     "LoweringError",
                     "Options",
                     "Pass",
                     "PermutedCopy",
                     "Program",
                     "ProgramError",
                     "ProgramResult",
                     "Rejected",
                     "Tensor",
                     "TensorExpr",
                     "UnOp",
                     "UnknownPass",
                     "View",
                     "all_orders",
                     "build_table",
                     "catalog",
                     "check_par_used",
                     "check_program",
                     "compile_program",
                     "describe_pipeline",
                     "dump_ir",
                     "einsum",
                     "exp",
                     "fuse_group",
                     "gelu",
                     "graph_runs",
                     "graph_text",
                     "layernorm",
                     "lower_group",
                     "maximum",
                     "minimum",
                     "neg",
                     "parse_format",
                     "pass_names",
                     "pass_options",
                     "plan_groups",
                     "reference",
                     "reference_all",
                     "relu",
                     "rsqrt",
                     "run_pipeline",
                     "run_program",
                     "set_order",
                     "sigmoid",
                     "softmax",
]
