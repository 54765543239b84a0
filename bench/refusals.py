"""How fast and how lean bad input is refused: the whole bad-input corpus (hand-written and
generated cases, tests/bad_inputs) run in one process, each case timed; prints the counts by
outcome, the slowest refusal and the peak resident memory against the bounds the reliability
work sets (under 5 s beyond start-up, under 1 GiB).  Cases run in-process, so start-up (imports)
is outside every case's time.

    python bench/refusals.py            # every case (about 10 minutes)
    python bench/refusals.py -k mtx     # the cases whose id contains "mtx"
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOWEST_S, PEAK_MIB = 5.0, 1024.0


def main() -> int:
    report = runpy.run_path(str(ROOT / "tools" / "bad_inputs_report.py"))  # its main(), not run as a script
    out = io.StringIO()
    sys.argv = ["bad_inputs_report", "--json", *sys.argv[1:]]
    with contextlib.redirect_stdout(out):
        report["main"]()
    r = json.loads(out.getvalue())
    print(f"{r['cases']} bad inputs: clear {r['clear']}, traceback {r['traceback']}, hang {r['hang']}, "
          f"silent {r['silent']}, wrong {r['wrong']}")
    print(f"slowest refusal {r['slowest_s']:.2f} s ({r['slowest_case']}; bound {SLOWEST_S:.0f} s), "
          f"peak resident memory {r['peak_rss_mib']:.0f} MiB (bound {PEAK_MIB:.0f} MiB)")
    ok = r["clear"] == r["cases"] and r["slowest_s"] < SLOWEST_S and r["peak_rss_mib"] < PEAK_MIB
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
