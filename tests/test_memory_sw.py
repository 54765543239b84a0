"""The off-chip memory model in sw_sim (docs/memory.md) against hand-derived expectations.

Every expected cycle, line and byte count below is worked out from the timing contract in
docs/memory.md (the derivation is written next to each assertion); values are checked against
numpy.  Nothing here is a number copied from a run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fuseflow.ir.builder import GraphBuilder
from fuseflow.kernels import KERNELS, example
from fuseflow.ir.memory import (
    PRESETS,
    MemoryError,
    MemoryModel,
    Placement,
    parse_memory,
    plan_ports,
    word_bytes,
)
from fuseflow.ir.memory import MemPort as PortSpec
from fuseflow.compiler.passes.fifo import size_fifos
from fuseflow.ir.samml import Role
from fuseflow.compiler.passes.skip import enable_skipping
from fuseflow.ir.tensor import TensorData, TensorFormat
from sw_sim import run_graph
from sw_sim.dram import Controller
from sw_sim.engine import Engine, Primitive, SimError

# ----------------------------------------------------------------------------- parameters


def test_presets_match_the_documented_table():
    assert set(PRESETS) == {"ideal", "hbm2", "ddr4", "sdram"}
    assert PRESETS["ideal"].ideal and parse_memory(None) is PRESETS["ideal"]
    # docs/memory.md, "Parameters and presets": B/cycle, burst, tCL/tRCD/tRP, banks x row, clock
    table = {"hbm2": (32, 64, 14, 14, 14, 16, 2048, 1000),
             "ddr4": (19.2, 64, 15, 15, 15, 16, 8192, 1000),
             "sdram": (2, 16, 2, 2, 2, 4, 1024, 100)}
    for name, (bpc, burst, cl, rcd, rp, banks, row, mhz) in table.items():
        m = parse_memory(name)
        assert m is PRESETS[name] and not m.ideal and m.policy == "open" and m.latency == 0
        assert (m.bytes_per_cycle, m.burst_bytes, m.t_cl, m.t_rcd, m.t_rp, m.banks, m.row_bytes,
                m.clock_mhz) == (bpc, burst, cl, rcd, rp, banks, row, mhz)
    # 32 B/cycle at 1 GHz = 32 GB/s; 19.2 B/cycle = 19.2 GB/s (the table's bandwidths)
    assert PRESETS["hbm2"].bytes_per_cycle * PRESETS["hbm2"].clock_mhz / 1000 == 32
    assert PRESETS["sdram"].bytes_per_cycle * PRESETS["sdram"].clock_mhz / 1000 == pytest.approx(0.2)


def test_overrides_change_only_the_named_fields():
    m = parse_memory("hbm2:bytes_per_cycle=16")
    h = PRESETS["hbm2"]
    assert m.bytes_per_cycle == 16 and m.name != "hbm2"
    for f in ("burst_bytes", "latency", "t_cl", "t_rcd", "t_rp", "banks", "row_bytes", "policy", "clock_mhz"):
        assert getattr(m, f) == getattr(h, f), f
    assert m.xfer_cycles == 64 // 16  # a 64-byte burst over 16 B/cycle
    m2 = parse_memory("sdram: latency = 7 , policy=closed,banks=1")
    assert (m2.latency, m2.policy, m2.banks, m2.burst_bytes) == (7, "closed", 1, 16)
    # a table: the preset key is the base (default hbm2)
    t = parse_memory({"preset": "ddr4", "t_cl": 20}, where="schedule")
    assert (t.t_cl, t.t_rcd, t.row_bytes) == (20, 15, 8192)
    assert parse_memory({"latency": 3}).burst_bytes == 64 and parse_memory({"latency": 3}).latency == 3
    assert parse_memory(m) is m


@pytest.mark.parametrize("spec, names", [
    ("hbm2:bytes_per_cycle=0", ["bytes_per_cycle"]),
    ("hbm2:bytes_per_cycle=-4", ["bytes_per_cycle"]),
    ("hbm2:latency=-1", ["latency"]),
    ("hbm2:t_cl=-2", ["t_cl"]),
    ("hbm2:t_rp=1.5", ["t_rp"]),
    ("hbm2:banks=3", ["banks", "power of two"]),
    ("hbm2:burst_bytes=48", ["burst_bytes", "power of two"]),
    ("hbm2:row_bytes=1000", ["row_bytes", "power of two"]),
    ("hbm2:banks=0", ["banks"]),
    ("hbm2:row_bytes=32", ["row_bytes = 32", "burst_bytes = 64"]),  # a row smaller than a burst
    ("hbm3", ["hbm3", "hbm2"]),  # unknown preset, and the presets listed
    ("hbm2:speed=3", ["speed"]),
    ("hbm2:policy=lazy", ["policy", "lazy"]),
    ("ideal:latency=3", ["ideal"]),
    ("hbm2:latency", ["latency"]),  # no '='
])
def test_bad_models_are_errors_naming_the_field(spec, names):
    with pytest.raises(MemoryError) as exc:
        parse_memory(spec)
    for n in names:
        assert n in str(exc.value), (n, str(exc.value))


def test_model_fields_are_type_checked():
    with pytest.raises(MemoryError, match="bytes_per_cycle"):
        MemoryModel(bytes_per_cycle=True)
    with pytest.raises(MemoryError, match="clock_mhz"):
        MemoryModel(clock_mhz=0)
    with pytest.raises(MemoryError, match="preset"):
        parse_memory({"preset": 3})
    with pytest.raises(MemoryError):
        parse_memory(5)


@pytest.mark.parametrize("burst, bpc, xfer", [
    (64, 32, 2),       # 64 / 32
    (64, 19.2, 4),     # 3.33 rounded up
    (16, 2, 8),        # 16 / 2
    (16, 3, 6),        # 5.33 rounded up
    (64, 64, 1),       # exactly one cycle
    (64, 128, 1),      # half a cycle is still one
])
def test_xfer_cycles(burst, bpc, xfer):
    m = MemoryModel(bytes_per_cycle=bpc, burst_bytes=burst, row_bytes=max(burst, 2048))
    assert m.xfer_cycles == xfer
    assert m.to_json()["xfer_cycles"] == xfer


@pytest.mark.parametrize("bits, nbytes", [(1, 1), (8, 1), (12, 2), (16, 2), (17, 4), (24, 4),
                                           (32, 4), (33, 8), (64, 8)])
def test_word_bytes_rounds_up_to_a_power_of_two(bits, nbytes):
    assert word_bytes(bits) == nbytes


def test_line_and_bank_row_of_a_port():
    m = PRESETS["hbm2"]  # 64-byte lines, 2048-byte rows (32 lines), 16 banks
    p = PortSpec(0, "n", "vals", "x", None, 3, 4, False)
    assert p.line(m, 15) == 0 and p.line(m, 16) == 1  # 16 words of 4 bytes per line
    assert p.bank_row(m, 0) == (3, 3 << 32)  # the array's rows start at bank array_id = 3
    assert p.bank_row(m, 31) == (3, 3 << 32)  # same row: 32 lines per row
    assert p.bank_row(m, 32) == (4, 3 << 32)  # next row goes to the next bank
    assert p.bank_row(m, 32 * 13) == (0, 3 << 32)  # chunk 13: bank (13 + 3) % 16, row 13 // 16 = 0
    assert p.bank_row(m, 32 * 29) == (0, (3 << 32) | 1)  # chunk 29: bank 0 again, row 29 // 16 = 1


def test_port_plan_order_and_array_ids_of_spmv():
    g, _, _, _ = example("spmv", 8)
    ports = plan_ports(g, PRESETS["hbm2"])
    # by node name, then seg, crd, vals; B's level 0 is dense (no arrays); y is only a values write
    assert [(p.index, p.node, p.array, p.write) for p in ports] == [
        (0, "scan_B1", "seg", False), (1, "scan_B1", "crd", False), (2, "vals_B", "vals", False),
        (3, "vals_c", "vals", False), (4, "write_y_vals", "vals", True)]
    # arrays numbered in sorted (tensor, array, level) order: B.crd1, B.seg1, B.vals, c.vals, y.vals
    assert {p.key: p.array_id for p in ports} == {"B.crd1": 0, "B.seg1": 1, "B.vals": 2, "c.vals": 3,
                                                 "y.vals": 4}
    assert {p.key: p.word_bytes for p in ports} == {"B.crd1": 2, "B.seg1": 2, "B.vals": 4, "c.vals": 4,
                                                   "y.vals": 4}
    assert [p.key for p in plan_ports(g, PRESETS["hbm2"], Placement.of(["c"]))] == [
        "B.seg1", "B.crd1", "B.vals", "y.vals"]
    assert plan_ports(g, PRESETS["ideal"]) == []


# ----------------------------------------------------------------------------- the controller by hand
# The model of the hand cases: latency 3, tCL 5, tRCD 7, tRP 11; 16-byte bursts at 4 B/cycle
# (xfer 4 cycles); 2 banks (or 4) of 32-byte rows (2 lines per row); 4-byte words (4 per line).
LAT, CL, RCD, RP, XFER = 3, 5, 7, 11, 4
HIT, CLOSED, CONFLICT = LAT + CL, LAT + RCD + CL, LAT + RP + RCD + CL  # 8, 15, 26


def hand_model(policy="open", banks=2) -> MemoryModel:
    return MemoryModel("hand", bytes_per_cycle=4, burst_bytes=16, latency=LAT, t_cl=CL, t_rcd=RCD,
                       t_rp=RP, banks=banks, row_bytes=32, policy=policy)


def spec(index: int, array_id: int | None = None, write: bool = False) -> PortSpec:
    return PortSpec(index, f"n{index}", "vals", f"t{index}", None,
                    index if array_id is None else array_id, 4, write)


class Reader(Primitive):
    """Reads ``words`` of its port one after the other from cycle ``start`` on, trying every
    cycle (an access proceeds in the first cycle its line is resident); records those cycles."""

    def __init__(self, name, port, words, start=0):
        super().__init__(name, {}, {})
        self.port, self.words, self.start, self.hits = port, list(words), start, []
        port.node = self

    def step(self) -> bool:
        now = self.cycle
        if now >= self.start and self.port.read(now, self.words[len(self.hits)], self.words[len(self.hits)]):
            self.hits.append(now)
            if len(self.hits) == len(self.words):
                self.finish()
        return True


class Writer(Primitive):
    """Writes words 0, 1, ... ``count - 1`` (one per cycle when allowed), then flushes;
    records the cycle of each write and of the successful flush."""

    def __init__(self, name, port, count):
        super().__init__(name, {}, {})
        self.port, self.count, self.hits, self.flushed = port, count, [], None
        port.node = self

    def step(self) -> bool:
        now = self.cycle
        if len(self.hits) < self.count:
            if self.port.write(now, len(self.hits)):
                self.hits.append(now)
        elif self.port.flush(now, self.count - 1):
            self.flushed = now
            self.finish()
        return True


def run_nodes(ctrl: Controller, nodes: list[Primitive], ctrl_first: bool = False) -> int:
    prims = [ctrl, *nodes] if ctrl_first else [*nodes, ctrl]
    return Engine(prims, [], nodes).run(10_000)


@pytest.mark.parametrize("ctrl_first", [False, True])
def test_open_policy_closed_bank_then_row_hit_then_row_conflict(ctrl_first):
    ctrl = Controller(hand_model("open"), [spec(0)])
    r = Reader("r", ctrl.ports[0], [0, 4, 16], start=0)
    run_nodes(ctrl, [r], ctrl_first)
    # word 0 (line 0): requested in cycle 0, granted in cycle 1 (never in the cycle it was
    # raised), bank 0 has no open row: done = 1 + latency + tRCD + tCL + xfer = 20
    t0 = 1 + LAT + RCD + CL + XFER
    # the access in cycle 20 prefetches line 1, granted in 21; line 1 is in the same row
    # (2 lines per row) of bank 0: a hit, start = max(21 + 8, bus free at 20), done 33
    t1 = max(t0 + 1 + HIT, t0) + XFER
    # the access to word 4 in cycle 33 prefetches line 2 (row 0 of bank 1, closed): granted 34,
    # done 34 + 15 + 4 = 53.  Word 16 is line 4: the port is busy until 53, then requests line 4
    # in cycle 53, granted 54; line 4 is row 1 of bank 0 (chunk 2 -> bank 2 % 2 = 0, row 2 // 2),
    # where row 0 is open: precharge + activate + CAS, done = 54 + 26 + 4 = 84
    t2 = (t1 + 1 + CLOSED + XFER) + 1 + CONFLICT + XFER
    assert (t0, t1, t2) == (20, 33, 84)
    assert r.hits == [t0, t1, t2]
    assert (ctrl.row_misses, ctrl.row_hits, ctrl.row_conflicts) == (2, 1, 1)
    assert ctrl.ports[0].lines == 4  # lines 0, 1, 2, 4 granted (the prefetch of 5 never is)


def test_closed_policy_always_pays_activate_and_cas():
    ctrl = Controller(hand_model("closed"), [spec(0)])
    r = Reader("r", ctrl.ports[0], [0, 4, 16])
    run_nodes(ctrl, [r])
    t0 = 1 + CLOSED + XFER  # 20
    t1 = t0 + 1 + CLOSED + XFER  # prefetched line 1: granted 21, done 40
    # line 2 prefetched at 40 (done 41 + 19 = 60); line 4 requested at 60, granted 61, done 80
    t2 = (t1 + 1 + CLOSED + XFER) + 1 + CLOSED + XFER
    assert r.hits == [t0, t1, t2] == [20, 40, 80]
    assert (ctrl.row_misses, ctrl.row_hits, ctrl.row_conflicts) == (4, 0, 0)


def test_bus_occupancy_delays_the_second_of_two_grants():
    ctrl = Controller(hand_model("open"), [spec(0), spec(1)])
    a, b = Reader("a", ctrl.ports[0], [0]), Reader("b", ctrl.ports[1], [0])
    run_nodes(ctrl, [a, b])
    # both raised in cycle 0.  Cycle 1: port 0 (bank 0, closed): start 16, done 20, bus free 20.
    # Cycle 2: port 1 (array 1 -> bank 1, closed): start = max(2 + 15, 20) = 20, done 24
    assert a.hits == [1 + CLOSED + XFER] == [20]
    assert b.hits == [max(2 + CLOSED, 20) + XFER] == [24]


@pytest.mark.parametrize(("turn", "switch"), [(0, 0), (6, 0), (0, 9), (6, 9)])
def test_bank_switch_and_turnaround_widen_the_bus_gap(turn, switch):
    from dataclasses import replace

    # as test_bus_occupancy_delays_the_second_of_two_grants, the second port in another bank
    ctrl = Controller(replace(hand_model("open"), t_turn=turn, t_switch=switch), [spec(0), spec(1)])
    a, b = Reader("a", ctrl.ports[0], [0]), Reader("b", ctrl.ports[1], [0])
    run_nodes(ctrl, [a, b])
    # cycle 1: port 0, the first grant (no gap): done 20.  Cycle 2: port 1, bank 1 (a switch),
    # a read after a read (no turnaround): start = max(2 + 15, 20 + switch)
    assert a.hits == [20]
    assert b.hits == [max(2 + CLOSED, 20 + switch) + XFER]
    assert ctrl.bank_switches >= 1 and ctrl.turnarounds == 0  # (and the prefetches after)
    # a reader and a writer's line in the same bank: a turnaround, no switch
    ctrl = Controller(replace(hand_model("open"), t_turn=turn, t_switch=switch), [spec(0), spec(1, 0, True)])
    r, w = Reader("r", ctrl.ports[0], [0]), Writer("w", ctrl.ports[1], 4)
    run_nodes(ctrl, [r, w])
    # the writer's 4 words fill line 0 (written in cycles 0..3, the line sent with the last: raised
    # in 3, granted 4); the reader's line 0 granted in 1 (bank 0 closed): done 20.  The write line:
    # array 0 -> bank 0, the row opened by the read: a hit, start = max(4 + 8, 20 + turn)
    assert r.hits == [20]
    assert w.flushed == max(4 + HIT, 20 + turn) + XFER
    assert ctrl.bank_switches == 0 and ctrl.turnarounds >= 1


def test_round_robin_serves_the_port_after_the_last_grant_first():
    ctrl = Controller(hand_model("closed", banks=4), [spec(0), spec(1), spec(2)])
    p0 = Reader("p0", ctrl.ports[0], [0], start=1)
    p1 = Reader("p1", ctrl.ports[1], [0], start=0)
    p2 = Reader("p2", ctrl.ports[2], [0], start=1)
    run_nodes(ctrl, [p0, p1, p2])
    # cycle 1: only port 1's request (raised in 0) is a candidate: granted, done 1 + 15 + 4 = 20;
    # the pointer moves to 2.  Cycle 2: ports 0 and 2 (raised in 1) wait; port 2 is first at or
    # after the pointer: start max(2 + 15, 20) = 20, done 24.  Cycle 3: port 0, start 24, done 28
    assert p1.hits == [20]
    assert p2.hits == [24]
    assert p0.hits == [28]


def test_a_request_is_not_granted_in_the_cycle_it_is_raised():
    # a model where an access costs nothing but the transfer: done = grant cycle + 1
    m = MemoryModel("fast", bytes_per_cycle=64, burst_bytes=16, t_cl=0, t_rcd=0, t_rp=0, banks=1,
                    row_bytes=16)
    for ctrl_first in (False, True):
        ctrl = Controller(m, [spec(0)])
        r = Reader("r", ctrl.ports[0], [0], start=5)
        run_nodes(ctrl, [r], ctrl_first)
        # raised in 5, granted in 6 (not 5), done 6 + 0 + 1 = 7
        assert r.hits == [7]


def test_write_combining_sends_a_line_on_its_last_word_and_the_rest_at_the_flush():
    ctrl = Controller(hand_model("open"), [spec(0, write=True)])
    w = Writer("w", ctrl.ports[0], 6)
    run_nodes(ctrl, [w])
    # words 0-2 are written freely in cycles 0-2; word 3 ends line 0: the port is idle, it is
    # written in cycle 3 and line 0 requested; granted 4, bank 0 closed: done 4 + 15 + 4 = 23.
    # Word 4 (not a line end) is written in cycle 4, word 5 in cycle 5.  The flush needs the port
    # idle: in cycle 23 it requests line 1 (words 4, 5), granted 24, a row hit: done 24 + 8 + 4 = 36
    assert w.hits == [0, 1, 2, 3, 4, 5]
    assert w.flushed == 24 + HIT + XFER == 36
    assert ctrl.ports[0].lines == 2 and ctrl.ports[0].words == 6


def test_the_last_word_of_a_line_waits_for_the_port():
    ctrl = Controller(hand_model("open"), [spec(0, write=True)])
    w = Writer("w", ctrl.ports[0], 8)
    run_nodes(ctrl, [w])
    # line 0 sent in cycle 3 (done 23, as above); words 4-6 written in 4-6; word 7 ends line 1
    # and needs the port idle: written in 23, line 1 granted 24, done 36; nothing is left unsent,
    # so the flush succeeds once the port is idle: cycle 36
    assert w.hits == [0, 1, 2, 3, 4, 5, 6, 23]
    assert w.flushed == 36
    assert ctrl.ports[0].lines == 2


# ----------------------------------------------------------------------------- whole graphs
HARSH = "sdram:bytes_per_cycle=1,latency=7,banks=1,policy=closed"


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_values_do_not_depend_on_the_memory(kernel):
    g, data, _, expected = example(kernel, 12, seed=5, density=0.25)
    ideal = run_graph(g, data)
    assert np.array_equal(next(iter(ideal.outputs.values())).to_dense(), expected)
    assert run_graph(g, data, memory="ideal").cycles == ideal.cycles
    assert run_graph(g, data, memory=PRESETS["ideal"], onchip=list(g.tensors)).cycles == ideal.cycles
    for mem in ("hbm2", "ddr4", "sdram", HARSH):
        res = run_graph(g, data, memory=mem)
        assert np.array_equal(next(iter(res.outputs.values())).to_dense(), expected), mem
        # every access waits at least one grant cycle, an activate, a CAS and a transfer
        assert res.cycles > ideal.cycles, mem


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_every_tensor_on_chip_is_the_ideal_run(kernel):
    g, data, _, _ = example(kernel, 12, seed=2, density=0.3)
    ideal = run_graph(g, data)
    allon = run_graph(g, data, memory="sdram", onchip=list(g.tensors))
    assert allon.cycles == ideal.cycles
    assert allon.counters["bytes_offchip"] == 0
    assert all(not a["offchip"] and "lines" not in a for a in allon.counters["arrays"].values())
    # inputs on chip, the output still off chip: a writer pops D only once its last line is
    # written to memory, at least a grant cycle + tRCD + tCL + a transfer (13 cycles on sdram)
    # after its last word, where the ideal run pops D a few tokens (stops, D) after that word
    outs_off = run_graph(g, data, memory="sdram", onchip=g.input_tensors())
    assert outs_off.cycles > ideal.cycles
    [out] = [t for t in g.tensors if t not in g.input_tensors()]
    assert {k for k, a in outs_off.counters["arrays"].items() if a["offchip"]} == {
        k for k in outs_off.counters["arrays"] if k.startswith(out + ".")}


@pytest.mark.parametrize("kernel", ["spmv", "spmm_csr", "spmm_dense"])
def test_slower_memory_never_takes_fewer_cycles(kernel):
    g, data, _, _ = example(kernel, 16, seed=3, density=0.2)
    by_bw = [run_graph(g, data, memory=f"hbm2:bytes_per_cycle={b}").cycles for b in (64, 16, 4, 1)]
    assert by_bw == sorted(by_bw)
    by_lat = [run_graph(g, data, memory=f"hbm2:latency={t}").cycles for t in (0, 2, 10, 40)]
    assert by_lat == sorted(by_lat)
    by_cl = [run_graph(g, data, memory=f"ddr4:t_cl={t}").cycles for t in (0, 5, 30)]
    assert by_cl == sorted(by_cl)


def copy_graph(n: int):
    """``y = x`` over a compressed vector: root -> scan x -> (write y level 0, load x -> write y vals)."""
    b = GraphBuilder("copy")
    g = b.g
    vec = TensorFormat(("compressed",))
    g.tensor("x", (n,), vec)
    g.tensor("y", (n,), vec, Role.OUTPUT)
    crd, ref = b.scan("x", 0, b.root("x"))
    g.indices = {"i": [crd]}
    b.write("y", 0, crd)
    b.write_vals("y", b.load("x", ref))
    size_fifos(g)
    return g


# 8-byte bursts: 4 crd/seg words (2 bytes) or 2 vals words (4 bytes) per line
SMALL = "sdram:burst_bytes=8,bytes_per_cycle=2,row_bytes=64"


@pytest.mark.parametrize("k", [1, 3, 4, 5, 8, 9, 13])
def test_lines_moved_by_a_single_scan_by_hand(k):
    n = 48
    x = np.zeros(n, dtype=np.int64)
    x[np.arange(k) * 3] = np.arange(1, k + 1)
    g = copy_graph(n)
    data = {"x": TensorData.from_dense(x, g.tensors["x"].fmt)}
    ideal = run_graph(g, data)
    res = run_graph(g, data, memory=SMALL)
    assert np.array_equal(res.outputs["y"].to_dense(), x)
    arrays = res.counters["arrays"]
    lines = {key: a["lines"] for key, a in arrays.items()}
    # reads stream from line 0 and each access to a new line prefetches the next (no bound at the
    # array's end): lines touched + 1.  seg = [0, k]: both words in line 0, so 2 lines.
    assert lines["x.seg0"] == 2
    assert lines["x.crd0"] == math.ceil(k / 4) + 1
    assert lines["x.vals"] == math.ceil(k / 2) + 1
    # writes are combined per line: ceil(words * word_bytes / burst); y.seg0 is [0, k] (1 line)
    assert lines["y.crd0"] == math.ceil(k * 2 / 8)
    assert lines["y.vals"] == math.ceil(k * 4 / 8)
    assert lines["y.seg0"] == 1
    assert all(a["bytes_moved"] == a["lines"] * 8 for a in arrays.values())
    assert res.counters["bytes_offchip"] == 8 * sum(lines.values())
    # words: seg read once (2 words), every crd and vals word once; written y.seg0 = [0, k]
    assert (arrays["x.seg0"]["words_read"], arrays["x.crd0"]["words_read"], arrays["x.vals"]["words_read"]) == (2, k, k)
    assert (arrays["y.seg0"]["words_written"], arrays["y.crd0"]["words_written"],
            arrays["y.vals"]["words_written"]) == (2, k, k)
    # four accesses depend on each other (seg bounds -> crd -> the value load's ref -> the values
    # writer's flush at D), each to a bank with no open row or another row open (banks 4; arrays
    # x.crd0, x.seg0, x.vals, y.crd0, y.seg0, y.vals -> banks 0, 1, 2, 3, 0, 1): each costs at
    # least a grant cycle, tRCD + tCL and a transfer over the ideal run
    sd = parse_memory(SMALL)
    assert res.cycles >= ideal.cycles + 4 * (1 + sd.t_rcd + sd.t_cl + sd.xfer_cycles)


def test_writers_combine_words_into_lines():
    n = 16
    g, data, ops, expected = example("spmm_csr", n, seed=4, density=0.2)
    burst = 16
    res = run_graph(g, data, memory=f"sdram:burst_bytes={burst}")
    assert np.array_equal(res.outputs["C"].to_dense(), expected)
    # C's stored entries: (i, j) reached by some A[i,k] != 0 and B[k,j] != 0 (structural)
    nnz_c = int(np.count_nonzero((ops["A"] != 0).astype(int) @ (ops["B"] != 0).astype(int)))
    arrays = res.counters["arrays"]
    assert arrays["C.crd1"]["words_written"] == nnz_c
    assert arrays["C.crd1"]["lines"] == math.ceil(nnz_c * 2 / burst)
    assert arrays["C.vals"]["lines"] == math.ceil(nnz_c * 4 / burst)
    assert arrays["C.seg1"]["lines"] == math.ceil((n + 1) * 2 / burst)  # a seg word per row + 1
    g2, data2, _, _ = example("spmv", n, seed=4, density=0.2)
    y = run_graph(g2, data2, memory=f"sdram:burst_bytes={burst}").counters["arrays"]["y.vals"]
    assert (y["words_written"], y["lines"]) == (n, math.ceil(n * 4 / burst))


# ----------------------------------------------------------------------------- errors
def test_skipping_scanner_needs_its_tensor_on_chip():
    g, data, _, expected = example("spmspm_inner", 8, seed=1, density=0.3)
    gs = enable_skipping(g)
    with pytest.raises(MemoryError) as exc:
        run_graph(gs, data, memory="hbm2")
    msg = str(exc.value)
    assert "'scan_A1'" in msg and "'A'" in msg and "skip" in msg
    with pytest.raises(MemoryError, match="'scan_B1'.*'B'"):
        run_graph(gs, data, memory="hbm2", onchip=["A"])
    res = run_graph(gs, data, memory="hbm2", onchip=["A", "B"])
    assert np.array_equal(res.outputs["C"].to_dense(), expected)
    run_graph(gs, data)  # ideal: no ports, no error


def test_unknown_onchip_tensor_is_named():
    g, data, _, _ = example("spmv", 8)
    with pytest.raises(MemoryError) as exc:
        run_graph(g, data, memory="hbm2", onchip=["c", "nosuch"])
    assert "'nosuch'" in str(exc.value) and "'c'" not in str(exc.value).split("(tensors")[0]
    with pytest.raises(MemoryError, match="nosuch"):
        run_graph(g, data, onchip=["nosuch"])  # checked under the ideal model too


def test_a_burst_smaller_than_a_word_is_refused():
    g, data, _, _ = example("spmv", 8)
    m = parse_memory("sdram:burst_bytes=2")  # a valid model, but a vals word is 4 bytes
    with pytest.raises(MemoryError, match="burst_bytes = 2 .*4-byte"):
        run_graph(g, data, memory=m)
    run_graph(g, data, memory=m, onchip=["B", "c", "y"])  # no port: nothing to refuse


def test_the_cycle_cap_names_the_graph_and_the_memory_model():
    """A run stopped by max_cycles says which graph and, when not ideal, which memory model set
    the pace (a slow model is the usual reason a run reaches the cap)."""
    g, data, _, _ = example("spmv", 16)
    with pytest.raises(SimError, match=r"graph 'spmv': simulation exceeded 50 cycles under memory model hbm2"):
        run_graph(g, data, memory="hbm2", max_cycles=50)
    with pytest.raises(SimError, match=r"graph 'spmv': simulation exceeded 50 cycles \(the cap"):
        run_graph(g, data, max_cycles=50)
