"""Whole models on a simulated board top (docs/board.md; default the ULX3S-85F): every graph in
one top, tensors in the board's DRAM behind the generated LiteDRAM controller (its DRAM model in
Verilator), loaded and read back over the UART by the host driver, the graphs of each compiler
step run back to back by the on-chip sequencer.

For each model it runs ``fuseflow-hw run --board B --sim --model M [--dataset D] --json`` and
prints the graphs' cycles against sw_sim's under the board's DRAM preset (both from the same run),
the board's own cycles (the sequencer's count, starts included), the load over the UART and its
time at 2 Mbaud, the run time at the design's 50 MHz, the DRAM bandwidth used and the check
against PyTorch.  ``--json FILE`` keeps the records.  The
Cora-sized GCN (all 1,433 features) takes about 7 minutes on two cores (88 M simulated cycles,
most of them the UART load); the others seconds.

Run: python bench/board_models.py [--board ecpix5-85f] [--only gcn-cora] [--json docs/board_models.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CASES = {
    "gcn-cora": ["--model", "gcn", "--dataset", "cora"],
    "gcn-karate": ["--model", "gcn"],
    "gcn-karate-unfused": ["--model", "gcn", "--fusion", "unfused"],
    "graphsage-karate": ["--model", "graphsage"],
    "sae-random": ["--model", "sae"],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=sorted(CASES), action="append")
    ap.add_argument("--board", default="ulx3s-85f", help="a board with DRAM (default ulx3s-85f)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    records = {}
    for name in args.only or list(CASES):
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "fuseflow_cli", "run", "--board", args.board, "--sim", *CASES[name], "--json"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode not in (0, 1):
            print(f"{name}: failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
            return 1
        rec = json.loads(proc.stdout)
        rec["bench_wall_seconds"] = round(time.perf_counter() - t0, 1)
        records[name] = rec
    print(f"board: {args.board}")
    head = ("case", "graphs", "cycles", "sw_sim cycles", "ratio", "board cycles", "load bytes", "load s @2Mbaud",
            "run ms @50MHz", "DRAM BW use", "PyTorch check", "wall s")
    print(" | ".join(head))
    for name, r in records.items():
        print(" | ".join(str(x) for x in (
            name, len(r["graphs"]), f"{r['cycles']:,}", f"{r['sw_sim_cycles']:,}", r["cycles_ratio"],
            f"{r['board_cycles']:,} ({len(r['sequences'])} seq)",
            f"{r['load_bytes']:,}", f"{r['load_seconds']:.3f}", f"{r['run_seconds'] * 1e3:.2f}",
            f"{r['dram_bandwidth_use']:.1%}", f"{r['check']} ({r['error']:.2g} <= {r['tolerance']:.2g})",
            r["bench_wall_seconds"])))
    worst = max(abs(r["cycles_ratio"] - 1) for r in records.values())
    print(f"worst |board / sw_sim - 1| over the models: {worst:.1%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "command": f"python bench/board_models.py --board {args.board}", **records}, f,
                      indent=1)
    return 0 if all(r["check"] == "pass" for r in records.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
