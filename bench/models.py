"""sw_sim cycles of the model zoo: each model x {unfused, partial, full}, speedup over unfused,
compile times, and the check against PyTorch (float numerics).

    python bench/models.py                       # KarateClub + Cora-shaped (reduced features) + SAE + GPT
    python bench/models.py --cora-features 1433  # the full Cora feature width (slow in sw_sim)
    python bench/models.py --no-locate           # dense levels scanned, not located (before)

Graph models run on KarateClub (34 nodes, one-hot features) and on the Cora-shaped synthetic
graph (2708 nodes, power-law degrees); the Cora feature width defaults to 32 (not 1433) and
the hidden width to 8 so that a point takes minutes, not hours, in the Python cycle model.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuseflow.models.datasets import cora_like, karate
from fuseflow.models.frontend import trace
from fuseflow.models.plan import FUSIONS, compile_model, run_model
from fuseflow.models.zoo import make_case
from sw_sim import run_graph

MAX_CYCLES: int | None = None  # --max-cycles
LOCATE = True  # --no-locate


def bench_case(label: str, case, fusions=FUSIONS) -> list[list[str]]:
    ir = trace(case.module, case.inputs, case.formats, name=case.name)
    with np.errstate(all="ignore"):
        ref = case.reference()
    rows = []
    base = None
    for f in fusions:
        cm = compile_model(ir, f, locate=LOCATE)
        t0 = time.perf_counter()
        res = run_model(cm, max_cycles=MAX_CYCLES, simulate=run_graph)
        wall = time.perf_counter() - t0
        out = res.outputs[ir.outputs[0]]
        err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
        base = base or res.total_cycles
        for note in cm.notes:
            print(f"  note ({label}, {f}): {note.splitlines()[0][:300]}", flush=True)
        rows.append([label, f + ("*" if cm.notes else ""), str(len(cm.graphs)), f"{res.total_cycles:,}", f"{base / res.total_cycles:.2f}x",
                     f"{cm.seconds * 1e3:.0f}", f"{wall:.1f}", f"{err:.1e}"])
        print(" | ".join(rows[-1]), flush=True)
    return rows


def main() -> int:
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cora-features", type=int, default=32)
    ap.add_argument("--cora-hidden", type=int, default=8)
    ap.add_argument("--only", nargs="*", help="subset of: karate cora sae gpt")
    ap.add_argument("--fusions", nargs="*", default=list(FUSIONS), choices=FUSIONS,
                    help="fusion configurations to run (default all)")
    ap.add_argument("--graph-models", nargs="*", default=["gcn", "graphsage"],
                    choices=["gcn", "graphsage"], help="graph models to run (default both)")
    ap.add_argument("--max-cycles", type=int, help="sw_sim cycle limit per graph (default sw_sim's, 50 M)")
    ap.add_argument("--no-locate", dest="locate", action="store_false",
                    help="compile with the locate pass off (dense levels scanned and intersected)")
    args = ap.parse_args()
    global MAX_CYCLES, LOCATE
    MAX_CYCLES, LOCATE = args.max_cycles, args.locate
    which = set(args.only or ["karate", "cora", "sae", "gpt"])
    header = ["model / data", "fusion", "graphs", "sw_sim cycles", "speedup", "compile ms", "sim s", "rel err"]
    print(" | ".join(header))
    rows: list[list[str]] = []
    if "karate" in which:
        for m in args.graph_models:
            rows += bench_case(f"{m} karate", make_case(m, karate(), hidden=16, classes=4), args.fusions)
    if "cora" in which:
        ds = cora_like(args.cora_features)
        for m in args.graph_models:
            rows += bench_case(f"{m} cora(f={args.cora_features})",
                               make_case(m, ds, hidden=args.cora_hidden, classes=7), args.fusions)
    if "sae" in which:
        rows += bench_case("sae 256-128-64 x5", make_case("sae", sae_in=256, batch=5), args.fusions)
    if "gpt" in which:
        rows += bench_case("gpt 2 blk s64 d64 h2", make_case("gpt", seq=64, d=64, heads=2, blocks=2),
                           args.fusions)
    if any(r[1].endswith("*") for r in rows):
        print("\n* the compiler could not lower this fusion for some run; it fell back to a finer "
              "one (see the notes above)")
    print()
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *rows]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
