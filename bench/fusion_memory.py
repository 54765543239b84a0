"""The fusion study with a memory system, and the heuristic's error against sw_sim.

For each model (GCN, GraphSAGE, SAE on KarateClub-sized data, GPT with BigBird attention) x
{unfused, partial, full} x memory {ideal, hbm2, ddr4}: sw_sim cycles, speedup over unfused, FLOPs,
bytes read + written, bytes moved off chip, and the heuristic's (``fuseflow.cost``) FLOPs,
bytes and cycle estimate with its % error and time.  Then, under hbm2, the zoo's other
datasets (GCN / GraphSAGE on every graph shipped with networkx and the Cora-sized synthetic
graph with 32 features, the SAE on scikit-learn's digits): which granularity sw_sim finds
fastest and which the heuristic picks.  Then the heuristic's error over several densities
(GCN / GraphSAGE on uniform random graphs).  Writes docs/fusion_memory.json.

    python bench/fusion_memory.py            # all models (GPT takes ~10 minutes)
    python bench/fusion_memory.py --no-gpt   # the graph models and SAE only
    python bench/fusion_memory.py --no-zoo   # KarateClub, SAE, GPT and the density sweep only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuseflow.ir.memory import parse_memory
from fuseflow.models.datasets import load_dataset, uniform_random
from fuseflow.cost import estimate_model
from fuseflow.models.frontend import trace
from fuseflow.models.plan import FUSIONS, compile_model, run_model
from fuseflow.models.zoo import make_case
from sw_sim import run_graph
from sw_sim.counters import merge_counters

OUT = Path(__file__).resolve().parents[1] / "docs" / "fusion_memory.json"


def pct(est: float, ref: float) -> float:
    return 100.0 * abs(est - ref) / ref if ref else 0.0


def measure(label: str, case, memories: list[str]) -> list[dict]:
    ir = trace(case.module, case.inputs, case.formats, name=case.name)
    rows = []
    for mem in memories:
        model = parse_memory(mem)
        base = None
        for f in FUSIONS:
            cm = compile_model(ir, f)
            t0 = time.perf_counter()
            est = estimate_model(cm, memory=model)
            est_s = time.perf_counter() - t0
            res = run_model(cm, simulate=run_graph, memory=model)
            c = merge_counters([x for _, x in res.counters])
            base = base or res.total_cycles
            moved = c["bytes_read"] + c["bytes_written"]
            emoved = est.bytes_read + est.bytes_written
            row = {"model": label, "memory": mem, "fusion": f, "graphs": len(cm.graphs),
                   "cycles": res.total_cycles, "speedup": round(base / res.total_cycles, 3),
                   "flops": c["flops_total"], "bytes": moved, "bytes_offchip": c["bytes_offchip"],
                   "intensity": c["intensity"], "est_flops": round(est.flops_total), "est_bytes": round(emoved),
                   "est_cycles": round(est.cycles), "err_flops": round(pct(est.flops_total, c["flops_total"]), 2),
                   "err_bytes": round(pct(emoved, moved), 2), "err_cycles": round(pct(est.cycles, res.total_cycles), 2),
                   "est_ms": round(est_s * 1e3, 1), "sim_s": round(res.wall_seconds, 2)}
            rows.append(row)
            print(f"{label:10s} {mem:5s} {f:8s} {row['cycles']:>9d} {row['speedup']:5.2f}x "
                  f"FLOPs {row['flops']:>9d} bytes {row['bytes']:>9d} off-chip {row['bytes_offchip']:>9d} | "
                  f"est {row['est_cycles']:>9d} err F/B/C {row['err_flops']:.1f}/{row['err_bytes']:.1f}/"
                  f"{row['err_cycles']:.1f}% in {row['est_ms']} ms", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-gpt", action="store_true")
    ap.add_argument("--no-zoo", action="store_true")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    memories = ["ideal", "hbm2", "ddr4"]
    karate = load_dataset("karate")
    cases = [("gcn", make_case("gcn", karate)), ("graphsage", make_case("graphsage", karate)),
             ("sae", make_case("sae"))]
    if not args.no_gpt:
        cases.append(("gpt", make_case("gpt")))
    rows = []
    for label, case in cases:
        rows += measure(label, case, memories)
    zoo = []
    if not args.no_zoo:
        for ds_name in ("les_miserables", "florentine_families", "davis_southern_women", "cora_small"):
            ds = load_dataset(ds_name)
            for m in ("gcn", "graphsage"):
                zoo += measure(f"{m}@{ds_name}", make_case(m, ds), ["hbm2"])
        zoo += measure("sae@digits", make_case("sae", "digits"), ["hbm2"])
    sweep = []
    for density in (0.01, 0.03, 0.1):
        ds = uniform_random(128, density * 127, 16)  # G(n, p = density), as recorded in the JSON
        for m in ("gcn", "graphsage"):
            sweep += measure(f"{m}@{density}", make_case(m, ds), ["hbm2"])
    winners = {}
    for r in rows + zoo:
        if r["memory"] == "hbm2":
            key = r["model"]
            group = [x for x in rows + zoo if x["model"] == key and x["memory"] == "hbm2"]
            sim_best = min(group, key=lambda x: x["cycles"])
            est_best = min(group, key=lambda x: x["est_cycles"])
            winners[key] = {"simulated": sim_best["fusion"], "estimated": est_best["fusion"],
                            "margin": round(sorted(x["cycles"] for x in group)[1] / sim_best["cycles"], 3)}
    errs = {}
    for r in rows + zoo + sweep:
        m = r["model"].split("@")[0]
        e = errs.setdefault(m, {"flops": [], "bytes": [], "cycles": []})
        for k in e:
            e[k].append(r[f"err_{k}"])
    summary = {m: {k: {"mean": round(float(np.mean(v)), 2), "worst": round(float(np.max(v)), 2)} for k, v in e.items()}
               for m, e in errs.items()}
    by_memory: dict[str, dict[str, list[float]]] = {}
    for r in rows + zoo + sweep:
        by_memory.setdefault(r["memory"], {}).setdefault(r["model"].split("@")[0], []).append(r["err_cycles"])
    cycles_by_memory = {mem: {m: {"mean": round(float(np.mean(v)), 2), "worst": round(float(np.max(v)), 2)}
                              for m, v in ms.items()} for mem, ms in by_memory.items()}
    print("\nheuristic error per model (mean / worst %):")
    for m, s in summary.items():
        print(f"  {m:10s} FLOPs {s['flops']['mean']:.1f} / {s['flops']['worst']:.1f}   bytes "
              f"{s['bytes']['mean']:.1f} / {s['bytes']['worst']:.1f}   cycles {s['cycles']['mean']:.1f} / {s['cycles']['worst']:.1f}")
    print("cycle error per memory (mean / worst %):")
    for mem, ms in cycles_by_memory.items():
        print(f"  {mem:6s} " + "   ".join(f"{m} {v['mean']:.1f} / {v['worst']:.1f}" for m, v in ms.items()))
    print("fastest granularity under hbm2 (simulated / estimated):", winners)
    OUT.write_text(json.dumps({"rows": rows, "zoo": zoo, "density_sweep": sweep, "errors": summary,
                               "cycle_errors_by_memory": cycles_by_memory, "winners_hbm2": winners},
                              indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
