"""``--par auto=16`` against the truth: every split of 16 lanes simulated in sw_sim.

For each workload, every graph's candidate splits (:func:`fuseflow.cost.par_search.candidate_pars`:
powers of two over up to two indices, 1 to 16 lanes; the ``par`` pass's refusals dropped) are
simulated in sw_sim on the inputs the graph reads in the unsplit run, and their values compared
with the unsplit run's.  The graphs of a program or model run one after another and the split
of one does not change another's inputs, so the best schedule is the best split of each graph
(the exhaustive search over the product of the graphs' candidates has the same optimum).  The
pick of ``--par auto=16`` (the estimate, as the command line computes it) is then set against
the sw_sim best: ratio = pick's sw_sim cycles / best sw_sim cycles (target ≤ 1.15).  Not a test.

    python bench/par_auto.py [--cases spmm bigbird gpt gcn_cora] [--budget 16] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from par_scaling import bigbird_case, spmm_case  # the builders of the par benchmark

from fuseflow.compiler import compile_program
from fuseflow.compiler.runner import run_program
from fuseflow.cost.graph import estimate_graph, estimate_program
from fuseflow.cost.model import estimate_model
from fuseflow.cost.par_search import choose_par_graphs, par_text, split_graphs
from fuseflow.models.steps import CompilerStep
from fuseflow_cli.cmd_common import table
from sw_sim import run_graph


class Case:
    """A workload: its searchable graphs, each graph's inputs and simulator options in the
    unsplit run, that run's outputs, and the estimate's inputs per graph."""

    def __init__(self, name: str, what: str):
        self.name, self.what = name, what
        self.graphs: list = []  # the graphs the par pass splits
        self.inputs: dict[str, tuple[dict, dict]] = {}  # graph -> (its inputs, simulator options)
        self.base: dict[str, object] = {}  # graph -> unsplit sw_sim result
        self.other_cycles = 0  # cycles of graphs the search does not split (a model's ML steps)
        self.est_inputs: dict[str, dict] = {}  # graph -> the estimate's input statistics / data

    def capture(self, searchable: set[str]) -> Callable:
        """A ``simulate`` that runs sw_sim and records what each graph read."""
        def simulate(g, inputs, **kw):
            r = run_graph(g, inputs, **kw)
            if g.name in searchable:
                self.inputs[g.name], self.base[g.name] = (inputs, kw), r
            else:
                self.other_cycles += r.cycles
            return r
        return simulate


def spmm() -> Case:
    c = Case("spmm", "SpMM spmm_csr 64x64, A 10 % nonzeros")
    g, data, _, _ = spmm_case("spmm_csr")
    c.graphs = [g]
    c.capture({g.name})(g, data)
    c.est_inputs = {g.name: data}
    return c


def bigbird() -> Case:
    c = Case("bigbird", "BigBird attention core (examples/programs/bigbird_attention.py)")
    program, data = bigbird_case()
    cp = compile_program(program)
    c.graphs = list(cp.graphs)
    run_program(cp, data, simulate=c.capture({g.name for g in c.graphs}))
    estimate_program(cp, data, graph_inputs=c.est_inputs)
    return c


def _model(name: str, what: str, make) -> Case:
    # deferred: the zoo and the frontend import torch (an optional dependency)
    from fuseflow.models.frontend import trace
    from fuseflow.models.plan import compile_model, run_model
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    case = make()
    ir = trace(case.module, case.inputs, case.formats, name=name)
    cm = compile_model(ir, "partial")
    c = Case(name, what)
    c.graphs = [g for s in cm.steps if isinstance(s, CompilerStep) for g in s.graphs]
    run_model(cm, simulate=c.capture({g.name for g in c.graphs}), max_cycles=10**10)
    estimate_model(cm, graph_inputs=c.est_inputs)
    return c


def gpt(seq: int) -> Case:
    # deferred: the zoo imports torch (an optional dependency)
    from fuseflow.models.zoo import make_case
    return _model("gpt", f"GPT, 1 block, seq {seq}, d 64, 2 heads, partial fusion",
                  lambda: make_case("gpt", None, seq=seq, d=64, heads=2, blocks=1))


def gcn_cora(features: int | None) -> Case:
    # deferred: the zoo imports torch (an optional dependency)
    from fuseflow.models.datasets import load_dataset
    from fuseflow.models.zoo import make_case
    what = f"{features} features" if features else "1433 features"
    return _model("gcn", f"GCN (2 layers, hidden 16) on the Cora-sized graph ({what}), partial fusion",
                  lambda: make_case("gcn", load_dataset("cora", features=features), hidden=16))


def _same(a, b) -> bool:
    return all(np.allclose(a.outputs[t].to_dense(), b.outputs[t].to_dense(), rtol=1e-9, atol=1e-9)
               for t in b.outputs)


def simulate_all(c: Case, budget: int) -> dict[str, dict[str, int]]:
    """sw_sim cycles of every legal split of every graph: graph -> {par_text: cycles}."""
    out: dict[str, dict[str, int]] = {}
    for g in c.graphs:
        inputs, kw = c.inputs[g.name]
        out[g.name] = {}
        for par, h, refused in split_graphs(g, budget):
            if refused:
                continue
            r = run_graph(h, inputs, **kw)
            if not _same(r, c.base[g.name]):
                raise SystemExit(f"{c.name}: graph {g.name} with par {par_text(par)}: values differ from 1 lane")
            out[g.name][par_text(par)] = r.cycles
    return out


def measure(c: Case, budget: int) -> dict:
    t0 = time.perf_counter()
    truth = simulate_all(c, budget)
    sim_s = time.perf_counter() - t0
    choice = choose_par_graphs(c.graphs, budget, lambda g: estimate_graph(g, c.est_inputs[g.name])[0].cycles,
                               qualified=len(c.graphs) > 1)
    best = {n: min(t, key=t.get) for n, t in truth.items()}
    best_cycles = c.other_cycles + sum(truth[n][best[n]] for n in truth)
    pick = {g.graph: par_text(g.chosen) for g in choice.graphs}
    pick_cycles = c.other_cycles + sum(truth[n][pick[n]] for n in truth)
    one = c.other_cycles + sum(truth[n]["1 lane"] for n in truth)
    qual = len(c.graphs) > 1
    return {"case": c.name, "what": c.what, "graphs": len(c.graphs),
            "candidates": sum(len(t) for t in truth.values()), "one_lane_cycles": one,
            "best": _joined(best, qual), "best_cycles": best_cycles,
            "pick": _joined(pick, qual), "pick_cycles": pick_cycles,
            "pick_estimated_cycles": round(choice.estimated_cycles), "ratio": round(pick_cycles / best_cycles, 3),
            "sim_seconds": round(sim_s, 1)}


def _joined(per_graph: dict[str, str], qualified: bool) -> str:
    if not qualified:
        return next(iter(per_graph.values()))
    parts = [", ".join(f"{g}:{e}" for e in p.split(", ")) for g, p in per_graph.items() if p != "1 lane"]
    return "; ".join(parts) or "1 lane"


CASES = {"spmm": spmm, "bigbird": bigbird, "gpt": lambda: gpt(SIZES["seq"]),
         "gcn_cora": lambda: gcn_cora(SIZES["features"])}
SIZES: dict = {"seq": 64, "features": None}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--budget", type=int, default=16)
    p.add_argument("--gpt-seq", type=int, default=64, help="GPT sequence length (reduce if too slow)")
    p.add_argument("--cora-features", type=int, help="features of the Cora-sized graph (default all 1433; "
                   "fewer to simulate every split in reasonable time)")
    p.add_argument("--json")
    args = p.parse_args()
    SIZES.update(seq=args.gpt_seq, features=args.cora_features)
    rows = []
    for name in args.cases:
        t0 = time.perf_counter()
        r = measure(CASES[name](), args.budget)
        r["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(r)
        print(f"{name}: {r}", file=sys.stderr, flush=True)
    print(table([[r["case"], r["graphs"], r["candidates"], f"{r['one_lane_cycles']:,}", r["best"],
                  f"{r['best_cycles']:,}", r["pick"], f"{r['pick_cycles']:,}", f"{r['ratio']:.3f}",
                  r["seconds"]] for r in rows],
                ["case", "graphs", "splits simulated", "1 lane", "sw_sim best", "cycles",
                 f"--par auto={args.budget} pick", "its sw_sim cycles", "pick/best", "s"]))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
