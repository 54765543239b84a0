"""A sweep's results as files: CSV, Parquet, a Markdown report and plots (speedup bars per model
like the FuseFlow paper's fusion figure; cycles against each numeric axis)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .cmd_common import table

__all__ = ["NUMERIC_AXES", "ROW_FIELDS", "speedups", "write_results"]

# the result fields of every row, after the sweep's own keys (README 'Sweeps')
ROW_FIELDS = ("status", "message", "cycles", "check", "rel_error", "wall_seconds", "flops", "bytes_read",
              "bytes_written", "bytes_offchip", "intensity", "graphs", "engine", "source", "worker",
              "run_seconds", "finished", "key", "cached")
NUMERIC_AXES = ("size", "density", "feature_density", "nodes", "features", "hidden", "seq", "dmodel", "lanes")


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    cols = ["config"]
    for r in rows:
        cols += [k for k in r if k not in cols and k not in ROW_FIELDS]
    return cols + [f for f in ROW_FIELDS if any(f in r for r in rows)]


def write_results(rows: Sequence[dict[str, Any]], out: Path, summary: dict[str, Any]) -> dict[str, str]:
    """Write results.csv, results.parquet, summary.json, report.md and the plots; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    cols = _columns(rows)
    files = {"csv": out / "results.csv", "parquet": out / "results.parquet", "summary": out / "summary.json",
             "report": out / "report.md"}
    with open(files["csv"], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    pq.write_table(pa.Table.from_pylist([{c: r.get(c) for c in cols} for r in rows]), files["parquet"])
    sp = speedups(rows)
    if sp:
        files["speedup_plot"] = out / "speedup.png"
        _plot_speedup(sp, files["speedup_plot"])
    axes = [a for a in NUMERIC_AXES if len({r.get(a) for r in rows if r.get(a) is not None}) > 1]
    if axes:
        files["scaling_plot"] = out / "scaling.png"
        _plot_scaling(rows, axes, files["scaling_plot"])
    paths = {k: str(v) for k, v in files.items()}
    files["summary"].write_text(json.dumps({**summary, "files": paths, "speedups": sp}, indent=1) + "\n")
    files["report"].write_text(_report(rows, cols, summary, sp, paths))
    return paths


# an axis and the key it is derived from (lanes is the product of par's factors)
_SAME = {"lanes": ("lanes", "par"), "par": ("lanes", "par")}


def _group(row: dict[str, Any], skip: str) -> tuple:
    """The row's sweep keys except ``skip`` (and what ``skip`` derives from)."""
    drop = {"config", *_SAME.get(skip, (skip,))}
    return tuple((k, row[k]) for k in row if k not in ROW_FIELDS and k not in drop)


def _label(group: tuple, varying: set[str]) -> str:
    return " ".join(f"{v}" for k, v in group if k in varying and v not in (None, "")) or "all"


def _varying(rows: Sequence[dict[str, Any]]) -> set[str]:
    """The sweep keys whose value differs between rows (the others make poor labels)."""
    keys = {k for r in rows for k in r if k not in ROW_FIELDS and k not in ("config", "lanes")}
    return {k for k in keys if len({str(r.get(k)) for r in rows}) > 1}


def speedups(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Speedup of each fusion granularity over the unfused run with the same other keys (the
    paper's fusion figure): one entry per configuration that has such a baseline."""
    base = {_group(r, "fusion"): r["cycles"] for r in rows
            if r.get("fusion") == "unfused" and r.get("status") == "ok" and r.get("cycles")}
    out = []
    varying = _varying(rows)
    for r in rows:
        g = _group(r, "fusion")
        if r.get("fusion") and r.get("status") == "ok" and g in base and r.get("cycles"):
            label = _label(g, varying)
            out.append({"config": r["config"], "group": label, "fusion": r["fusion"],
                        "speedup": round(base[g] / r["cycles"], 4)})
    return out


def _plot_speedup(sp: list[dict[str, Any]], path: Path) -> None:
    import matplotlib  # heavy: loaded only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(s["group"] for s in sp))
    fusions = list(dict.fromkeys(s["fusion"] for s in sp))
    val = {(s["group"], s["fusion"]): s["speedup"] for s in sp}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(groups) * len(fusions) / 2 + 2), 4.2), dpi=120)
    width = 0.8 / len(fusions)
    for j, fu in enumerate(fusions):
        xs = [i + (j - (len(fusions) - 1) / 2) * width for i in range(len(groups))]
        ys = [val.get((g, fu), math.nan) for g in groups]
        bars = ax.bar(xs, ys, width, label=fu, edgecolor="black", linewidth=0.4)
        ax.bar_label(bars, labels=[f"{y:.2f}" if not math.isnan(y) else "" for y in ys], fontsize=7)
    ax.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("speedup over unfused (sw_sim cycles)")
    ax.set_title("Fusion speedup per configuration")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plot_scaling(rows: Sequence[dict[str, Any]], axes: list[str], path: Path) -> None:
    import matplotlib  # heavy: loaded only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, subs = plt.subplots(1, len(axes), figsize=(5.2 * len(axes), 4.2), dpi=120, squeeze=False)
    varying = _varying(rows)
    for ax, axis in zip(subs[0], axes):
        lines: dict[str, list[tuple[float, int]]] = {}
        for r in rows:
            if r.get("status") == "ok" and r.get(axis) is not None and r.get("cycles"):
                label = _label(_group(r, axis), varying)
                lines.setdefault(label, []).append((float(r[axis]), r["cycles"]))
        for i, (label, pts) in enumerate(lines.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                    label=label if i < 12 else None)
        ax.set_xlabel(axis)
        ax.set_ylabel("sw_sim cycles")
        ax.set_yscale("log")
        ax.grid(True, which="both", linewidth=0.3)
        if lines:
            ax.legend(fontsize=6)
    fig.suptitle("Cycles against each swept numeric axis")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _report(rows: Sequence[dict[str, Any]], cols: list[str], summary: dict[str, Any], sp: list[dict[str, Any]],
            files: dict[str, str]) -> str:
    keys = [c for c in cols if c not in ROW_FIELDS]
    shown = keys + ["status", "cycles", "check", "flops", "bytes_offchip", "wall_seconds", "cached"]
    lines = [f"# Sweep {summary['name']}", "",
             (f"- configurations: {summary['configs']} ({summary['ran']} run now, {summary['cached']} from the "
              f"cache, {summary['failed']} failed)"),
             f"- executor: {summary['executor']}; wall time {summary['wall_seconds']:.1f} s", ""]
    if "speedup_plot" in files:
        lines += ["![speedup](speedup.png)", ""]
    if "scaling_plot" in files:
        lines += ["![scaling](scaling.png)", ""]
    lines += ["```", table([["" if r.get(c) is None else r.get(c) for c in shown] for r in rows], shown), "```", ""]
    if sp:
        lines += ["## Speedup over unfused", "", "```",
                  table([[s["group"], s["fusion"], s["speedup"]] for s in sp], ["configuration", "fusion", "speedup"]),
                  "```", ""]
    errors = [r for r in rows if r.get("status") != "ok"]
    if errors:
        lines += ["## Failed configurations", ""] + [f"- config {r['config']}: {r['message']}" for r in errors]
    return "\n".join(lines) + "\n"
