"""Run the bad-input corpus (tests/bad_inputs/corpus.py) and print how each case ended:
clear error / traceback / hang / silently accepted / wrong message, by entry point.

    python tools/bad_inputs_report.py [--show KIND] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bad_inputs.corpus import CASES, TIME_LIMIT_S, run_case
from bad_inputs.generated import DECLARED, SOURCES

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
    cases = [c for c in CASES + DECLARED + SOURCES if args.k in c.id]
    slowest = (0.0, "")
    for case in cases:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            out = run_case(case, Path(d))
        slowest = max(slowest, (time.perf_counter() - t0, case.id))
        counts[out.verdict] += 1
        by_entry.setdefault(case.entry, Counter())[out.verdict] += 1
        if out.verdict in args.show:
            shown.append(f"[{out.verdict}] {case.id}: {out.message.strip()[:400]}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    if args.json:
        print(json.dumps({"cases": len(cases), "time_limit_s": TIME_LIMIT_S,
                          "slowest_s": round(slowest[0], 3), "slowest_case": slowest[1],
                          "peak_rss_mib": round(peak_mib, 1),
                          **{v: counts[v] for v in VERDICTS},
                          "by_entry": {e: {v: c[v] for v in VERDICTS} for e, c in sorted(by_entry.items())}},
                         indent=1))
    else:
        print("\n".join(shown))
        print(f"{len(cases)} bad inputs (time limit {TIME_LIMIT_S} s each); slowest refusal {slowest[0]:.2f} s "
              f"({slowest[1]}), peak resident memory {peak_mib:.0f} MiB (this process, every case in it):")
        print("  " + ", ".join(f"{v} {counts[v]}" for v in VERDICTS))
        for e, c in sorted(by_entry.items()):
            print(f"  {e:8s} " + ", ".join(f"{v} {c[v]}" for v in VERDICTS if c[v]))
    return 0 if counts["clear"] == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
