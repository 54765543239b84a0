"""sw_sim's run counters (docs/memory.md, "Counters") against hand counts and numpy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fuseflow.kernels import example
from fuseflow_cli.cli import main
from sw_sim import run_graph
from sw_sim.counters import merge_counters

CRD_B, VAL_B = 2, 4  # bytes of a crd/seg word (16 bits) and of a vals word (32 bits)


def nnz(a) -> int:
    return int(np.count_nonzero(a))


def check_bytes(counters) -> None:
    """bytes = words x word size per array; the totals add the arrays up."""
    for key, a in counters["arrays"].items():
        wb = VAL_B if key.endswith(".vals") else CRD_B
        assert a["bytes_read"] == a["words_read"] * wb, key
        assert a["bytes_written"] == a["words_written"] * wb, key
    arrays = counters["arrays"].values()
    assert counters["bytes_read"] == sum(a["bytes_read"] for a in arrays)
    assert counters["bytes_written"] == sum(a["bytes_written"] for a in arrays)
    assert counters["flops_total"] == sum(counters["flops"].values())
    moved = counters["bytes_read"] + counters["bytes_written"]
    assert counters["intensity"] == pytest.approx(counters["flops_total"] / moved, abs=1e-6)


@pytest.mark.parametrize("n, density", [(16, 0.2), (24, 0.05)])
def test_spmv_counts(n, density):
    g, data, ops, _ = example("spmv", n, seed=3, density=density)
    c = run_graph(g, data).counters
    nb = nnz(ops["B"])
    # one product per nonzero of B (c is dense and located), the reduction folds each of them
    assert c["flops"] == {"add": nb, "mul": nb}
    a = c["arrays"]
    # B is CSR: level 0 dense (no arrays), level 1 scanned once per row: 2 seg words per row
    assert set(a) == {"B.seg1", "B.crd1", "B.vals", "c.vals", "y.vals"}
    assert (a["B.seg1"]["words_read"], a["B.crd1"]["words_read"]) == (2 * n, nb)
    assert (a["B.vals"]["words_read"], a["c.vals"]["words_read"]) == (nb, nb)
    assert a["y.vals"]["words_written"] == n and a["y.vals"]["words_read"] == 0
    assert a["B.crd1"]["bytes_read"] == 2 * nb and a["B.vals"]["bytes_read"] == 4 * nb
    read = CRD_B * (2 * n + nb) + VAL_B * 2 * nb
    assert c["bytes_read"] == read and c["bytes_written"] == VAL_B * n
    assert c["intensity"] == pytest.approx(2 * nb / (read + VAL_B * n), abs=1e-6)
    assert not any(x["offchip"] for x in a.values()) and c["bytes_offchip"] == 0
    check_bytes(c)


def test_elementwise_mul_counts_the_intersection():
    g, data, ops, _ = example("mul", 20, seed=6, density=0.4)
    c = run_graph(g, data).counters
    both = nnz((ops["A"] != 0) & (ops["B"] != 0))
    assert c["flops"] == {"mul": both}
    a = c["arrays"]
    # the intersection loads the values of the common coordinates only; both CSR rows are scanned
    assert a["A.vals"]["words_read"] == a["B.vals"]["words_read"] == both
    assert a["A.crd1"]["words_read"] == nnz(ops["A"]) and a["B.crd1"]["words_read"] == nnz(ops["B"])
    assert a["C.crd1"]["words_written"] == a["C.vals"]["words_written"] == both
    assert a["C.seg1"]["words_written"] == 20 + 1
    check_bytes(c)


def test_elementwise_add_counts_the_union():
    g, data, ops, _ = example("add", 20, seed=6, density=0.4)
    c = run_graph(g, data).counters
    either = nnz((ops["A"] != 0) | (ops["B"] != 0))
    assert c["flops"] == {"add": either}
    a = c["arrays"]
    # only present operands are loaded (the other side is N)
    assert a["A.vals"]["words_read"] == nnz(ops["A"]) and a["B.vals"]["words_read"] == nnz(ops["B"])
    assert a["C.vals"]["words_written"] == either
    check_bytes(c)


@pytest.mark.parametrize("kernel", ["spmm_csr", "spmm_dense"])
def test_spmm_flops_are_the_products(kernel):
    n = 16
    g, data, ops, expected = example(kernel, n, seed=2, density=0.25)
    res = run_graph(g, data)
    assert np.array_equal(res.outputs["C"].to_dense(), expected)
    c = res.counters
    A, B = ops["A"], ops["B"]
    # Gustavson: every nonzero A[i,k] is multiplied by every stored entry of row k of B (a dense
    # B stores all n entries); the accumulator folds each product in with one add
    row_nnz = np.count_nonzero(B, axis=1) if kernel == "spmm_csr" else np.full(n, n)
    products = int(sum(row_nnz[k] for _, k in zip(*np.nonzero(A))))
    assert c["flops"] == {"add": products, "mul": products}
    a = c["arrays"]
    assert a["A.vals"]["words_read"] == a["B.vals"]["words_read"] == products
    # C stores (i, j) when some A[i,k] != 0 meets a stored B[k,j]
    b_stored = (B != 0) if kernel == "spmm_csr" else np.ones_like(B, dtype=bool)
    c_nnz = nnz((A != 0).astype(int) @ b_stored.astype(int))
    assert a["C.crd1"]["words_written"] == a["C.vals"]["words_written"] == c_nnz
    check_bytes(c)


def test_counters_do_not_depend_on_the_memory_except_lines():
    g, data, _, _ = example("spmm_csr", 12, seed=1, density=0.3)
    ideal = run_graph(g, data).counters
    hbm = run_graph(g, data, memory="hbm2", onchip=["B"]).counters
    assert hbm["flops"] == ideal["flops"] and hbm["tokens"] == ideal["tokens"]
    for key, a in ideal["arrays"].items():
        h = hbm["arrays"][key]
        for f in ("words_read", "words_written", "bytes_read", "bytes_written"):
            assert h[f] == a[f], (key, f)
        assert h["offchip"] == (not key.startswith("B."))
        assert ("lines" in h) == h["offchip"]
    assert hbm["bytes_offchip"] == 64 * sum(a.get("lines", 0) for a in hbm["arrays"].values())
    assert hbm["row_hits"] + hbm["row_misses"] + hbm["row_conflicts"] == sum(
        a.get("lines", 0) for a in hbm["arrays"].values())


def test_merge_counters_adds_up():
    g1, d1, _, _ = example("spmv", 12, seed=1)
    g2, d2, _, _ = example("spmm_csr", 12, seed=2)
    c1 = run_graph(g1, d1, memory="hbm2").counters
    c2 = run_graph(g2, d2, memory="hbm2").counters
    c3 = run_graph(g1, d1, memory="hbm2").counters
    m = merge_counters([c1, c2, c3])
    for op in set(c1["flops"]) | set(c2["flops"]):
        assert m["flops"][op] == 2 * c1["flops"].get(op, 0) + c2["flops"].get(op, 0)
    for key in set(c1["arrays"]) | set(c2["arrays"]):
        for f in ("words_read", "bytes_written", "lines", "bytes_moved"):
            want = 2 * c1["arrays"].get(key, {}).get(f, 0) + c2["arrays"].get(key, {}).get(f, 0)
            assert m["arrays"][key][f] == want, (key, f)
    for f in ("flops_total", "bytes_read", "bytes_written", "bytes_offchip", "row_hits", "row_misses"):
        assert m[f] == 2 * c1[f] + c2[f], f
    assert m["intensity"] == pytest.approx(m["flops_total"] / (m["bytes_read"] + m["bytes_written"]), abs=1e-6)
    assert merge_counters([c1]) == c1 | {"tokens": c1["tokens"]}


def test_cli_sim_json_has_the_documented_fields(capsys):
    n = 16
    assert main(["sim", "--kernel", "spmv", "--size", str(n), "--json", "--memory", "hbm2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True
    assert out["memory"]["name"] == "hbm2" and out["memory"]["bytes_per_cycle"] == 32
    assert out["memory"]["xfer_cycles"] == 2 and out["onchip"] == []
    c = out["counters"]
    for f in ("flops", "arrays", "flops_total", "bytes_read", "bytes_written", "bytes_offchip",
              "intensity", "tokens"):
        assert f in c, f
    # the CLI's operands: the kernel's seeded random data (seed 0, density 0.1)
    _, _, ops, _ = example("spmv", n, seed=0, density=0.1)
    nb = nnz(ops["B"])
    assert c["flops"] == {"add": nb, "mul": nb} and c["flops_total"] == 2 * nb
    assert c["arrays"]["B.crd1"] | {"lines": 0, "bytes_moved": 0} == {
        "offchip": True, "words_read": nb, "words_written": 0, "bytes_read": 2 * nb,
        "bytes_written": 0, "lines": 0, "bytes_moved": 0}
    assert c["bytes_offchip"] == 64 * sum(a["lines"] for a in c["arrays"].values())
    assert c["bytes_offchip"] > 0
    # y: 16 values of 4 bytes = one 64-byte line, written once
    assert c["arrays"]["y.vals"]["lines"] == 1
    main(["sim", "--kernel", "spmv", "--size", str(n), "--json", "--memory", "hbm2", "--onchip", "B,c"])
    out2 = json.loads(capsys.readouterr().out)
    assert out2["onchip"] == ["B", "c"]
    assert {k for k, a in out2["counters"]["arrays"].items() if a["offchip"]} == {"y.vals"}


def test_cli_sim_stats_prints_the_counters(capsys):
    assert main(["sim", "--kernel", "spmv", "--size", "8", "--stats", "--memory", "sdram"]) == 0
    out = capsys.readouterr().out
    for key in ("B.crd1", "B.seg1", "c.vals", "y.vals"):
        assert key in out
