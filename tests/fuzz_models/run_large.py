"""The large differential fuzz run, sharded, seeded and resumable.

    python tests/fuzz_models/run_large.py --shard K --shards N --cases M [--programs P] --out DIR
    python tests/fuzz_models/run_large.py --rtl amaranth|native --shard K --shards N --cases M --out DIR
    python tests/fuzz_models/run_large.py --rtl native --seeds S,S,... --out DIR
    python tests/fuzz_models/run_large.py --summary DIR

Shard K of N runs the module seeds ``s < M`` with ``s % N == K`` (each module under every
fusion and one random par / skip schedule: :func:`harness.run_case`) and the Einsum-program
seeds ``s < P`` with ``s % N == K`` (:func:`program_gen.run_program_case`), and appends one
JSON line per case to ``DIR/shard-K.jsonl``: kind, seed, the case (module source and inputs, or
the program), its records (schedule, verdict ok / mismatch / refused / crash / invalid /
timeout, detail, max error) and the seconds it took.  Seeds already in the file are skipped, so
a killed shard resumes where it stopped.  ``--summary DIR`` prints totals by verdict, the
refusal reasons and the failure classes over all shards.

With ``--rtl RUNNER`` the module seeds run in RTL instead
(:func:`test_fuzz_models_rtl.rtl_seed`: the same module of each seed, a fusion drawn from the
seed, every graph in sw_sim and in RTL at Q16.16 on amaranth.sim or the native Verilator runner,
bit-exact, then the derived-bound check against PyTorch), kind ``rtl-RUNNER``, one record per case with verdict ok / mismatch-rtl (the
graph and what differs) / bound-fail (the failed check's text) / refused (reason) / overflow /
crash / invalid / large (a graph too long for RTL here) / timeout.  ``--seeds`` runs the module
seeds listed instead of ``0 .. M-1`` (a Verilator sample of small models: every graph is a
build, minutes each when cold).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
warnings.filterwarnings("ignore")

RANK = {"crash": 5, "timeout": 4, "mismatch-rtl": 3, "bound-fail": 3, "mismatch": 3, "overflow": 2, "large": 2,
        "refused": 2, "invalid": 1, "ok": 0}
FAILURES = ("crash", "mismatch", "mismatch-rtl", "bound-fail", "timeout")
REFUSALS = ("refused", "overflow", "large", "invalid")


class Timeout(BaseException):  # not an Exception: the harness's handlers let it through
    pass


def _alarm(signum, frame):
    raise Timeout()


def _done(path: Path) -> set[tuple[str, int]]:
    if not path.exists():
        return set()
    out = set()
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a kill
            continue
        out.add((d["kind"], d["seed"]))
    return out


def _model(seed: int) -> dict:
    from draws import RngDraw
    from harness import run_case
    from known import known
    from model_gen import gen_case

    case = gen_case(RngDraw(seed), seed=seed)
    res = run_case(case)
    out = res.to_json()
    for r, d in zip(res.records, out["records"]):
        k = known(case, r) if r.verdict in ("crash", "mismatch", "refused") else None
        d["known"] = k.test if k else ""
    return out


def _program(seed: int) -> dict:
    from known import known_program
    from program_gen import ProgCase, run_program_seed

    out = run_program_seed(seed)
    pc = ProgCase(**out["case"])
    for d in out["records"]:
        k = known_program(pc, type("R", (), d)) if d["verdict"] in ("crash", "mismatch") else None
        d["known"] = k.test if k else ""
    return out


def _rtl(seed: int, runner: str) -> dict:
    from test_fuzz_models_rtl import rtl_seed

    d = rtl_seed(seed, runner)
    rec = d.pop("record")
    rec["schedule"] = rec["fusion"]
    d["records"] = [rec]
    return d


def _one(kind: str, seed: int) -> dict:
    if kind == "model":
        return _model(seed)
    if kind.startswith("rtl-"):
        return _rtl(seed, kind[4:])
    return _program(seed)


def run_shard(shard: int, shards: int, cases: int, programs: int, out: Path, timeout: int,
              rtl: str | None = None, seeds: list[int] | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"shard-{shard}.jsonl"
    done = _done(path)
    signal.signal(signal.SIGALRM, _alarm)
    kind = f"rtl-{rtl}" if rtl else "model"
    todo = [(kind, s) for s in (seeds if seeds is not None else range(cases)) if s % shards == shard] + \
           [("program", s) for s in range(programs) if s % shards == shard]
    with path.open("a") as f:
        for kind, seed in todo:
            if (kind, seed) in done:
                continue
            t0 = time.perf_counter()
            signal.alarm(timeout)
            try:
                rec = _one(kind, seed)
            except Timeout:
                rec = {"case": None, "records": [{"schedule": "-", "verdict": "timeout", "detail": "",
                                                  "err": 0.0}]}
            finally:
                signal.alarm(0)
            rec.update(kind=kind, seed=seed, seconds=round(time.perf_counter() - t0, 2))
            f.write(json.dumps(rec) + "\n")
            f.flush()


def summary(out: Path) -> str:
    per_rec: dict[str, Counter] = {}
    per_case: dict[str, Counter] = {}
    reasons: Counter = Counter()
    failures: Counter = Counter()
    seconds = 0.0
    times: dict[str, list[float]] = {}
    for path in sorted(out.glob("shard-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            kind = d["kind"]
            seconds += d.get("seconds", 0.0)
            times.setdefault(kind, []).append(d.get("seconds", 0.0))
            recs = d["records"]
            per_rec.setdefault(kind, Counter()).update(r["verdict"] for r in recs)
            worst = max((r["verdict"] for r in recs), key=RANK.get)
            per_case.setdefault(kind, Counter())[worst] += 1
            for r in recs:
                if r["verdict"] in REFUSALS:
                    reasons[(kind, _refusal_class(r))] += 1
                elif r["verdict"] in FAILURES:
                    tag = f" [known: {r['known']}]" if r.get("known") else ""
                    failures[(kind, r["verdict"], _failure_class(r["detail"]) + tag)] += 1
    lines = [f"CPU seconds in cases: {seconds:.0f}"]
    for kind in sorted(per_case):
        n = sum(per_case[kind].values())
        lines.append(f"{kind}: {n} cases; worst verdict per case: {dict(per_case[kind].most_common())}")
        lines.append(f"  per schedule: {dict(per_rec[kind].most_common())}")
        valid = n - per_case[kind].get("invalid", 0)
        refused = per_case[kind].get("refused", 0)
        lines.append(f"  cases refused (worst verdict refused) / valid: {refused}/{valid} = "
                     f"{100.0 * refused / max(1, valid):.1f} %")
        t = sorted(times[kind])
        lines.append(f"  seconds per case: mean {sum(t) / len(t):.1f}, median {t[len(t) // 2]:.1f}, max {t[-1]:.1f}")
    lines.append("refusal reasons (schedules):")
    lines += [f"  {c:6d}  {k}: {r}" for (k, r), c in reasons.most_common()]
    lines.append("failures (schedules):")
    lines += [f"  {c:6d}  {k} {v}: {r}" for (k, v, r), c in failures.most_common()]
    return "\n".join(lines)


def _refusal_class(r: dict) -> str:
    """A refusal's reason; an overflow, invalid or large case by its kind, without numbers."""
    import re

    if r["verdict"] == "refused":
        return r["detail"]
    return r["verdict"] + ": " + re.sub(r"-?\d[\d.e+-]*|'[^']*'", "N", r["detail"])[:70]


def _failure_class(detail: str) -> str:
    import re

    d = re.sub(r"^graph '[^']*': ", "", detail)  # RTL mismatches: the class, not the graph
    d = re.sub(r"^\S+: max \|got - want\| = .*", "value mismatch", d)
    d = re.sub(r"^\S+: max error .*: FAIL.*", "bound fail", d)
    d = re.sub(r"^\S+: shape .*", "shape mismatch", d)
    d = re.sub(r"\d+", "N", d) if detail.startswith("graph '") else d
    return d[:90]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shard", type=int, default=0)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--cases", type=int, default=0, help="module seeds 0 .. M-1 over all shards")
    ap.add_argument("--programs", type=int, default=0, help="Einsum-program seeds 0 .. P-1 over all shards")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per case (then verdict timeout)")
    ap.add_argument("--summary", type=Path, metavar="DIR")
    ap.add_argument("--seeds", type=lambda t: [int(v) for v in t.split(",")], metavar="S,S,...",
                    help="these module seeds instead of 0 .. M-1 (e.g. a Verilator sample of small models)")
    ap.add_argument("--rtl", choices=["amaranth", "native"],
                    help="run the module seeds in RTL at Q16.16 next to sw_sim (test_fuzz_models_rtl.py) instead")
    a = ap.parse_args(argv)
    if a.summary:
        print(summary(a.summary))
        return 0
    if a.out is None or not 0 <= a.shard < a.shards:
        ap.error("--out DIR and 0 <= --shard < --shards are needed")
    run_shard(a.shard, a.shards, a.cases, a.programs, a.out, a.timeout, a.rtl, a.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
