"""The block-sparse SpMM kernel (fuseflow.kernels.bspmm) in sw_sim: Y = A X against numpy and
scipy's BSR product for every block size and lane split, the same values as the unstructured
SpMM on the same non-zeros, the heuristic's counts, the correlation-suite entries, and the CLI."""

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.cost import estimate_graph
from fuseflow.kernels import bspmm, example, spmm
from fuseflow.ir.samml import Graph
from fuseflow.suites import variant_suite
from fuseflow.ir.tensor import CSR, DENSE2, TensorData
from fuseflow_cli.cli import main
from sw_sim import run_graph


def _block_sparse(rng, n, k, block, density):
    """A matrix whose row segments of ``block`` columns are each stored with probability
    ``density`` (some entries inside zero)."""
    keep = np.repeat(rng.random((n, k // block)) < density, block, axis=1)
    a = rng.integers(-9, 10, size=(n, k)) * keep
    return a


@pytest.mark.parametrize("block, lanes", [(1, 1), (2, 2), (4, 4), (4, 2), (8, 8), (8, 1), (16, 16), (16, 4)])
def test_bspmm_is_the_product(block, lanes):
    rng = np.random.default_rng(block * 10 + lanes)
    n, k, m = 24, 32, 12
    a = _block_sparse(rng, n, k, block, 0.35)
    x = rng.integers(-9, 10, size=(k, m))
    g = bspmm(n, k, m, block, lanes)
    data = {t: g.tensors[t].data(v) for t, v in (("A", a), ("X", x))}
    g.verify(data)
    r = run_graph(g, data)
    y = r.outputs["Y"].to_dense()
    assert np.array_equal(y, a @ x)
    bsr = sp.bsr_array(a, blocksize=(1, block))  # scipy's block product, independently
    assert np.array_equal(y, bsr @ x)
    assert r.counters["flops"]["mul"] == data["A"].nnz * m  # every stored entry times every column


def test_k_is_padded_to_whole_blocks():
    rng = np.random.default_rng(9)
    a, x = rng.integers(-9, 10, size=(6, 10)) * (rng.random((6, 10)) < 0.3), rng.integers(-9, 10, size=(10, 5))
    g = bspmm(6, 10, 5, 4)
    assert g.tensors["A"].shape == (6, 3, 4) and g.tensors["A"].block.shape == (6, 10)
    data = {t: g.tensors[t].data(v) for t, v in (("A", a), ("X", x))}
    assert np.array_equal(data["A"].to_dense(), a) and np.array_equal(data["X"].to_dense(), x)
    assert np.array_equal(run_graph(g, data).outputs["Y"].to_dense(), a @ x)
    assert np.array_equal(run_graph(g, {"A": g.tensors["A"].data(sp.csr_array(a)), "X": data["X"]})
                          .outputs["Y"].to_dense(), a @ x)


def test_vector_lanes_are_on_the_graph():
    g = bspmm(16, 16, 16, 8, 4)
    lanes = {n.name: n.params.get("lanes") for n in g.nodes.values()}
    assert lanes["vals_A"] == lanes["vals_X"] == lanes["mul"] == lanes["reduce_block"] == lanes["lane_reduce"] == 4
    assert "lanes" not in g.nodes["reduce"].params
    assert g.tensors["A"].shape == (16, 2, 2, 4) and g.tensors["A"].block.shape == (16, 16)
    again = Graph.from_json(g.to_json())
    assert again.to_json() == g.to_json() and again.tensors["X"].block == g.tensors["X"].block


def test_fewer_cycles_than_unstructured_spmm_on_the_same_nonzeros():
    rng = np.random.default_rng(3)
    n = 32
    a = _block_sparse(rng, n, n, 8, 0.3)
    x = rng.integers(-9, 10, size=(n, n))
    g = bspmm(n, n, n, 8)
    blocked = run_graph(g, {t: g.tensors[t].data(v) for t, v in (("A", a), ("X", x))})
    csr = spmm(n, n, n, DENSE2)
    flat = run_graph(csr, {"A": TensorData.from_dense(a, CSR), "B": TensorData.from_dense(x, DENSE2)})
    assert np.array_equal(blocked.outputs["Y"].to_dense(), flat.outputs["C"].to_dense())
    assert blocked.cycles * 2 < flat.cycles


@pytest.mark.parametrize("block, lanes, cycles_rel", [(4, None, 0.05), (8, 2, 0.3)])
def test_estimate_counts_vector_work(block, lanes, cycles_rel):
    g, data, _, _ = example("bspmm", 32, seed=2, density=0.3, block=block, lanes=lanes)
    est, _ = estimate_graph(g, data)
    sim = run_graph(g, data)
    # W per vector product exactly; the adds within 10 % (a lane split sums the zero vectors of
    # rows without blocks too, which the heuristic's reduce rule does not count)
    assert est.flops["mul"] == sim.counters["flops"]["mul"]
    assert est.flops["add"] == pytest.approx(sim.counters["flops"]["add"], rel=0.1)
    assert est.bytes_read == pytest.approx(sim.counters["bytes_read"])
    # cycles: 0.4 % off with whole blocks as vectors, 22 % under with a split (the extra dense
    # level's stops are not in the busiest node's work)
    assert est.cycles == pytest.approx(sim.cycles, rel=cycles_rel)


def test_suite_entries_check_out():
    blocked = [e for e in variant_suite() if e.model == "blocked"]
    assert len(blocked) == 6
    for e in blocked[:2]:
        g, data, expected = e.make(run_graph)
        assert np.array_equal(run_graph(g, data).outputs["Y"].to_dense(), expected)


def test_cli(capsys):
    assert main(["sim", "--kernel", "bspmm", "--block", "8", "--lanes", "4", "--size", "16"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["sim", "--kernel", "bspmm", "--block", "6"]) == 2
    assert "block size 6 is not a power of two" in capsys.readouterr().err
    assert main(["sim", "--kernel", "spmv", "--lanes", "2"]) == 2
    assert "kernel 'spmv' takes no option lanes" in capsys.readouterr().err
    assert main(["sim", "--kernel", "bspmm", "--block", "4", "--size", "18"]) == 0  # k padded to 20
    assert "PASS" in capsys.readouterr().out


def test_graph_file_carries_blocks_and_lanes(tmp_path, capsys):
    """A saved bspmm graph passes the published schema and loads with its tensors' block
    records and its nodes' lanes; ``sim GRAPH --data X.npz`` takes operands in their original
    shapes and blocks them; a bad block record is a schema / graph error naming it."""
    import json

    from fuseflow.ir.graph_file import load_graph

    g = bspmm(16, 16, 8, 4)
    path = tmp_path / "bspmm.json"
    g.save(path)
    again = load_graph(path)
    assert again.to_json() == g.to_json() and again.tensors["A"].block == g.tensors["A"].block
    rng = np.random.default_rng(5)
    a, x = _block_sparse(rng, 16, 16, 4, 0.4), rng.integers(-9, 10, size=(16, 8))
    np.savez(tmp_path / "ops.npz", A=a, X=x)
    assert main(["sim", str(path), "--data", str(tmp_path / "ops.npz"), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["cycles"] > 0
    d = json.loads(path.read_text())
    d["tensors"]["A"]["block"]["block"] = [1, 3]
    path.write_text(json.dumps(d))
    assert main(["sim", str(path)]) == 2
    assert "block size 3 of mode 1 is not a power of two" in capsys.readouterr().err
    d["tensors"]["A"]["block"]["block"] = [1, 8]
    path.write_text(json.dumps(d))
    assert main(["sim", str(path)]) == 2
    assert "tensor 'A': blocked as" in capsys.readouterr().err
