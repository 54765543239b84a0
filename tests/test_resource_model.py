"""The resource and clock model (``fpga.resource_model``): its features count what the graph
holds (checked by hand on SpMV), the block geometry is the families' (the best shape), and the
fit recovers known coefficients from synthetic reports.  Its accuracy against place and route
is measured on held-out designs by ``bench/resource_calibration.py fit`` (docs/fpga.md)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from fpga.resource_model import (
    FEATURES,
    ResourceModel,
    blocks,
    bram_blocks,
    features,
    fit,
    memories,
)
from fuseflow.compiler.passes.par import parallelize
from fuseflow.ir.numerics import Numerics
from fuseflow.ir.samml import AluOp, NodeKind
from fuseflow.kernels import KERNELS
from hw.elaborate import HwConfig, node_arrays, tensor_arrays


def test_spmv_features_by_hand():
    g = KERNELS["spmv"](16)
    cfg = HwConfig(cw=10, vw=32, max_nnz=(("B", 64),))
    f = features(g, cfg)
    assert f["fifos"] == len(g.edges) and f["mul_lanes"] == 1 and f["lanes"] == 0
    arrays = tensor_arrays(g, cfg).values()
    assert f["mem_bits"] == sum(d * w for _, d, w in arrays) and f["arrays"] == len(arrays)
    depth = cfg.fifo_depth or g.fifo_depth
    assert f["fifo_bits"] >= len(g.edges) * depth * (cfg.cw + 1)
    parallelize(g, {"i": 4})
    f4 = features(g, cfg)
    assert f4["lanes"] == 4 and f4["mul_lanes"] == 4 and f4["fifo_bits"] > f["fifo_bits"]
    assert f["fixed"] == 0 and features(g, replace(cfg, numerics=Numerics.parse("q16.16")))["fixed"] == 1


@pytest.mark.parametrize(("op", "feature", "slow"), [
    (AluOp.EXP, "table_lanes", 1), (AluOp.RSQRT, "table_lanes", 1), (AluOp.DIV, "div_lanes", 1),
    (AluOp.MUL_SCALAR, "const_mul_lanes", 0)])
def test_op_class_features(op, feature, slow):
    """The ALU ops that are more than an adder or a DSP product are counted per lane; a
    nonlinear function or a divider sets ``slow_op`` (a one-cycle path the period model knows)."""
    g = KERNELS["spmv"](16)
    cfg = HwConfig(cw=10, vw=32, max_nnz=(("B", 64),))
    assert features(g, cfg)[feature] == 0 and features(g, cfg)["slow_op"] == 0
    alu = next(n for n in g.nodes.values() if n.kind is NodeKind.ALU)
    alu.params["op"] = op
    f = features(g, cfg)
    assert f[feature] == 1 and f["slow_op"] == slow and f["mul_lanes"] == 0


@pytest.mark.parametrize(("family", "depth", "width", "want"), [
    ("ecp5", 512, 36, 1), ("ecp5", 1024, 32, 2), ("ecp5", 4096, 13, 4), ("ecp5", 16384, 1, 1),
    ("ice40", 256, 16, 1), ("ice40", 512, 32, 4), ("ice40", 4096, 32, 32), ("gowin", 2048, 9, 1)])
def test_block_geometry(family, depth, width, want):
    assert blocks(depth, width, family) == want


def test_fit_recovers_known_coefficients():
    rng = random.Random(3)
    lut = {"one": 900.0, "fifo_bits": 0.12, "ctl_bits": 2.5, "val_bits": 1.5, "mul_lanes": 40.0}
    period = {"one": 2.0, "log2_lut": 0.6, "lanes": 0.05, "slow_op": 9.0, "fixed": 1.5}
    samples = []
    for _ in range(14):
        f = dict.fromkeys(FEATURES, 0.0) | {"one": 1.0, "fifo_bits": rng.uniform(500, 9000),
                                            "ctl_bits": rng.uniform(50, 400), "val_bits": rng.uniform(30, 600),
                                            "mul_lanes": rng.randint(1, 8), "lanes": rng.choice([0, 2, 4])}
        f["mul_wide"] = f["mul_lanes"]  # 32-bit values: every multiplier lane is a wide one
        f["slow_op"], f["fixed"] = float(rng.random() < 0.3), float(rng.random() < 0.5)
        arrays = [(rng.choice([64, 512, 4096]), rng.choice([10, 32]), rng.choice([1, 1, 2]))
                  for _ in range(rng.randint(1, 4))]
        n_lut = sum(lut.get(k, 0) * v for k, v in f.items())
        samples.append({"features": f, "bram_arrays": arrays, "LUT": n_lut, "FF": 0.5 * n_lut,
                        "BRAM": bram_blocks(arrays, "ecp5", 4000.0),
                        "DSP": 3 * f["mul_lanes"],
                        "fmax_mhz": 1000 / (period["one"] + period["log2_lut"] * math.log2(n_lut)
                                            + period["lanes"] * f["lanes"] + period["slow_op"] * f["slow_op"]
                                            + period["fixed"] * f["fixed"])})
    m = fit("ecp5", samples)
    assert m.dsp_per_wide_mul == pytest.approx(3.0)
    assert m.bram_scale == pytest.approx(1.0)
    for s in samples:
        p = m.predict_features(s["features"], bram_blocks(s["bram_arrays"], "ecp5", m.bram_threshold))
        assert p["LUT"] == pytest.approx(s["LUT"], rel=1e-6)
        assert p["FF"] == pytest.approx(s["FF"], rel=1e-6)
        assert p["BRAM"] == pytest.approx(s["BRAM"])
        assert p["fmax_mhz"] == pytest.approx(s["fmax_mhz"], rel=1e-6)
    assert ResourceModel(**m.to_json()) == m


def test_memories_are_per_node_with_their_read_ports():
    """Every lane and bank holds its own copy of a tensor's arrays (the host's memory map lists
    each region once); a scanner's ``seg`` has two read ports, a writer's one."""
    g = KERNELS["spmv"](16)
    cfg = HwConfig(cw=10, vw=32, max_nnz=(("B", 64),))
    one = node_arrays(g, cfg)
    assert sorted((d, w) for *_, d, w, _r in one) == sorted((d, w) for _, d, w in tensor_arrays(g, cfg).values())
    assert {(a, r) for _n, a, *_, r in one} == {("seg", 2), ("crd", 1), ("vals", 1)}
    parallelize(g, {"i": 4})
    four = node_arrays(g, cfg)
    assert len(four) > 3 * len(one) and len(tensor_arrays(g, cfg)) < len(four)
    assert sorted(memories(g, cfg)) == sorted((d, w, r) for *_, d, w, r in four)


@pytest.mark.parametrize(("mems", "threshold", "want"), [
    ([(8, 32, 1)], 85.0, 2),     # 256 bits in 2 iCE40 blocks: 128 a block, block RAM
    ([(4, 16, 1)], 85.0, 0),     # 64 bits in one block: flip-flops
    ([(9, 10, 2)], 85.0, 0),     # a scanner's seg: two copies of one block for 90 bits
    ([(17, 10, 2)], 85.0, 2),    # 170 bits, two copies: block RAM
    ([(8, 32, 2)], 85.0, 0),     # accumulator sums, read twice: 4 blocks for 256 bits
])
def test_bram_blocks_weighs_bits_against_the_blocks_used(mems, threshold, want):
    assert bram_blocks(mems, "ice40", threshold) == want


def test_gowin_lut_ram_counts_fifo_rings_and_small_memories():
    """A FIFO keeps its head in a register and ``depth - 1`` words in LUT RAM: one 20-deep
    11-bit FIFO adds ceil(19/16) x ceil(11/4) = 6 RAM16SDP4 cells; depth 2 adds none; a memory
    below the block-RAM threshold takes cells per read port."""
    from fpga.resource_model import lutram_cells

    g = KERNELS["spmv"](16)
    cfg = HwConfig(cw=10, vw=32, max_nnz=(("B", 64),))
    base = lutram_cells(g, cfg, "gowin", 2048.0)
    e = next(e for e in g.edges if g.edge_type(e).kind.value == "crd" and g.depth(e) == 2)
    g.edges[g.edges.index(e)] = type(e)(e.src, e.dst, 20)
    assert lutram_cells(g, cfg, "gowin", 2048.0) == base + 6
    mems = memories(g, cfg)
    small = sum(r * -(-d // 16) * -(-w // 4) for d, w, r in mems if d * w < 2048.0 * r * blocks(d, w, "gowin"))
    assert small > 0 and lutram_cells(g, cfg, "gowin", 0.0) == base + 6 - small


def test_spacc_lut_depth_is_the_deepest_accumulator_out_of_block_ram():
    """``spacc_lut_depth``: log2 of the entries of the deepest accumulator whose sums stay in LUT
    RAM (Gustavson SpMM's 16-entry row accumulator: 4); none when the config keeps them in block RAM."""
    g = KERNELS["spmm_csr"](16)
    cfg = HwConfig(cw=10, vw=32, max_nnz=(("A", 64), ("B", 64), ("C", 128)))
    assert features(g, cfg)["spacc_lut_depth"] == 4.0
    assert features(g, replace(cfg, spacc_block_ram=True))["spacc_lut_depth"] == 0.0
    assert features(KERNELS["spmv"](16), cfg)["spacc_lut_depth"] == 0.0
