"""Is ``rank --board``'s pick the fastest in wall time once placed and routed?

For each board and zoo model, runs ``fuseflow-hw rank --model M --board B --synthesize K --json``
(the command line, so the options are exactly a user's): the configurations predicted to fit,
ranked by predicted wall time (estimated cycles over the predicted Fmax), the best K placed and
routed.  The pick passes when its measured wall time (the same cycles over the measured Fmax) is
within ``--tolerance`` of the fastest of the K; a model predicted to fit nowhere passes when the
refusal names the resource.  Each result is appended to ``--out`` (JSON lines) as it finishes,
and models already there are skipped, so an interrupted check goes on where it stopped.  Not a
test: it prints what it measures.

    python bench/rank_board_check.py --boards tang_primer_20k ulx3s-85f [--models gcn sae] [--top 5]
    python bench/rank_board_check.py --repredict    # the stored results against today's coefficients
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "rank_board_check.jsonl"
MODELS = ("gcn", "graphsage", "sae", "gpt")


def _done(path: Path) -> dict[tuple[str, str], dict]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["board"], r["model"]): r for r in rows}


def check(board: str, model: str, top: int, tolerance: float) -> dict:
    """One ``rank --board --synthesize`` run, reduced to its verdict."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "fuseflow_cli", "rank", "--model", model, "--board", board,
           "--synthesize", str(top), "--json"]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    row: dict = {"board": board, "model": model, "top": top, "command": " ".join(["fuseflow-hw", *cmd[3:]]),
                 "seconds": round(time.perf_counter() - t0, 1), "date": time.strftime("%Y-%m-%d")}
    if res.returncode != 0:
        msg = (res.stderr.strip().splitlines() or ["(no message)"])[-1]
        row |= {"refused": msg, "ok": "no configuration is predicted to fit" in msg}
        return row
    b = json.loads(res.stdout)["board"]
    measured = [r for r in b["ranked"] if "measured" in r]
    rows = [{"configuration": r["configuration"], "est_cycles": r["est_cycles"], "predicted": r["predicted"],
             "wall_us_predicted": r["wall_us"], "measured": r["measured"]} for r in measured]
    v = b["verdict"]
    fits = all("error" not in r["measured"] for r in measured[:1])
    row |= {"model_note": b["model"], "top_text": b["top"], "fitting": b["fitting"], "synthesized": rows,
            "verdict": v, "pick_fits": fits,
            "ok": bool(v) and fits and v["pick_over_best"] <= 1.0 + tolerance}
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boards", nargs="+", default=["tang_primer_20k", "ulx3s-85f"])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--top", type=int, default=5, help="configurations placed and routed per model (default 5)")
    p.add_argument("--tolerance", type=float, default=0.10, help="pick / best measured wall time allowed (default 0.10)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--repredict", action="store_true",
                   help="no place and route: the stored results' configurations predicted again with today's "
                        "coefficients (rank --board without --synthesize), against what was measured")
    args = p.parse_args()
    done = _done(args.out)
    if args.repredict:
        return repredict([done[(b, m)] for b in args.boards for m in args.models if (b, m) in done])
    for board in args.boards:
        for model in args.models:
            if (board, model) not in done:
                row = check(board, model, args.top, args.tolerance)
                with args.out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                done[(board, model)] = row
            _print(done[(board, model)])
    rows = [done[(b, m)] for b in args.boards for m in args.models]
    print(f"{sum(r['ok'] for r in rows)} of {len(rows)} pass")
    return 0 if all(r["ok"] for r in rows) else 1


def repredict(rows: list[dict]) -> int:
    """Each stored result's placed-and-routed configurations, predicted again (``rank --board
    --json``, today's coefficients) beside what was measured, and today's pick."""
    errs: dict[str, list[float]] = {"then": [], "now": []}
    for r in rows:
        if "synthesized" not in r:
            continue
        cmd = [sys.executable, "-m", "fuseflow_cli", "rank", "--model", r["model"], "--board", r["board"], "--json"]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
        if res.returncode != 0:
            print(f"{r['board']} / {r['model']}: {(res.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        b = json.loads(res.stdout)["board"]
        now = {x["configuration"]: x for x in b["ranked"]}
        pick = b["ranked"][0]["configuration"]
        meas = {s["configuration"]: s["measured"] for s in r["synthesized"] if "fmax_mhz" in s["measured"]}
        best = min(meas, key=lambda c: meas[c]["wall_us"]) if meas else None
        over = (f"{meas[pick]['wall_us'] / meas[best]['wall_us']:.3f} of the fastest measured" if pick in meas
                else "not among those placed and routed")
        print(f"{r['board']} / {r['model']} ({b['model']}): today's pick {pick}, {over}")
        for s in r["synthesized"]:
            c, m = s["configuration"], s["measured"]
            if c not in now or "fmax_mhz" not in m:
                continue
            p_then, p_now = s["predicted"], now[c]["predicted"]
            for k, p in (("then", p_then), ("now", p_now)):
                errs[k].append(abs(p["fmax_mhz"] - m["fmax_mhz"]) / m["fmax_mhz"])
            print(f"    {c}: Fmax predicted {p_then['fmax_mhz']:.1f} then, {p_now['fmax_mhz']:.1f} now, measured "
                  f"{m['fmax_mhz']:.1f} MHz; LUT {p_then['LUT']:.0f} then, {p_now['LUT']:.0f} now, measured {m.get('LUT')}")
    for k, v in errs.items():
        if v:
            print(f"Fmax, {k}: mean |error| {100 * sum(v) / len(v):.1f} %, worst {100 * max(v):.1f} %, "
                  f"within 15 %: {sum(e <= 0.15 for e in v)} of {len(v)}")
    return 0


def _print(r: dict) -> None:
    head = f"{r['board']} / {r['model']}:"
    if "refused" in r:
        print(f"{head} refused ({r['refused']})")
        return
    v = r["verdict"] or {}
    print(f"{head} pick {v.get('pick')}; fastest placed and routed {v.get('best_measured')}; pick / best "
          f"{v.get('pick_over_best')} ({'pass' if r['ok'] else 'FAIL'})")
    for s in r["synthesized"]:
        m = s["measured"]
        meas = (f"{m['fmax_mhz']} MHz, {m['wall_us']} us, LUT {m.get('LUT')}, BRAM {m.get('BRAM')}, DSP {m.get('DSP')}"
                if "fmax_mhz" in m else m.get("error"))
        pr = s["predicted"]
        print(f"    {s['configuration']}: {s['est_cycles']:,} cycles; predicted {pr['fmax_mhz']} MHz, "
              f"{s['wall_us_predicted']} us, LUT {pr['LUT']:.0f}, BRAM {pr['BRAM']:.0f}; measured {meas}")


if __name__ == "__main__":
    sys.exit(main())
