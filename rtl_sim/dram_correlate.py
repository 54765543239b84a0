"""sw_sim's LiteDRAM preset against the RTL with the real controller (``docs/dram.md``).

Each kernel of :data:`KERNELS` is built once (``rtl_sim.dram``: the generated LiteDRAM
controller with its SDRAM model in Verilator) and run on several seeded datasets; sw_sim runs
the same datasets with :func:`hw.litedram.dram_memory_model`.  Four terms of the preset are
fitted (least mean relative error over a grid, :data:`GRID`): ``latency`` (the fixed cost of a
line), ``bytes_per_cycle`` (the data-bus time of a line, with the refresh share and the engine's
per-line overheads), ``t_turn`` (the controller's read <-> write turnaround: LiteDRAM's
multiplexer serves one direction at a time) and ``t_switch`` (its single port moves to another
bank only after the last bank's commands issued).  Every error reported is on kernels the fit
did not see: leave one kernel out (each kernel predicted by the terms fitted on the others).
The preset the project ships (``hw.litedram.DRAM_FITS``) is the fit on all kernels.

    python -m rtl_sim.dram_correlate [--board ulx3s|ecpix5] [--json FILE] [--rtl-from FILE]

``--rtl-from`` takes the RTL cycles of an earlier report (same kernels, sizes, densities and
seeds) instead of building and running them again: for a change of the cycle model alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

import numpy as np

from fuseflow.kernels import example
from hw.config import HwConfig
from hw.litedram import dram_memory_model
from sw_sim import run_graph as sw_run

from .dram import dram_config, run_graph_dram

__all__ = ["GRID", "GRIDS", "KERNELS", "correlate", "fit_preset", "stats"]

# (kernel, size): one Verilator build each
KERNELS = (("spmv", 32), ("spmm_csr", 16), ("add", 32), ("spmm_dense", 16), ("mul", 32))
DENSITIES = (0.05, 0.15, 0.3)
SEEDS = (0, 1)


def measure(board: str = "ulx3s", kernels=KERNELS, densities=DENSITIES, seeds=SEEDS) -> list[dict]:
    """Per kernel and dataset: RTL cycles with the real controller, the values checked against
    numpy; the datasets and graph kept for sw_sim."""
    rows = []
    for kernel, n in kernels:
        runs = [example(kernel, n, seed=s, density=d) for d in densities for s in seeds]
        g = runs[0][0]
        t0 = time.perf_counter()
        res = run_graph_dram(g, [r[1] for r in runs], board=board)
        wall = time.perf_counter() - t0
        for (gg, data, _, expected), r, (d, s) in zip(runs, res, [(d, s) for d in densities for s in seeds]):
            [out] = r.outputs
            ok = bool(np.array_equal(r.outputs[out].to_dense(), np.asarray(expected)))
            rows.append({"kernel": kernel, "n": n, "density": d, "seed": s, "rtl_cycles": r.cycles,
                         "values_equal_numpy": ok, "graph": g, "data": data, "rtl_wall_s": round(wall, 1)})
    return rows


def predict(rows: list[dict], board: str, fit: dict | None = None) -> list[int]:
    """sw_sim's cycles for each row under the board's preset (fields replaced by ``fit``)."""
    model = dram_memory_model(board, fit=fit or {}, fitted=False)
    out = []
    for r in rows:
        cfg = dram_config(r["graph"], HwConfig(), board)
        out.append(sw_run(r["graph"], r["data"], memory=model, onchip=cfg.onchip).cycles)
    return out


def stats(rtl: list[int], sw: list[int]) -> dict:
    """R² of sw_sim's prediction against the RTL cycles, mean and worst |relative error|."""
    y, p = np.asarray(rtl, float), np.asarray(sw, float)
    ss_res = float(((y - p) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum()) or 1.0
    err = np.abs(p - y) / y
    return {"r2": round(1 - ss_res / ss_tot, 4), "mean_abs_err": round(float(err.mean()), 4),
            "max_abs_err": round(float(err.max()), 4), "n": len(y)}


# the fitted terms' grid: (field, values)
GRID = (("latency", (0, 4, 8)), ("bytes_per_cycle", (2.0, 1.8, 1.6)), ("t_turn", (8, 12, 16, 20, 24)),
        ("t_switch", (0, 2, 4)))
# per board: the ECPIX-5's 16-bit port behind LiteDRAM's converter moves a 128-bit burst's 8
# words only after the last burst's data has come back (the converter keeps one command in
# flight), so its data time per line is about four times the derived preset's
GRIDS = {
    "ulx3s": GRID,
    "ecpix5": (("latency", (0, 4, 8, 12, 16)), ("bytes_per_cycle", (0.45, 0.5, 0.55)), ("t_turn", (0, 4, 8, 12)),
               ("t_switch", (0, 2, 4))),
}


def _grid_predictions(rows: list[dict], board: str) -> list[tuple[dict, list[int]]]:
    """sw_sim's cycles for every row under every point of the board's grid (:data:`GRIDS`)."""
    grid = GRIDS[board]
    names = [n for n, _ in grid]
    return [(dict(zip(names, values)), predict(rows, board, dict(zip(names, values))))
            for values in itertools.product(*(v for _, v in grid))]


def fit_preset(rows: list[dict], preds: list[tuple[dict, list[int]]], kernels) -> tuple[dict, list[int]]:
    """The grid point with the least mean |relative error| on the rows of ``kernels``, and its
    predictions for every row."""
    idx = [i for i, r in enumerate(rows) if r["kernel"] in kernels]

    def err(pred: list[int]) -> float:
        return float(np.mean([abs(pred[i] - rows[i]["rtl_cycles"]) / rows[i]["rtl_cycles"] for i in idx]))

    return min(preds, key=lambda fp: err(fp[1]))


def correlate(board: str = "ulx3s", kernels=KERNELS, densities=DENSITIES, seeds=SEEDS,
              rtl_from: dict | None = None) -> dict:
    """Measure (or take the RTL cycles of ``rtl_from``), fit leaving one kernel out, report the
    held-out errors, the fit on all kernels, and the unfitted preset on all."""
    rows = measure(board, kernels, densities, seeds) if rtl_from is None else _recorded(rtl_from, kernels, board)
    sw0 = predict(rows, board)
    preds = _grid_predictions(rows, board)
    names = [k for k, _ in kernels]
    held = [0] * len(rows)
    per_kernel = {}
    for kernel in names:
        fit, pred = fit_preset(rows, preds, [k for k in names if k != kernel])
        idx = [i for i, r in enumerate(rows) if r["kernel"] == kernel]
        for i in idx:
            held[i] = pred[i]
        per_kernel[kernel] = {"fitted_on_the_others": fit,
                              **stats([rows[i]["rtl_cycles"] for i in idx], [pred[i] for i in idx])}
    fitted, sw1 = fit_preset(rows, preds, names)
    worst = max(per_kernel, key=lambda k: per_kernel[k]["mean_abs_err"])
    table = [{k: v for k, v in r.items() if k not in ("graph", "data")} | {"sw_preset": a, "sw_fitted": b,
                                                                           "sw_held_out": c}
             for r, a, b, c in zip(rows, sw0, sw1, held)]
    return {"board": board, "preset": dram_memory_model(board, fitted=False).to_json(), "grid": dict(GRIDS[board]),
            "fitted": fitted, "preset_all": stats([r["rtl_cycles"] for r in rows], sw0),
            "fitted_all": stats([r["rtl_cycles"] for r in rows], sw1),
            "held_out": stats([r["rtl_cycles"] for r in rows], held), "worst_kernel": worst,
            "per_kernel": per_kernel, "rows": table,
            "values_equal_numpy": all(r["values_equal_numpy"] for r in rows)}


def _recorded(report: dict, kernels, board: str) -> list[dict]:
    """The rows of an earlier report with their graphs and datasets made again."""
    if "board" in report and report["board"] != board:
        raise ValueError(f"--rtl-from: the report is board {report['board']!r}'s, not {board!r}'s")
    sizes = dict(kernels)
    rows = []
    for r in report["rows"]:
        if r["kernel"] not in sizes or r["n"] != sizes[r["kernel"]]:
            continue
        g, data, _, _ = example(r["kernel"], r["n"], seed=r["seed"], density=r["density"])
        rows.append({**{k: r[k] for k in ("kernel", "n", "density", "seed", "rtl_cycles", "values_equal_numpy",
                                          "rtl_wall_s")}, "graph": g, "data": data})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="ulx3s", choices=sorted(GRIDS),
                    help="the board's DRAM (hw.litedram.DRAM_BOARDS; default ulx3s)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--rtl-from", metavar="FILE", help="the RTL cycles of an earlier report")
    a = ap.parse_args(argv)
    recorded = None
    if a.rtl_from:
        with open(a.rtl_from) as f:
            recorded = json.load(f)
    try:
        rep = correlate(a.board, rtl_from=recorded)
    except ValueError as exc:
        ap.error(str(exc))
    text = json.dumps(rep, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0 if rep["values_equal_numpy"] else 1


if __name__ == "__main__":
    sys.exit(main())
