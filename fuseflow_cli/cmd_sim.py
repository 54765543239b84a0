"""``fuseflow-hw sim``: run a SAMML graph in the cycle model."""

from __future__ import annotations

import numpy as np

from sw_sim import SimError, run_graph

from .cmd_common import add_graph_args, load_graph_job, table
from .errors import UserError
from .models import add_model_args, run_model


def add_parser(sub) -> None:
    p = sub.add_parser("sim", help="run a graph in sw_sim (values + cycles)")
    add_graph_args(p)
    p.add_argument("--stats", action="store_true", help="print per-node statistics")
    add_model_args(p)


def run(args) -> int:
    if args.model:
        return run_model(args)
    job = load_graph_job(args)
    try:
        res = run_graph(job.graph, job.data)
    except SimError as exc:
        raise UserError(str(exc)) from None
    print(f"{job.source}: {res.cycles} cycles in sw_sim ({res.wall_seconds * 1e3:.1f} ms, "
          f"{res.node_cycles / max(res.wall_seconds, 1e-9) / 1e6:.2f} M node-cycles/s)")
    if args.stats:
        rows = [[n, s.tokens_in, s.tokens_out, s.fire_cycles, s.stall_cycles, s.starve_cycles]
                for n, s in res.stats.items()]
        print(table(rows, ["node", "tokens in", "tokens out", "active", "stalled", "starved"]))
    ok = True
    if job.expected is not None:
        [out] = res.outputs.values()
        ok = bool(np.array_equal(out.to_dense(), job.expected))
        print(f"check against numpy: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1
