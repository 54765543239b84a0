"""Utilisation and Fmax of parallel-lane board tops (``--par i=N``) on the ECP5-85F (ULX3S).

Runs ``fuseflow-hw synth`` (the command line, so the options are exactly those of
docs/fpga.md, "Parallel lanes") for SpMV 64×64 with ``--max-nnz B=512`` and for the largest
graph of the one-layer-per-graph GCN on KarateClub (``--model gcn --dataset karate --fusion
partial``, Q16.16), and for ``examples/programs/vector_add.py`` (y = x + z, 512 values: lanes of
one adder each, so a wide factor measures the parallelizers and the serializer), each at the
lane factors given (factor 1: no ``--par``), placed and routed
against the family's Fmax goal (``--clock-mhz 100``).  A result within ``--near`` MHz of the
goal is placed and routed again with the next seed.  One synthesis at a time.  Not a test: it
prints what it measures.

    python bench/par_synth.py                                # SpMV and GCN, factors 1 2 4
    python bench/par_synth.py --designs spmv --factors 1 8 --json par.json --outdir build/par
    python bench/par_synth.py --designs ser --factors 64 --near 0    # the 64-lane serializer
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fpga.boards import get_board
from hw.litedram import DRAM_BOARDS

DESIGNS = {
    "spmv": ("SpMV 64×64, B ≤ 512", ["--kernel", "spmv", "--size", "64", "--max-nnz", "B=512"]),
    "gcn": ("GCN layer (KarateClub, partial, Q16.16)",
            ["--model", "gcn", "--dataset", "karate", "--fusion", "partial"]),
    "ser": ("y = x + z, 512 values (examples/programs/vector_add.py)", []),  # compiled first
}
SER_PROGRAM = ROOT / "examples" / "programs" / "vector_add.py"


def _compiled(factor: int, outdir: Path) -> list[str]:
    """The ``ser`` design's graph JSON, compiled with ``--par i=factor`` (``synth`` reads graphs,
    not programs)."""
    out = outdir / f"ser-par{factor}-graph"
    argv = [sys.executable, "-m", "fuseflow_cli", "compile", str(SER_PROGRAM), "-o", str(out)]
    if factor > 1:
        argv += ["--par", f"i={factor}"]
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    [graph] = sorted(out.glob("*_g0.json"))
    return [str(graph)]


def synth(design: str, factor: int, board: str, clock_mhz: float, seed: int, outdir: Path,
          placer: str | None = None) -> dict:
    """One ``fuseflow-hw synth --json`` run; its report, or ``{"error": message}``."""
    build = outdir / f"{design}-par{factor}-{board}-s{seed}"
    design_args = _compiled(factor, outdir) if design == "ser" else DESIGNS[design][1]
    argv = [sys.executable, "-m", "fuseflow_cli", "synth", *design_args,
            "--board", board, "-o", str(build), "--json", "--clock-mhz", f"{clock_mhz:g}",
            "--seed", str(seed)] + (["--placer", placer] if placer else [])
    if factor > 1 and design != "ser":  # (ser: compiled with its lanes)
        argv += ["--par", f"i={factor}"]
    if any(board.startswith(b) for b in DRAM_BOARDS):  # the lanes as measured: tensors in block RAM
        argv += ["--no-dram"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = proc.stdout
    start = out.find("\n{") + 1 if not out.startswith("{") else 0  # --model prints a line first
    result: dict = {"design": design, "factor": factor, "seed": seed, "board": board}
    if proc.returncode != 0 or not out[start:].lstrip().startswith("{"):
        result["error"] = (proc.stderr or out).strip().splitlines()[-1] if (proc.stderr or out) \
            else f"exit {proc.returncode}"
        return result
    report = json.loads(out[start:])
    return result | {"graph": report.pop("design")} | report


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    p.add_argument("--factors", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--board", default="ulx3s-85f")
    p.add_argument("--seed", type=int, default=1, help="first nextpnr seed")
    p.add_argument("--near", type=float, default=3.0,
                   help="re-run with the next seed when Fmax is within this many MHz of the goal")
    p.add_argument("--placer", choices=("heap", "sa", "static"), help="nextpnr's placer (default: heap)")
    p.add_argument("--outdir", help="keep the build directories here")
    p.add_argument("--json", help="also write the reports to this JSON file")
    args = p.parse_args()
    goal = get_board(args.board).family.fmax_goal_mhz
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="fuseflow-par-synth-") as tmp:
        outdir = Path(args.outdir or tmp)
        for design in args.designs:
            for factor in args.factors:
                runs = [synth(design, factor, args.board, goal, args.seed, outdir, args.placer)]
                f = runs[0].get("fmax_mhz")
                if f is not None and abs(f - goal) <= args.near:
                    runs.append(synth(design, factor, args.board, goal, args.seed + 1, outdir, args.placer))
                for r in runs:
                    print(_line(r), flush=True)
                results += runs
    print()
    print(table(results, goal, args.board))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


def _line(r: dict) -> str:
    head = f"{r['design']} par i={r['factor']} seed {r['seed']}: "
    if "error" in r:
        return head + r["error"]
    cp = r["critical_path"]
    return (head + f"{r['fmax_mhz']:.1f} MHz, critical path {cp['delay_ns']:.2f} ns "
            f"({cp['logic_ns']:.2f} logic, {cp['routing_ns']:.2f} routing, {cp['levels']} cells): "
            f"{cp['from']} -> {cp['to']}")


def table(results: list[dict], goal: float, board: str) -> str:
    """One row per design and factor: resources of the first seed, Fmax of every seed."""
    rows: dict[tuple[str, int], list[dict]] = {}
    for r in results:
        rows.setdefault((r["design"], r["factor"]), []).append(r)
    lines = [f"{board}, place and route at {goal:g} MHz",
             f"{'design':<8}{'lanes':>6}{'LUT':>8}{'FF':>8}{'BRAM':>6}{'DSP':>5}  Fmax (MHz, by seed)"]
    for (design, factor), runs in rows.items():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            lines.append(f"{design:<8}{factor:>6}  {runs[0]['error']}")
            continue
        res = ok[0]["resources"]
        fmax = " / ".join(f"{r['fmax_mhz']:.1f}" for r in ok)
        seeds = "–".join(str(r["seed"]) for r in (ok[0], ok[-1])) if len(ok) > 1 else str(ok[0]["seed"])
        lines.append(f"{design:<8}{factor:>6}{res['LUT']['used']:>8}{res['FF']['used']:>8}"
                     f"{res['BRAM']['used']:>6}{res['DSP']['used']:>5}  {fmax} (seed {seeds})")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
