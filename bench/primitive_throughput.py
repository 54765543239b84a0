"""Steady-state throughput of every primitive, RTL and sw_sim, on ~1000-token streams.

For each primitive we feed a stream that keeps it busy (no back-pressure, no gaps) and print
cycles, the longest stream in tokens, tokens/cycle and the fixed overhead (cycles - tokens).
Run: python bench/primitive_throughput.py [--no-rtl]
"""

from __future__ import annotations

import argparse
import sys

from fuseflow.ir.tokens import DONE, REPEAT, stop
from fuseflow_cli.cmd_common import table
from rtl_sim import simulate_primitive as rtl_prim
from sw_sim import simulate_primitive

N = 1000


def _fibers(nfib: int, per: int, base=lambda f, i: i):
    toks = []
    for f in range(nfib):
        toks += [base(f, i) for i in range(per)]
        toks.append(stop(1) if f == nfib - 1 else stop(0))
    return toks + [DONE]


def cases():
    flat = [i % 97 for i in range(N - 2)] + [stop(0), DONE]
    crd_seq = list(range(N - 2)) + [stop(0), DONE]
    refs = list(range(N - 2)) + [stop(0), DONE]
    vals = list(range(N + 8))
    seg = [9 * i for i in range(112)]
    crd = [i % 9 for i in range(9 * 111)]
    yield "scan (compressed)", "scan", {"ref": list(range(100)) + [stop(0), DONE]}, {"format": "compressed", "seg": seg, "crd": crd}
    yield "scan (dense)", "scan", {"ref": list(range(100)) + [stop(0), DONE]}, {"format": "dense", "dim": 9}
    yield "repsig", "repsig", {"in": flat}, {}
    yield "repeat", "repeat", {"ref": [7, stop(0), DONE], "repsig": [REPEAT] * (N - 2) + [stop(0), DONE]}, {}
    yield "intersect (n=2)", "intersect", {"crd0": crd_seq, "crd1": crd_seq, "ref0": refs, "ref1": refs}, {"n": 2}
    yield "union (n=2)", "union", {"crd0": crd_seq, "crd1": crd_seq, "ref0": refs, "ref1": refs}, {"n": 2}
    outer = list(range(100)) + [stop(0), DONE]
    inner = _fibers(100, 9)
    yield "crd_drop", "crd_drop", {"outer": outer, "inner": inner}, {}
    yield "crd_hold", "crd_hold", {"outer": outer, "inner": inner}, {}
    yield "locate (dim=9)", "locate", {"outer": outer, "inner": inner}, {"dim": 9}
    yield "array_load", "array_load", {"ref": [i % N for i in range(N - 2)] + [stop(0), DONE]}, {"vals": vals}
    yield "alu (mul)", "alu", {"a": flat, "b": flat}, {"op": "mul"}
    yield "reduce (add)", "reduce", {"val": _fibers(100, 9)}, {"op": "add"}
    yield "spacc1", "spacc1", {"outer": [0, stop(0), DONE], "inner": list(range(N - 3)) + [stop(1), DONE],
                               "val": list(range(N - 3)) + [stop(1), DONE]}, {"dim": N}
    yield "broadcast (n=3)", "broadcast", {"in": flat}, {"n": 3}
    yield "level writer", "write", {"crd": _fibers(100, 9)}, {"format": "compressed"}
    yield "values writer", "vals_write", {"val": flat}, {}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-rtl", action="store_true")
    args = ap.parse_args()
    rows = []
    for label, kind, inputs, params in cases():
        sw = simulate_primitive(kind, inputs, **dict(params))
        tokens = max([len(v) for v in inputs.values()] + [len(v) for v in sw.values()])
        row = [label, tokens, sw.cycles, f"{tokens / sw.cycles:.3f}", sw.cycles - tokens]
        if not args.no_rtl:
            rtl = rtl_prim(kind, inputs, **dict(params))
            row += [rtl.cycles, f"{tokens / rtl.cycles:.3f}", rtl.cycles - tokens,
                    "yes" if rtl.cycles == sw.cycles else "NO"]
        rows.append(row)
        print(f"  {label}: done", file=sys.stderr, flush=True)
    header = ["primitive", "tokens", "sw cycles", "sw tok/cyc", "sw overhead"]
    if not args.no_rtl:
        header += ["RTL cycles", "RTL tok/cyc", "RTL overhead", "equal"]
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
