"""``--par auto[=L]`` with ``--model``: the lanes of each graph of the model, chosen by the
estimate before the command compiles the model.

The model is compiled once without lanes at the granularity the command would compile (``--fusion``
as given; auto: the estimate's pick, said on stderr as usual), every graph's splits within the
budget are estimated on the statistics the model's estimate gives its inputs
(:func:`fuseflow.cost.par_search.choose_par_graphs`, each graph on its own: they run one after
another), and the pick is written back into ``args.par`` as ``GRAPH:INDEX=N`` entries, the
granularity into ``args.fusion``, as if the user had given them.  ``args.par_choice`` keeps the
search's record.  Graph files and kernels resolve ``auto`` where they load
(:func:`fuseflow_cli.cmd_common.load_graph_job`).
"""

from __future__ import annotations

import argparse
import sys

from fuseflow.cost.graph import estimate_graph
from fuseflow.cost.model import estimate_model
from fuseflow.cost.par_search import ParChoice, choose_par_graphs
from fuseflow.ir.memory import MemoryError, Placement
from fuseflow.ir.samml import GraphError
from fuseflow.models.steps import CompilerStep
from fuseflow.schedule import AUTO, ScheduleError, load_schedule, par_budget, parse_par

from .cmd_common import resolve_memory
from .errors import UserError
from .models import load_compiled

__all__ = ["resolve_model_par_auto"]


def _budget(args: argparse.Namespace) -> int | None:
    """The lane budget of ``--par auto`` on the command line (None without it); a schedule
    file's ``par = {auto = …}`` with ``--model`` is refused (give it on the command line)."""
    try:
        given = parse_par(getattr(args, "par", None))
        sched = load_schedule(args.schedule) if getattr(args, "schedule", None) else None
    except ScheduleError as exc:
        raise UserError(str(exc)) from None
    if sched is not None and AUTO in sched.par:
        raise UserError(f"--schedule {args.schedule}: par auto={sched.par[AUTO]} chooses the lanes of a graph "
                        "file or kernel; with --model give --par auto on the command line")
    return par_budget(given) if AUTO in given else None


def resolve_model_par_auto(args: argparse.Namespace) -> ParChoice | None:
    """With ``--model`` and ``--par auto[=L]``: choose the lanes (stderr: the one-line reason;
    ``--explain``: the split and the predicted speedup on stdout) and rewrite ``args.par`` and
    ``args.fusion`` to the pick.  None (nothing changed) otherwise."""
    if not getattr(args, "model", None) or not (getattr(args, "par", None) or getattr(args, "schedule", None)):
        return None
    budget = _budget(args)
    if budget is None:
        return None
    args.par = []
    _, _, cm = load_compiled(args, choose=args.command not in ("estimate", "rank"))
    memory, placement = resolve_memory(args)
    onchip = Placement(placement.onchip, strict=False)
    inputs: dict = {}
    try:
        estimate_model(cm, graph_inputs=inputs, memory=memory, placement=onchip)
        graphs = [g for s in cm.steps if isinstance(s, CompilerStep) for g in s.graphs]
        choice = choose_par_graphs(graphs, budget, lambda g: estimate_graph(
            g, inputs[g.name], memory=memory, placement=onchip)[0].cycles)
    except (MemoryError, GraphError, ValueError) as exc:
        raise UserError(f"--par auto={budget}: model {args.model}: {exc}") from None
    args.par = [f"{k}={f}" for k, f in choice.chosen.items()]
    args.par_choice = choice.to_json()
    print(f"par auto {choice.reason()} (model {args.model} / {args.fusion}, estimate under memory "
          f"{memory.name})", file=sys.stderr)
    if getattr(args, "explain", False) and not getattr(args, "json", False):
        print(choice.explain())
    return choice
