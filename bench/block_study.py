"""Sparsity blocking study: BigBird attention with unstructured vs blocked iteration.

For each BigBird block size B (16, 32, 64 by default), the attention core of
``examples/programs/bigbird_attention.py`` (S = M ∘ Q·Kᵀ, O = S·V, one graph) runs in sw_sim on
the seeded BigBird mask of blocks of B at the given sequence length twice, in the same run:
unstructured (M as CSR, every entry a scalar token) and blocked (``block={"j": B}``: the key
dimension in blocks of B, each a vector of B lanes).  Both are checked against numpy; FLOPs come
from sw_sim's counters.  With ``--gpt`` the GPT-3 + BigBird rows of docs/fusion_memory.json
(written by ``bench/fusion_memory.py``) are drawn beside them.  Writes docs/block_study.json and
docs/block_study.png.

    python bench/block_study.py                 # seq 512, blocks 16 32 64
    python bench/block_study.py --seq 256 --blocks 16 32
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "programs"))

import bigbird_attention

from fuseflow.compiler import Fusion, compile_program, run_program
from fuseflow.models.datasets import bigbird_mask
from sw_sim import run_graph

OUT = ROOT / "docs" / "block_study"


def measure(seq: int, head: int, block: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    mask = bigbird_mask(seq, block, seed=seed).astype(np.int64)
    data = {"M": mask, "Q": rng.integers(-3, 4, (seq, head)), "K": rng.integers(-3, 4, (seq, head)),
            "V": rng.integers(-3, 4, (seq, head))}
    want = (mask * (data["Q"] @ data["K"].T)) @ data["V"]
    row = {"seq": seq, "head": head, "block": block, "density": round(float(mask.mean()), 4)}
    for label, kw in (("unstructured", {}), ("blocked", {"block": {"j": block}})):
        t0 = time.perf_counter()
        cp = compile_program(bigbird_attention.program(seq, head), Fusion.FULL, **kw)
        res = run_program(cp, data, simulate=run_graph)
        if not np.array_equal(res.dense("O"), want):
            raise SystemExit(f"{label} block {block}: values differ from numpy")
        row[label] = {"cycles": res.total_cycles,
                      "flops": int(sum(c["flops_total"] for c in res.counters)),
                      "seconds": round(time.perf_counter() - t0, 2)}
    row["speedup"] = round(row["unstructured"]["cycles"] / row["blocked"]["cycles"], 2)
    return row


def plot(rows: list[dict], gpt: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if gpt else 1, figsize=(11 if gpt else 5.5, 4), squeeze=False)
    ax = axes[0][0]
    xs = [r["block"] for r in rows]
    ax.plot(xs, [r["speedup"] for r in rows], "o-", label="blocked / unstructured")
    ax.plot(xs, xs, ":", color="grey", label="= block size")
    for r in rows:
        ax.annotate(f"{r['speedup']:.1f}x", (r["block"], r["speedup"]), textcoords="offset points",
                    xytext=(4, -12))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("BigBird block size (vector lanes)")
    ax.set_ylabel("speedup over unstructured (sw_sim cycles)")
    ax.set_title(f"BigBird attention, seq {rows[0]['seq']}, head {rows[0]['head']}")
    ax.legend()
    if gpt:
        ax = axes[0][1]
        fusions = ["unfused", "partial", "full"]
        for k, mem in enumerate(("ideal", "hbm2")):
            ys = [next(r["speedup"] for r in gpt if r["memory"] == mem and r["fusion"] == f) for f in fusions]
            bars = ax.bar([i + 0.38 * k for i in range(3)], ys, 0.38, label=mem)
            ax.bar_label(bars, fmt="%.2fx")
        ax.set_xticks([i + 0.19 for i in range(3)], fusions)
        ax.set_ylabel("speedup over unfused")
        ax.set_title("GPT-3 + BigBird (2 blocks, seq 64)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--head", type=int, default=32)
    ap.add_argument("--blocks", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gpt", action="store_true", help="draw GPT's rows of docs/fusion_memory.json too")
    args = ap.parse_args()
    rows = []
    for b in args.blocks:
        r = measure(args.seq, args.head, b, args.seed)
        rows.append(r)
        print(f"block {b:3d} (mask density {r['density']:.3f}): unstructured {r['unstructured']['cycles']:>10} "
              f"cycles, blocked {r['blocked']['cycles']:>9} cycles, {r['speedup']:6.2f}x; FLOPs "
              f"{r['unstructured']['flops']} = {r['blocked']['flops']}", flush=True)
    gpt = []
    if args.gpt:
        fm = json.loads((ROOT / "docs" / "fusion_memory.json").read_text())
        gpt = [r for r in fm["rows"] if r["model"] == "gpt"]
    OUT.with_suffix(".json").write_text(json.dumps({"attention": rows, "gpt": gpt}, indent=1) + "\n")
    plot(rows, gpt, OUT.with_suffix(".png"))
    print(f"wrote {OUT.with_suffix('.json')} and {OUT.with_suffix('.png')}")


if __name__ == "__main__":
    main()
