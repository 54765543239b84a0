"""Calibrate the resource and clock model (``fpga.resource_model``) on the project's own synthesis
reports, and check it on designs it was not fitted on.

``run`` synthesises a spread of board tops per family (built-in kernels at several sizes, value
widths and capacities, SpMV and SpMM with parallel lanes; place and route against the family's
Fmax goal, seed 1) and appends each report, with the design's features, to
``docs/resource_calibration/<family>.jsonl``.  It is resumable: designs already in the file are
skipped, so an interrupted calibration goes on where it stopped (``--rerun`` measures the designs
``--match`` names again, after an RTL change: the newest report of a design is the one fitted;
each report keeps the commit it measured).  ``fit`` splits the reports
(every other design, in the list's order, is held out), fits the model on the rest, writes the
coefficients to ``fpga/data/resources_<family>.json`` and prints predicted against measured for
the held-out designs with the error of each figure.  Not a test: it prints what it measures.

    python bench/resource_calibration.py run --family ice40 gowin ecp5 [--limit N] [--small-first] [--match TEXT [--rerun]] [--stale]
    python bench/resource_calibration.py fit --family ice40 gowin ecp5 [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fpga.boards import get_board
from fpga.resource_model import _bram_base, features, fit, measured, memories
from fpga.synth import SynthError, synthesize
from fuseflow.compiler.passes.par import parallelize
from fuseflow.ir.numerics import Numerics
from fuseflow.kernels import KERNELS
from hw.elaborate import GraphTop, HwConfig, crd_width_needed

BOARD = {"ice40": "icebreaker", "ecp5": "ulx3s-85f", "gowin": "tang_primer_20k"}
OUT = ROOT / "docs" / "resource_calibration"


def _d(kernel: str, size: int, nnz: dict[str, int], vw: int = 32, par: dict[str, int] | None = None,
       numerics: str | None = None) -> dict:
    par = par or {}
    tag = "".join(f"_{k}{v}" for k, v in sorted(nnz.items())) + "".join(f"_par{k}{v}" for k, v in sorted(par.items()))
    d = {"name": f"{kernel}{size}_v{vw}{tag}", "kernel": kernel, "size": size, "nnz": nnz, "vw": vw, "par": par}
    if numerics:  # fixed point: the rounding and saturating datapaths the models use
        d |= {"name": d["name"] + f"_{numerics}", "numerics": numerics}
    return d


def designs(family: str) -> list[dict]:
    """The designs of ``family``'s calibration, in a fixed order (fit holds out every other)."""
    if family == "ice40":  # iCE40UP5K: 5,280 logic cells, 30 block RAMs of 4 kbit
        return [
            _d("spmv", 8, {"B": 32}), _d("spmv", 16, {"B": 64}), _d("spmv", 16, {"B": 64}, 16),
            _d("spmv", 32, {"B": 128}), _d("spmv", 32, {"B": 256}, 16), _d("spmv", 64, {"B": 512}),
            _d("spmv", 16, {"B": 64}, 16, {"i": 2}), _d("spmv", 8, {"B": 32}, 16, {"i": 2}),
            _d("add", 8, {"A": 32, "B": 32, "C": 64}), _d("add", 16, {"A": 64, "B": 64, "C": 128}, 16),
            _d("mul", 8, {"A": 32, "B": 32, "C": 32}), _d("mul", 16, {"A": 64, "B": 64, "C": 64}, 16),
            _d("spmm_csr", 8, {"A": 32, "B": 32, "C": 64}, 16), _d("spmm_csr", 8, {"A": 32, "B": 32, "C": 64}),
            _d("spmm_dense", 8, {"A": 32, "C": 64}, 16), _d("spmm_dense", 8, {"A": 32, "C": 64}),
            _d("spmspm_inner", 8, {"A": 32, "B": 32}, 16), _d("spmspm_inner", 8, {"A": 32, "B": 32}),
            _d("add", 32, {"A": 128, "B": 128, "C": 256}, 16), _d("mul", 32, {"A": 128, "B": 128, "C": 128}, 16),
            _d("spmv", 64, {"B": 256}, 16), _d("spmv", 32, {"B": 128}, 12),
            _d("spmm_csr", 16, {"A": 64, "B": 64, "C": 128}, 16), _d("spmm_dense", 16, {"A": 64, "C": 128}, 16),
            _d("spmspm_inner", 16, {"A": 64, "B": 64}, 16), _d("add", 16, {"A": 64, "B": 64, "C": 128}),
            _d("mul", 16, {"A": 64, "B": 64, "C": 64}), _d("spmv", 32, {"B": 128}, 16, {"i": 2}),
            _d("spmv", 8, {"B": 32}, 12), _d("add", 8, {"A": 32, "B": 32, "C": 64}, 12),
            _d("mul", 8, {"A": 32, "B": 32, "C": 32}, 12), _d("spmm_csr", 8, {"A": 32, "B": 32, "C": 64}, 12),
        ]
    big = [  # ECP5-85F and GW2A-18
        _d("spmv", 16, {"B": 64}), _d("spmv", 64, {"B": 512}), _d("spmv", 64, {"B": 512}, 16),
        _d("spmv", 32, {"B": 256}), _d("spmv", 64, {"B": 512}, 32, {"i": 2}),
        _d("spmv", 64, {"B": 512}, 32, {"i": 4}), _d("spmv", 32, {"B": 256}, 16, {"i": 4}),
        _d("spmv", 64, {"B": 512}, 16, {"i": 8}),
        _d("add", 16, {"A": 64, "B": 64, "C": 128}), _d("add", 64, {"A": 512, "B": 512, "C": 1024}),
        _d("mul", 16, {"A": 64, "B": 64, "C": 64}), _d("mul", 64, {"A": 512, "B": 512, "C": 512}),
        _d("spmm_csr", 16, {"A": 64, "B": 64, "C": 128}), _d("spmm_csr", 32, {"A": 256, "B": 256, "C": 512}, 16),
        _d("spmm_dense", 16, {"A": 64, "C": 128}), _d("spmm_dense", 32, {"A": 256, "C": 512}, 16),
        _d("spmspm_inner", 16, {"A": 64, "B": 64}), _d("spmspm_inner", 32, {"A": 256, "B": 256}, 16),
        _d("add", 32, {"A": 256, "B": 256, "C": 512}, 16), _d("mul", 32, {"A": 256, "B": 256, "C": 256}, 16),
        _d("spmv", 16, {"B": 64}, 16), _d("spmm_dense", 16, {"A": 64, "C": 128}, 32, {"i": 2}),
        _d("spmm_csr", 16, {"A": 64, "B": 64, "C": 128}, 16, {"i": 2}), _d("spmv", 32, {"B": 256}, 32, {"i": 8}),
        _d("spmm_dense", 32, {"A": 256, "C": 512}), _d("spmm_csr", 32, {"A": 256, "B": 256, "C": 512}),
        _d("spmspm_inner", 32, {"A": 256, "B": 256}), _d("add", 32, {"A": 256, "B": 256, "C": 512}),
        _d("mul", 32, {"A": 256, "B": 256, "C": 256}), _d("spmv", 32, {"B": 256}, 16, {"i": 2}),
        # what rank --board predicts: a zoo model's largest graph, as rank builds it (Q16.16)
        _m("gcn", "partial"), _m("gcn", "unfused"), _m("sae", "partial"), _m("graphsage", "partial"),
        # the layer norm (rsqrt, products by constants) and kernels in the models' fixed point
        _m("gpt", "unfused"), _d("spmv", 32, {"B": 256}, 32, numerics="q16.16"),
        _d("spmm_csr", 16, {"A": 64, "B": 64, "C": 128}, 32, numerics="q16.16"),
        _d("add", 32, {"A": 256, "B": 256, "C": 512}, 32, numerics="q16.16"),
        _d("mul", 32, {"A": 256, "B": 256, "C": 256}, 32, numerics="q16.16"),
        _d("spmv", 64, {"B": 512}, 32, {"i": 4}, numerics="q16.16"),
    ]
    return big


def _m(model: str, fusion: str) -> dict:
    """A zoo model's largest graph at ``fusion`` (default dataset, Q16.16), the top ``rank
    --board`` predicts for it."""
    return {"name": f"model_{model}_{fusion}", "model": model, "fusion": fusion, "vw": 32, "par": {}}


def _model_graph(design: dict):
    from fuseflow.models import compile_model, trace  # the model frontend needs PyTorch: models only
    from fuseflow.models.zoo import make_case

    case = make_case(design["model"])
    ir = trace(case.module, case.inputs, case.formats, name=case.name)
    return compile_model(ir, design["fusion"]).largest_graph()


def build(design: dict, family_name: str):
    """The design's graph and hardware config (the family's block-RAM defaults, as ``synth``;
    a model's in Q16.16, as ``rank --board`` sizes it)."""
    fam = get_board(BOARD[family_name]).family
    if "model" in design:
        g, max_nnz, num = _model_graph(design), (), Numerics.parse("q16.16")
    else:
        g, max_nnz = KERNELS[design["kernel"]](design["size"]), tuple(sorted(design["nnz"].items()))
        num = Numerics.parse(design["numerics"]) if "numerics" in design else None
    if design["par"]:
        parallelize(g, design["par"])
    cfg = HwConfig(cw=crd_width_needed(g, max_nnz)[0], vw=design["vw"], max_nnz=max_nnz,
                   ram_fifo_depth=fam.ram_fifo_depth, spacc_block_ram=fam.spacc_block_ram,
                   spacc_block_ram_min_dim=fam.spacc_block_ram_min_dim)
    return g, (replace(cfg, numerics=num) if num is not None else cfg)


def _done(family: str) -> dict[str, dict]:
    path = OUT / f"{family}.jsonl"
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["name"]: r for r in rows}


def _size(design: dict, family: str) -> float:
    """A size proxy for ordering runs (place and route time grows with it): FIFO and datapath bits
    plus a sixteenth of the memory bits."""
    f = features(*build(design, family))
    return f["fifo_bits"] + f["val_bits"] + f["ctl_bits"] + f["mem_bits"] / 16


def _last_rtl_change() -> str:
    """The last commit that changed ``hw/`` (the RTL generator), or "" outside a git checkout."""
    return subprocess.run(["git", "log", "-1", "--format=%H", "--", "hw"], cwd=ROOT, capture_output=True,
                          text=True, check=False).stdout.strip()


def _stale(row: dict, rtl: str) -> bool:
    """Whether a report measured RTL older than the checkout's: no commit recorded, or one that
    does not contain ``rtl`` (:func:`_last_rtl_change`)."""
    if not row.get("commit") or not rtl:
        return True
    res = subprocess.run(["git", "merge-base", "--is-ancestor", rtl, row["commit"]], cwd=ROOT,
                         capture_output=True, check=False)
    return res.returncode != 0


def run(family: str, limit: int | None, shard: tuple[int, int] = (0, 1), small_first: bool = False,
        match: list[str] | None = None, rerun: bool = False, stale: bool = False) -> None:
    done = {} if rerun else _done(family)
    if stale:  # measure again what an RTL change since has made out of date
        rtl = _last_rtl_change()
        done = {n: r for n, r in done.items() if not _stale(r, rtl)}
    k, n = shard
    todo = [d for i, d in enumerate(designs(family)) if d["name"] not in done and i % n == k
            and (not match or any(m in d["name"] for m in match))]
    if small_first:  # the quick ones first: a short calibration session adds the most designs
        todo.sort(key=lambda d: _size(d, family))
    todo = todo[:limit]
    board = get_board(BOARD[family])
    OUT.mkdir(parents=True, exist_ok=True)
    for d in todo:
        g, cfg = build(d, family)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="fuseflow-cal-") as tmp:
            try:
                rep = synthesize(GraphTop(g, cfg), board, tmp, clock_mhz=board.family.fmax_goal_mhz, seed=1)
                used = measured({k: v.used for k, v in rep.resources.items()})
                row = {k: used[k] for k in ("LUT", "FF", "BRAM", "DSP")} | {"fmax_mhz": rep.fmax_mhz, "ok": True}
                if "LUTRAM" in used:
                    row["LUTRAM"] = used["LUTRAM"]
                cp = rep.critical_path  # where the clock goes, for the period model's features
                row["critical_path"] = {k: cp[k] for k in ("delay_ns", "logic_ns", "routing_ns", "levels", "from", "to")
                                        if k in cp}
            except (SynthError, ValueError) as exc:  # does not fit, or a width the RTL refuses
                row = {"ok": False, "error": str(exc).splitlines()[0]}
        row |= {"name": d["name"], "design": d, "board": board.name, "features": features(g, cfg),
                "bram_arrays": [list(m) for m in memories(g, cfg)],
                "seconds": round(time.perf_counter() - t0, 1),
                "date": time.strftime("%Y-%m-%d"), "commit": _commit()}
        with (OUT / f"{family}.jsonl").open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"{family} {d['name']}: " + (f"LUT {row['LUT']} FF {row['FF']} BRAM {row['BRAM']} DSP {row['DSP']} "
                                           f"Fmax {row['fmax_mhz']:.1f} MHz" if row["ok"] else row["error"])
              + f" ({row['seconds']} s)", flush=True)


def _commit() -> str:
    """The checkout's commit (the RTL a report measured), or "" outside a git checkout."""
    res = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    return res.stdout.strip() if res.returncode == 0 else ""


def split(family: str) -> tuple[list[dict], list[dict]]:
    """The family's kept reports (the newest of each design, those that placed and routed), with
    this version's features and memories, split into (fitted on, held out): every other one in
    the list's order."""
    done = _done(family)
    order = [d["name"] for d in designs(family)]
    rows = [done[n] for n in order if n in done and done[n]["ok"]]
    for r in rows:  # the features and memories of this version of the model (the reports stay)
        g, cfg = build(r["design"], family)
        r["features"], r["bram_arrays"] = features(g, cfg), memories(g, cfg)
    return rows[0::2], rows[1::2]


def fitted(family: str, train: list[dict]):
    """The model fitted on ``train`` (not saved), with its note."""
    if len(train) < 4:
        raise SystemExit(f"{family}: {len(train)} training reports; run the calibration first")
    model = fit(family, train)
    model.note = f"fitted on {len(train)} designs of bench/resource_calibration.py ({train[-1]['date']})"
    return model


def fit_family(family: str) -> dict:
    train, held = split(family)
    model = fitted(family, train)
    model.save()
    errs: dict[str, list[float]] = {k: [] for k in ("LUT", "FF", "BRAM", "DSP", "fmax_mhz")}
    table = []
    for r in held:
        g, cfg = build(r["design"], family)
        p = model.predict_features(r["features"], _bram_base(g, cfg, family, model.bram_threshold))
        line = {"name": r["name"]}
        for k in errs:
            meas = r[k]
            err = (p[k] - meas) / meas if meas else (0.0 if round(p[k]) == 0 else 1.0)
            errs[k].append(abs(err))
            line[k] = (round(p[k], 1), meas, round(100 * err, 1))
        table.append(line)
    summary = {k: {"mean_pct": round(100 * sum(v) / len(v), 1), "worst_pct": round(100 * max(v), 1),
                   "within_15_pct": sum(e <= 0.15 for e in v)} for k, v in errs.items() if v}
    print(f"\n{family}: fitted on {len(train)}, held out {len(held)}")
    for line in table:
        print("  " + line["name"] + ": " + ", ".join(f"{k} {p:g}/{m:g} ({e:+.1f} %)" for k, (p, m, e) in
                                                    ((k, line[k]) for k in errs)))
    for k, s in summary.items():
        print(f"  {k}: mean |error| {s['mean_pct']} %, worst {s['worst_pct']} %, within 15 %: "
              f"{s['within_15_pct']} of {len(held)}")
    return {"family": family, "train": len(train), "held_out": len(held), "summary": summary, "designs": table}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("run", "fit"))
    p.add_argument("--family", nargs="+", default=list(BOARD), choices=list(BOARD))
    p.add_argument("--limit", type=int, help="run: at most this many new designs per family")
    p.add_argument("--shard", default="0/1", metavar="K/N",
                   help="run: only the designs whose index is K modulo N (N processes side by side)")
    p.add_argument("--small-first", action="store_true",
                   help="run: the designs not yet run, smallest first (by FIFO, datapath and memory bits)")
    p.add_argument("--match", nargs="+", metavar="TEXT",
                   help="run: only the designs whose name contains one of these (e.g. model_)")
    p.add_argument("--rerun", action="store_true",
                   help="run: the designs --match names even when reported (the newest report of a design counts)")
    p.add_argument("--stale", action="store_true",
                   help="run: also the designs whose newest report measured RTL older than the checkout's "
                        "(no commit recorded, or one before the last change to hw/)")
    p.add_argument("--json", help="fit: also write the held-out comparison here")
    args = p.parse_args()
    if args.what == "run":
        k, n = (int(x) for x in args.shard.split("/"))
        for fam in args.family:
            run(fam, args.limit, (k, n), args.small_first, args.match, args.rerun, args.stale)
        return 0
    results = [fit_family(fam) for fam in args.family]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
