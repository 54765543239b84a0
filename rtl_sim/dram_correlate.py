"""sw_sim's LiteDRAM preset against the RTL with the real controller (``docs/dram.md``).

Each kernel of :data:`KERNELS` is built once (``rtl_sim.dram``: the generated LiteDRAM
controller with its SDRAM model in Verilator) and run on several seeded datasets; sw_sim runs
the same datasets with :func:`hw.litedram.dram_memory_model`.  Two terms of the preset are
fitted (least mean relative error) on the kernels of ``fit`` only: ``latency`` (the fixed cost
of a line) and ``bytes_per_cycle`` (the data-bus time of a line, which then also carries the
single port's bank switches, the refresh share and the engine's read/write turnaround), and the
error is reported on the held-out kernels: R² of predicted against RTL cycles, mean and worst
relative error, per kernel.

    python -m rtl_sim.dram_correlate [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from fuseflow.kernels import example
from hw.config import HwConfig
from hw.litedram import dram_memory_model
from sw_sim import run_graph as sw_run

from .dram import dram_config, run_graph_dram

__all__ = ["FIT", "KERNELS", "correlate", "fit_preset", "stats"]

# (kernel, size): one Verilator build each
KERNELS = (("spmv", 32), ("spmm_csr", 16), ("add", 32), ("spmm_dense", 16), ("mul", 32))
FIT = ("spmv", "spmm_csr")  # the latency is fitted on these; the others are held out
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
    model = dram_memory_model(board, fit=fit)
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


LATENCIES = range(0, 31, 2)
BUS_RATES = (2.0, 1.8, 1.6, 1.4, 1.2, 1.0)  # bytes per cycle: 16 .. 32 cycles per 32-byte line


def fit_preset(rows: list[dict], board: str, fit=FIT) -> dict:
    """The ``latency`` and ``bytes_per_cycle`` with the least mean |relative error| on the
    ``fit`` kernels' rows (a grid)."""
    train = [r for r in rows if r["kernel"] in fit]
    best, best_err = None, None
    for lat in LATENCIES:
        for bpc in BUS_RATES:
            cand = {"latency": lat, "bytes_per_cycle": bpc}
            p = predict(train, board, cand)
            e = float(np.mean([abs(a - r["rtl_cycles"]) / r["rtl_cycles"] for a, r in zip(p, train)]))
            if best_err is None or e < best_err:
                best, best_err = cand, e
    return best


def correlate(board: str = "ulx3s", kernels=KERNELS, fit=FIT, densities=DENSITIES, seeds=SEEDS) -> dict:
    """Measure, fit on ``fit``, report on the rest (and the unfitted preset on all)."""
    rows = measure(board, kernels, densities, seeds)
    preset = dram_memory_model(board)
    sw0 = predict(rows, board)
    fitted = fit_preset(rows, board, fit)
    sw1 = predict(rows, board, fitted)
    held = [i for i, r in enumerate(rows) if r["kernel"] not in fit]
    train = [i for i, r in enumerate(rows) if r["kernel"] in fit]
    per_kernel = {}
    for kernel, _ in kernels:
        idx = [i for i, r in enumerate(rows) if r["kernel"] == kernel]
        per_kernel[kernel] = {"fit" if kernel in fit else "held_out": True,
                              **stats([rows[i]["rtl_cycles"] for i in idx], [sw1[i] for i in idx])}
    table = [{k: v for k, v in r.items() if k not in ("graph", "data")} | {"sw_preset": a, "sw_fitted": b}
             for r, a, b in zip(rows, sw0, sw1)]
    return {"board": board, "preset": preset.to_json(), "fitted": fitted, "fit_kernels": list(fit),
            "preset_all": stats([r["rtl_cycles"] for r in rows], sw0),
            "fitted_train": stats([rows[i]["rtl_cycles"] for i in train], [sw1[i] for i in train]),
            "fitted_held_out": stats([rows[i]["rtl_cycles"] for i in held], [sw1[i] for i in held]),
            "per_kernel": per_kernel, "rows": table,
            "values_equal_numpy": all(r["values_equal_numpy"] for r in rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="ulx3s")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    rep = correlate(a.board)
    text = json.dumps(rep, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0 if rep["values_equal_numpy"] else 1


if __name__ == "__main__":
    sys.exit(main())
