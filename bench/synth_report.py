"""Fmax and utilisation of kernel board tops on the iCE40UP5K (iCEBreaker), ECP5-85F (ULX3S)
and Gowin GW2A-18 (Tang Primer 20K).

Each design is placed and routed against the project's Fmax goal (30 MHz iCE40, 100 MHz ECP5,
50 MHz Gowin; docs/fpga.md, "Synthesis") so nextpnr works for it; the table says whether it met
the goal and which path limits it.  Not a test: it prints what it measures.

    python bench/synth_report.py                       # SpMV 64, max_nnz B=512, iCE40 and ECP5
    python bench/synth_report.py --boards tang_primer_20k   # the same on the Gowin GW2A-18
    python bench/synth_report.py --kernel add --max-nnz A=512 --max-nnz B=512 --max-nnz C=1024
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fpga.boards import get_board
from fpga.synth import SynthError, SynthReport, synthesize
from fuseflow.kernels import KERNELS
from fuseflow_cli.cmd_common import parse_max_nnz
from hw.elaborate import GraphTop, HwConfig, crd_width_needed

BOARDS = {"icebreaker": "ice40", "ulx3s-85f": "ecp5", "tang_primer_20k": "gowin"}


def _one(kernel: str, size: int, cfg: HwConfig, board: str, seed: int, outdir: str) -> dict:
    top = GraphTop(KERNELS[kernel](size), cfg)
    try:
        report = synthesize(
            top,
            board,
            Path(outdir) / f"{kernel}{size}-{board}-s{seed}",
            clock_mhz=get_board(board).family.fmax_goal_mhz,
            seed=seed,
        )
    except SynthError as exc:
        return {"board": board, "error": str(exc)}
    return report.to_json()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", default="spmv", choices=sorted(KERNELS))
    p.add_argument("--size", type=int, default=64)
    p.add_argument(
        "--max-nnz",
        action="append",
        default=[],
        metavar="TENSOR=N",
        help="capacity per sparse tensor (default for spmv: B=512)",
    )
    p.add_argument("--boards", nargs="+", default=["icebreaker", "ulx3s-85f"], choices=list(BOARDS))
    p.add_argument("--val-width", type=int, default=32, help="value width in bits (HwConfig.vw)")
    p.add_argument("--seeds", nargs="+", type=int, default=[1], help="nextpnr seeds (one run each)")
    p.add_argument("--outdir", help="keep the build directories here")
    p.add_argument("--json", help="also write the reports to this JSON file")
    args = p.parse_args()
    items = args.max_nnz or (["B=512"] if args.kernel == "spmv" else [])
    graph = KERNELS[args.kernel](args.size)
    max_nnz = parse_max_nnz(items, graph)
    cw = crd_width_needed(graph, max_nnz)[0]  # as `fuseflow-hw synth --cw auto`
    cfg = HwConfig(cw=cw, vw=args.val_width, max_nnz=max_nnz)
    with tempfile.TemporaryDirectory(prefix="fuseflow-synth-") as tmp:
        outdir = args.outdir or tmp
        with ProcessPoolExecutor(max_workers=2) as pool:
            futures = [
                pool.submit(_one, args.kernel, args.size, cfg, b, seed, outdir)
                for b in args.boards
                for seed in args.seeds
            ]
            results = [f.result() for f in futures]
    print(
        f"{args.kernel}({args.size}) board top, {args.val_width}-bit values, {cw}-bit crd/ref, "
        f"max_nnz {dict(max_nnz) or 'dense'}"
    )
    for r in results:
        if "error" in r:
            print(f"{r['board']}: {r['error']}")
        else:
            print(SynthReport.from_json(r).table())
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
