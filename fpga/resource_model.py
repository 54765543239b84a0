"""Predicted LUT, FF, BRAM, DSP and Fmax of a board top, per FPGA family, in milliseconds.

A place-and-route run takes minutes per design; ranking schedules for a board needs the answer
for many.  :func:`features` describes a graph's top by what its RTL is built from (FIFO bits,
control and value datapaths, multipliers, sparse-accumulator entries, memory arrays and their
bits, lanes), all read from the graph and the hardware config (nothing is elaborated).  A
:class:`ResourceModel` maps them to resources with coefficients fitted on synthesis reports the
project makes itself (``bench/resource_calibration.py``, which synthesises a spread of designs,
keeps every report in ``docs/resource_calibration/<family>.jsonl`` and writes the fitted
coefficients to ``fpga/data/resources_<family>.json``):

* LUT and FF: non-negative least squares on the features (each coefficient a cost per unit);
* BRAM: the family's block geometry applied to every memory above a fitted size threshold
  (smaller ones go to LUT RAM or flip-flops): the tensor arrays, and the FIFOs and accumulator
  sums the config puts in block RAM (:func:`memories`);
* DSP: a fitted number of DSP blocks per multiplier lane, for lanes up to 18 bits wide and for
  wider ones;
* Fmax: the clock period as a linear function of log2 of the predicted LUTs, of the lanes, of
  whether a one-cycle nonlinear function or divider is in the graph (``slow_op``), of whether
  the values are fixed point (``fixed``: rounding and saturation on every value path) and of
  log2 of the entries of the deepest accumulator kept in LUT RAM (``spacc_lut_depth``: its
  read multiplexer and the add share a cycle).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from fuseflow.cost.resources import GRAPH_FEATURES, accumulators, fifos, graph_features
from fuseflow.ir.samml import Graph
from hw.accumulate import spacc_in_block_ram
from hw.elaborate import HwConfig, node_arrays, tensor_arrays

__all__ = ["BLOCK_SHAPES", "DEVICE_LOGIC", "FEATURES", "LUTRAM_CELL", "PERIOD_TERMS", "ResourceModel", "bram_blocks", "features",
           "load_model", "lutram_cells", "measured", "memories", "model_path", "over_budget"]

DATA = Path(__file__).resolve().parent / "data"

# (depth, width) configurations of one block RAM, per family
BLOCK_SHAPES: dict[str, tuple[tuple[int, int], ...]] = {
    "ice40": ((256, 16), (512, 8), (1024, 4), (2048, 2)),
    "ecp5": ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
    "gowin": ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
}

# what each device of fpga.boards offers, as the synthesis report counts it (nextpnr's
# utilisation: TRELLIS_COMB / TRELLIS_FF / DP16KD / MULT18X18D on the ECP5; logic cells, EBRs and
# SB_MAC16s on the iCE40; LUT4 / DFF / BSRAM / MULT18X18 on the Gowin parts)
DEVICE_LOGIC: dict[str, dict[str, int]] = {
    "iCE40HX1K": {"LUT": 1280, "FF": 1280, "BRAM": 16, "DSP": 0},
    "iCE40UP5K": {"LUT": 5280, "FF": 5280, "BRAM": 30, "DSP": 8},
    "LFE5U-12F": {"LUT": 24288, "FF": 24288, "BRAM": 56, "DSP": 28},
    "LFE5U-25F": {"LUT": 24288, "FF": 24288, "BRAM": 56, "DSP": 28},
    "LFE5U-45F": {"LUT": 43848, "FF": 43848, "BRAM": 108, "DSP": 72},
    "LFE5U-85F": {"LUT": 83640, "FF": 83640, "BRAM": 208, "DSP": 156},
    "LFE5UM5G-45F": {"LUT": 43848, "FF": 43848, "BRAM": 108, "DSP": 72},
    "LFE5UM5G-85F": {"LUT": 83640, "FF": 83640, "BRAM": 208, "DSP": 156},
    "GW2A-LV18PG256C8/I7": {"LUT": 20736, "FF": 15552, "BRAM": 46, "DSP": 48, "LUTRAM": 648},
    "GW1NR-LV9QN88PC6/I5": {"LUT": 8640, "FF": 6480, "BRAM": 26, "DSP": 20, "LUTRAM": 270},
}


def measured(used: dict[str, int]) -> dict[str, int]:
    """A synthesis report's counts (``resource -> used``) as the model predicts them: ``LUT``
    with the Gowin's carry-chain ``ALU`` cells (one LUT each) counted in."""
    out = {k: v for k, v in used.items() if k != "ALU"}
    out["LUT"] = used.get("LUT", 0) + used.get("ALU", 0)
    return out


def over_budget(pred: dict[str, float], device: str, margin: float) -> list[str]:
    """The resources whose prediction exceeds ``1 - margin`` of what ``device`` has, each as
    ``"LUT 23,100 of 20,736 (at most 18,662 with a 10 % margin)"``; empty when it fits."""
    have = DEVICE_LOGIC[device]
    out = []
    for res, avail in have.items():
        cap = (1.0 - margin) * avail
        if pred[res] > cap:
            out.append(f"{res} {pred[res]:,.0f} of {avail:,} (at most {cap:,.0f} with a {margin:.0%} margin)")
    return out


FEATURES = (*GRAPH_FEATURES, "mem_bits", "arrays", "spacc_lut_bits", "fixed", "spacc_lut_depth")
_INDICATORS = ("slow_op", "fixed", "spacc_lut_depth")  # the period's terms, not a cost per unit
_LUT_FEATURES = tuple(k for k in FEATURES if k not in _INDICATORS)
_FF_FEATURES = _LUT_FEATURES
# the clock period's terms: ns per unit of each (``log2_lut``: of the predicted LUTs)
PERIOD_TERMS = ("one", "log2_lut", "lanes", "slow_op", "fixed", "spacc_lut_depth")


def features(graph: Graph, cfg: HwConfig) -> dict[str, float]:
    """What a top of ``graph`` under ``cfg`` is built from (see the module docstring): the
    graph's counts (:func:`fuseflow.cost.resources.graph_features`) and its tensor memories."""
    f = graph_features(graph, cfg.cw, cfg.vw, cfg.fifo_depth)
    f["mem_bits"] = f["arrays"] = 0.0
    for _tensor, depth, width in tensor_arrays(graph, cfg).values():
        f["mem_bits"] += depth * width
        f["arrays"] += 1
    # accumulator sums the config keeps out of block RAM: LUT RAM or flip-flops, LUTs per bit
    f["spacc_lut_bits"] = float(sum(dim * buffers * cfg.vw * lanes for dim, buffers, lanes in accumulators(graph)
                                    if not spacc_in_block_ram(cfg, dim)))
    f["fixed"] = float(cfg.numerics is not None and cfg.numerics.frac > 0)
    # the deepest accumulator kept out of block RAM: its sums are read through a multiplexer
    # of log2(entries) levels in the same cycle as the add (the models' row accumulators)
    f["spacc_lut_depth"] = max((math.log2(max(dim * buffers, 2)) for dim, buffers, _lanes in accumulators(graph)
                                if not spacc_in_block_ram(cfg, dim)), default=0.0)
    return f


def blocks(depth: int, width: int, family: str) -> int:
    """Block RAMs of ``family`` one ``depth`` x ``width`` memory takes (the best shape)."""
    return min(math.ceil(width / w) * math.ceil(depth / d) for d, w in BLOCK_SHAPES[family])


def memories(graph: Graph, cfg: HwConfig) -> list[tuple[int, int, int]]:
    """``(depth, width, read ports)`` of every memory a top of ``graph`` may put in block RAM:
    each node's tensor arrays (:func:`hw.elaborate.node_arrays`: every lane and bank holds its
    own), the FIFOs at least ``cfg.ram_fifo_depth`` deep (the others read asynchronously: LUT
    RAM or flip-flops) and the sums of the sparse accumulators ``cfg`` keeps in block RAM (read
    at two places: to add and to flush)."""
    out = [(depth, width, reads) for _n, _a, depth, width, reads in node_arrays(graph, cfg)]
    if cfg.ram_fifo_depth is not None:
        out += [(d, w, 1) for d, w in fifos(graph, cfg.cw, cfg.vw, cfg.fifo_depth) if d >= max(cfg.ram_fifo_depth, 2)]
    out += [(dim * buffers, cfg.vw * lanes, 2) for dim, buffers, lanes in accumulators(graph)
            if spacc_in_block_ram(cfg, dim)]  # read to add and read to flush
    return out


def bram_blocks(mems, family: str, threshold: float) -> int:
    """Block RAMs of the memories ``mems`` (``(depth, width, read ports)``) under synthesis's
    choice, which weighs the blocks a memory takes against the logic it would take otherwise: a
    memory goes to block RAM when its bits per block used reach ``threshold`` (a block has one
    read port, so a memory read at two places takes a copy per port, in the family's best block
    shape); a smaller one stays in LUT RAM or flip-flops."""
    return sum(_used(d, w, r, family) for d, w, r in mems if d * w >= threshold * _used(d, w, r, family))


def _used(depth: int, width: int, reads: int, family: str) -> int:
    return reads * blocks(depth, width, family)


# (depth, width) of one LUT-RAM cell, on the families that count LUT RAM apart from the LUTs
# (nextpnr's RAM16SDP4 on the Gowin parts: one write and one asynchronous read port)
LUTRAM_CELL: dict[str, tuple[int, int]] = {"gowin": (16, 4)}


def lutram_cells(graph: Graph, cfg: HwConfig, family: str, threshold: float) -> int:
    """LUT-RAM cells of a top of ``graph``: the rings of the FIFOs three or more deep that are not
    in block RAM (a FIFO keeps its head in a register, the other ``depth - 1`` words in LUT RAM;
    ``hw.fifo.HeadFIFO``), the memories :func:`bram_blocks` leaves out of block RAM (a copy per
    read port) and the accumulator sums kept out of block RAM (read to add and to flush)."""
    cd, cw_ = LUTRAM_CELL[family]

    def cells(depth: int, width: int) -> int:
        return math.ceil(depth / cd) * math.ceil(width / cw_)

    ram_fifo = max(cfg.ram_fifo_depth, 2) if cfg.ram_fifo_depth is not None else None
    n = sum(cells(d - 1, w) for d, w in fifos(graph, cfg.cw, cfg.vw, cfg.fifo_depth)
            if d >= 3 and (ram_fifo is None or d < ram_fifo))
    n += sum(r * cells(d, w) for d, w, r in memories(graph, cfg)
             if d * w < threshold * _used(d, w, r, family))
    n += sum(2 * cells(dim * buffers, cfg.vw * lanes) for dim, buffers, lanes in accumulators(graph)
             if not spacc_in_block_ram(cfg, dim))
    return n


def _bram_base(graph: Graph, cfg: HwConfig, family: str, threshold: float) -> float:
    """Predicted block RAMs of a top of ``graph`` (:func:`memories`, :func:`bram_blocks`)."""
    return float(bram_blocks(memories(graph, cfg), family, threshold))


@dataclass
class ResourceModel:
    """The fitted coefficients of one family (:func:`fit`); :meth:`predict` applies them."""

    family: str
    lut: dict[str, float] = field(default_factory=dict)
    ff: dict[str, float] = field(default_factory=dict)
    bram_threshold: float = 0.0  # memories of at least this many bits per block used go to block RAM
    bram_scale: float = 1.0  # 1: the block counts are the geometry (kept for older coefficient files)
    dsp_per_mul: float = 0.0  # DSP blocks per multiplier lane up to DSP_WIDTH bits
    dsp_per_wide_mul: float = 0.0  # DSP blocks per wider multiplier lane
    period: dict[str, float] = field(default_factory=dict)  # ns per unit of each of PERIOD_TERMS
    # the LUTs and lanes the period was fitted over: a prediction holds them inside (a line
    # fitted on 1-8 k LUTs says nothing of 200 LUTs or of 100 k)
    lut_range: tuple[float, float] = (2.0, 1e9)
    lanes_range: tuple[float, float] = (0.0, 64.0)
    designs: int = 0  # reports the fit used
    note: str = ""

    def predict(self, graph: Graph, cfg: HwConfig) -> dict[str, float]:
        """Predicted ``LUT``, ``FF``, ``BRAM``, ``DSP`` and ``fmax_mhz`` of a top of ``graph``
        (and ``LUTRAM`` on families whose LUT RAM is a resource of its own, the Gowin's)."""
        pred = self.predict_features(features(graph, cfg), _bram_base(graph, cfg, self.family, self.bram_threshold))
        if self.family in LUTRAM_CELL:
            pred["LUTRAM"] = float(lutram_cells(graph, cfg, self.family, self.bram_threshold))
        return pred

    def predict_features(self, f: dict[str, float], bram_base: float) -> dict[str, float]:
        lut = sum(self.lut.get(k, 0.0) * v for k, v in f.items())
        ff = sum(self.ff.get(k, 0.0) * v for k, v in f.items())
        lut_c = min(max(lut, self.lut_range[0], 2.0), self.lut_range[1])
        lanes_c = min(max(f["lanes"], self.lanes_range[0]), self.lanes_range[1])
        terms = {"one": 1.0, "log2_lut": math.log2(lut_c), "lanes": lanes_c,
                 **{k: f.get(k, 0.0) for k in PERIOD_TERMS[3:]}}
        period = sum(self.period.get(k, 0.0) * v for k, v in terms.items())
        dsp = self.dsp_per_mul * f.get("mul_narrow", 0.0) + self.dsp_per_wide_mul * f.get("mul_wide", 0.0)
        return {"LUT": lut, "FF": ff, "BRAM": self.bram_scale * bram_base, "DSP": dsp,
                "fmax_mhz": 1000.0 / period if period > 0 else 0.0}

    def to_json(self) -> dict:
        return asdict(self)

    def save(self, path: Path | None = None) -> Path:
        path = path or model_path(self.family)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")
        return path


def model_path(family: str) -> Path:
    return DATA / f"resources_{family}.json"


def load_model(family: str) -> ResourceModel | None:
    """The fitted model of ``family`` (None when no calibration has been kept for it)."""
    path = model_path(family)
    if not path.exists():
        return None
    d = json.loads(path.read_text())
    for k in ("lut_range", "lanes_range"):
        if k in d:
            d[k] = tuple(d[k])
    return ResourceModel(**d)


def _nnls(rows: list[dict[str, float]], names: tuple[str, ...], y: list[float]) -> dict[str, float]:
    from scipy.optimize import nnls

    a = np.array([[r[n] for n in names] for r in rows], dtype=float)
    scale = np.maximum(np.abs(a).max(axis=0), 1e-9)  # columns on one scale for the solver
    coef, _ = nnls(a / scale, np.asarray(y, dtype=float))
    return {n: float(c / s) for n, c, s in zip(names, coef, scale, strict=True) if c}


def _mems(sample: dict) -> list[tuple[int, int, int]]:
    """A sample's memories as :func:`memories` gives them (older reports: one read port each)."""
    return [(m[0], m[1], m[2] if len(m) > 2 else 1) for m in sample["bram_arrays"]]


def fit(family: str, samples: list[dict]) -> ResourceModel:
    """Fit a family's model on ``samples``: each ``{"features", "bram_arrays": [(depth, width,
    read ports), ...], "LUT", "FF", "BRAM", "DSP", "fmax_mhz"}``."""
    feats = [s["features"] for s in samples]
    m = ResourceModel(family=family, designs=len(samples))
    m.lut = _nnls(feats, _LUT_FEATURES, [s["LUT"] for s in samples])
    m.ff = _nnls(feats, _FF_FEATURES, [s["FF"] for s in samples])
    # BRAM: the threshold (bits per block used, among the memories' values) with the least
    # absolute error; the block counts themselves are the family's geometry
    best = None
    sizes = sorted({d * w / _used(d, w, r, family) for s in samples for d, w, r in _mems(s)} | {0.0})
    y = np.array([s["BRAM"] for s in samples], float)
    for t in sizes:
        base = np.array([bram_blocks(_mems(s), family, t) for s in samples], float)
        err = float(np.abs(base - y).sum())
        if best is None or err < best[0]:
            best = (err, t)
    assert best is not None
    m.bram_threshold, m.bram_scale = float(best[1]), 1.0
    dsp = _nnls(feats, ("mul_narrow", "mul_wide"), [s["DSP"] for s in samples])
    m.dsp_per_mul, m.dsp_per_wide_mul = dsp.get("mul_narrow", 0.0), dsp.get("mul_wide", 0.0)
    # Fmax: the period linear in PERIOD_TERMS, least squares on the measured LUTs; a term no
    # sample exercises (a column of zeros) gets no coefficient
    a = np.array([[1.0, math.log2(max(s["LUT"], 2)), s["features"]["lanes"],
                   *(s["features"].get(k, 0.0) for k in PERIOD_TERMS[3:])] for s in samples])
    y = np.array([1000.0 / s["fmax_mhz"] for s in samples])
    used = [j for j in range(a.shape[1]) if np.any(a[:, j])]
    coef, *_ = np.linalg.lstsq(a[:, used], y, rcond=None)
    m.period = {PERIOD_TERMS[j]: float(c) for j, c in zip(used, coef, strict=True)}
    luts = [float(s["LUT"]) for s in samples]
    lanes = [float(s["features"]["lanes"]) for s in samples]
    m.lut_range, m.lanes_range = (min(luts), max(luts)), (min(lanes), max(lanes))
    return m
