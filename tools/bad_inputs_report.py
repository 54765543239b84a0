"""Run the bad-input corpus (tests/bad_inputs/corpus.py) and print how each case ended:
clear error / traceback / hang / silently accepted / wrong message, by entry point.

    python tools/bad_inputs_report.py [--show KIND] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bad_inputs.corpus import CASES, TIME_LIMIT_S, run_case

VERDICTS = ("clear", "traceback", "hang", "silent", "wrong")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", choices=VERDICTS, action="append", default=[],
                    help="print the cases that ended this way (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    ap.add_argument("-k", default="", help="only cases whose id contains this text")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    counts: Counter = Counter()
    by_entry: dict[str, Counter] = {}
    shown = []
    cases = [c for c in CASES if args.k in c.id]
    for case in cases:
        with tempfile.TemporaryDirectory() as d:
            out = run_case(case, Path(d))
        counts[out.verdict] += 1
        by_entry.setdefault(case.entry, Counter())[out.verdict] += 1
        if out.verdict in args.show:
            shown.append(f"[{out.verdict}] {case.id}: {out.message.strip()[:400]}")
    if args.json:
        print(json.dumps({"cases": len(cases), "time_limit_s": TIME_LIMIT_S,
                          **{v: counts[v] for v in VERDICTS},
                          "by_entry": {e: {v: c[v] for v in VERDICTS} for e, c in sorted(by_entry.items())}},
                         indent=1))
    else:
        print("\n".join(shown))
        print(f"{len(cases)} bad inputs (time limit {TIME_LIMIT_S} s each):")
        print("  " + ", ".join(f"{v} {counts[v]}" for v in VERDICTS))
        for e, c in sorted(by_entry.items()):
            print(f"  {e:8s} " + ", ".join(f"{v} {c[v]}" for v in VERDICTS if c[v]))
    return 0 if counts["clear"] == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
