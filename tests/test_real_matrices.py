"""Real-valued and rectangular matrices through the built-in kernels (issue 35, item 1): the
SuiteSparse matrices ``bcsstm02`` (66 x 66, a diagonal mass matrix) and ``lp_scsd1`` (77 x 760,
an LP constraint matrix; ``tests/data/suitesparse``) run at Q16.16 in sw_sim and in RTL.
References: scipy's products on the real values (never the project's evaluator alone), within
the error bound the numerics derive for each kernel; RTL cycles equal to sw_sim's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from fuseflow.ir.numerics import Numerics
from fuseflow.ir.results_file import load_results, save_results
from fuseflow.kernels import check_kernel, example_from_matrix
from sw_sim import run_graph

DATA = Path(__file__).parent / "data" / "suitesparse"
Q16 = Numerics.parse("q16.16")


def _matrix(name: str) -> sp.csr_array:
    return sp.csr_array(scipy.io.mmread(DATA / f"{name}.mtx"))


def _scipy(kernel: str, m: sp.csr_array, ops: dict) -> np.ndarray:
    """The kernel's result computed by scipy from the matrix file and the dense operands."""
    dense = {"spmv": lambda: m @ ops["c"], "spmm_dense": lambda: m @ ops["B"],
             "spmm_csr": lambda: m @ (m if m.shape[0] == m.shape[1] else m.T), "add": lambda: m + m,
             "mul": lambda: m.multiply(m), "spmspm_inner": lambda: m @ m.T}[kernel]()
    return dense.toarray() if sp.issparse(dense) else np.asarray(dense)


CASES = [("bcsstm02", "spmv", None), ("bcsstm02", "spmm_csr", None), ("lp_scsd1", "spmv", None),
         ("lp_scsd1", "spmm_dense", 16), ("lp_scsd1", "spmm_csr", None), ("lp_scsd1", "add", None),
         ("lp_scsd1", "mul", None)]


def test_the_shipped_matrices_are_what_they_say():
    b, lp = _matrix("bcsstm02"), _matrix("lp_scsd1")
    assert b.shape == (66, 66) and b.nnz == 66 and np.count_nonzero(b.toarray() - np.diag(b.diagonal())) == 0
    assert lp.shape == (77, 760) and lp.nnz == 2387
    assert not np.allclose(lp.data, np.round(lp.data))  # real-valued: the integer datapath refuses it


@pytest.mark.parametrize("name, kernel, cols", CASES)
def test_real_matrix_in_sw_sim_within_the_q16_bound_of_scipy(name, kernel, cols):
    m = _matrix(name)
    g, data, ops, _ = example_from_matrix(kernel, m, 0, name, numerics=Q16, x_cols=cols)
    res = run_graph(g, data, numerics=Q16)
    [out] = res.outputs.values()
    got = Q16.dequantize(out.to_dense())
    want = _scipy(kernel, m, ops)
    assert got.shape == want.shape
    check = check_kernel(kernel, g, ops, got, Q16)
    assert check.ok, check.text()
    # scipy's result directly: the error stays within the derived bound (and is not zero: the
    # values really went through fixed point)
    assert 0 < np.abs(got - want).max() <= check.bound * (1 + 1e-9) + 1e-12


@pytest.mark.rtl
@pytest.mark.parametrize("name, kernel, cols", [("lp_scsd1", "spmv", None),
                                                pytest.param("bcsstm02", "spmm_csr", None, marks=pytest.mark.slow),
                                                pytest.param("lp_scsd1", "spmm_dense", 16, marks=pytest.mark.slow)])
def test_real_matrix_in_rtl_equals_sw_sim(name, kernel, cols, capsys, tmp_path):
    """``rtl --kernel K --data M.mtx --numerics q16.16``: RTL values and cycles equal sw_sim's,
    within the bound of scipy's result."""
    from fuseflow_cli.cli import main

    argv = ["rtl", "--kernel", kernel, "--data", str(DATA / f"{name}.mtx"), "--numerics", "q16.16", "--json",
            "--save", str(tmp_path / "out.npz")]
    argv += ["--dense-cols", str(cols)] if cols else []
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["outputs_identical"] and r["rtl_cycles"] == r["sw_cycles"] and r["check"] == "pass"
    assert r["numerics"] == "q16.16" and 0 < r["error"] <= r["tolerance"] and r["vw"] == 32
    # --save: the RTL's output, dequantised, within the bound of scipy's result
    [(out, got)] = load_results(r["saved"]).items()
    m = _matrix(name)
    want = _scipy(kernel, m, example_from_matrix(kernel, m, 0, name, numerics=Q16, x_cols=cols)[2])
    got = got.toarray() if sp.issparse(got) else got
    assert got.shape == want.shape and 0 < np.abs(got - want).max() <= r["tolerance"] * (1 + 1e-9)


def _given_x(tmp_path: Path) -> tuple[Path, np.ndarray]:
    x = np.random.default_rng(5).uniform(-2, 2, (760, 16))
    np.save(tmp_path / "x.npy", x)
    return tmp_path / "x.npy", x


@pytest.mark.parametrize("cmd", ["sim", pytest.param("rtl", marks=[pytest.mark.rtl, pytest.mark.slow])])
def test_spmm_with_a_given_real_x(cmd, tmp_path, capsys):
    """lp_scsd1 (77x760) times a user's real 760x16 X (``--operand B=x.npy``) at q16.16: within
    the bound of scipy's product; in RTL, cycles and values equal sw_sim's."""
    from fuseflow_cli.cli import main

    path, x = _given_x(tmp_path)
    assert main([cmd, "--kernel", "spmm_dense", "--data", str(DATA / "lp_scsd1.mtx"), "--operand", f"B={path}",
                 "--numerics", "q16.16", "--json", "--save", str(tmp_path / "out.npz")]) == 0
    r = json.loads(capsys.readouterr().out)
    assert "computing C = M·X (B given)" in r["source"] and 0 < r["error"] <= r["tolerance"]
    if cmd == "rtl":
        assert r["outputs_identical"] and r["rtl_cycles"] == r["sw_cycles"] and r["check"] == "pass"
    [(_, got)] = load_results(r["saved"]).items()
    got = got.toarray() if sp.issparse(got) else np.asarray(got)
    want = _matrix("lp_scsd1") @ x
    assert got.shape == (77, 16) and 0 < np.abs(got - want).max() <= r["tolerance"] * (1 + 1e-9)


def test_spmspm_and_add_with_a_given_sparse_b(tmp_path, capsys):
    """bcsstm02 times (and plus) another real sparse matrix given as a file: scipy's results."""
    from fuseflow_cli.cli import main

    m = _matrix("bcsstm02")
    rng = np.random.default_rng(2)
    b = sp.random(66, 66, density=0.1, random_state=3, format="csr") + sp.diags(rng.uniform(-1, 1, 66))
    scipy.io.mmwrite(tmp_path / "b.mtx", sp.coo_matrix(b))
    for kernel, want in (("spmm_csr", m @ b), ("add", m + b), ("spmspm_inner", m @ b.T)):
        out = tmp_path / f"{kernel}.npz"
        assert main(["sim", "--kernel", kernel, "--data", str(DATA / "bcsstm02.mtx"), "--operand",
                     f"B={tmp_path / 'b.mtx'}", "--numerics", "q16.16", "--json", "--save", str(out)]) == 0
        r = json.loads(capsys.readouterr().out)
        [(_, got)] = load_results(out).items()
        got = got.toarray() if sp.issparse(got) else np.asarray(got)
        want = want.toarray() if sp.issparse(want) else np.asarray(want)
        assert r["ok"] and np.abs(got - want).max() <= r["tolerance"] * (1 + 1e-9) + 1e-12, kernel


@pytest.mark.parametrize("argv, says", [
    (["sim", "--kernel", "spmv", "--data", "{lp}", "--operand", "c={x}", "--numerics", "q16.16"],
     "operand c (the dense vector) has shape 760×16; kernel spmv on the 77×760 matrix"),
    (["sim", "--kernel", "spmv", "--data", "{lp}", "--operand", "X={x}", "--numerics", "q16.16"],
     "operand X: kernel spmv takes c (the dense vector)"),
    (["sim", "--kernel", "spmm_dense", "--operand", "B={x}"], "--operand B="),
    (["sim", "--kernel", "spmm_dense", "--data", "{lp}", "--operand", "B={x}", "--dense-cols", "3",
      "--numerics", "q16.16"], "fixes the dense operand's columns"),
    (["sim", "--kernel", "spmm_dense", "--data", "{lp}", "--operand", "B=nope.npy"], "no such file 'nope.npy'"),
    (["sim", "--kernel", "spmm_dense", "--data", "{lp}", "--operand", "B"], "expected TENSOR=FILE"),
    (["sim", "--kernel", "spmv", "--data", "{lp}"], "the datapath is integer, but entry (0, 10) is -0.707"),
    (["sim", "--kernel", "spmv", "--data", "{lp}"], "give --numerics q16.16"),
    (["rtl", "--kernel", "spmv", "--data", "{lp}", "--numerics", "q8.8", "--vw", "32"], "--vw 32 and --numerics q8.8"),
    (["rtl", "--kernel", "spmv", "--size", "8", "--numerics", "float"], "float is sw_sim only"),
    (["sim", "--kernel", "spmv", "--size", "8", "--dense-cols", "4"], "--dense-cols 4: the columns of the dense"),
    (["sim", "--kernel", "spmv", "--data", "{lp}", "--dense-cols", "4"], "kernel spmv has no generated dense"),
    (["sim", "--kernel", "spmv", "--data", "{big}", "--numerics", "q16.16"],
     "input 'B': 1 value(s) outside the q16.16 range"),
])
def test_real_data_mistakes_are_clear_errors(argv, says, capsys, tmp_path):
    from fuseflow_cli.cli import main

    big = tmp_path / "big.mtx"
    scipy.io.mmwrite(big, sp.coo_array(([0.5, 1e6], ([0, 1], [1, 0])), shape=(3, 3)))
    x, _ = _given_x(tmp_path)
    assert main([a.format(lp=DATA / "lp_scsd1.mtx", big=big, x=x) for a in argv]) == 2
    assert says in capsys.readouterr().err


def test_sim_float_and_fixed_point_on_a_rectangular_matrix(capsys):
    """``sim --numerics float`` really runs in float (the q16.16 run's error is larger), and the
    text names the bound it checked against."""
    from fuseflow_cli.cli import main

    errors = {}
    for num in ("float", "q16.16"):
        assert main(["sim", "--kernel", "spmv", "--data", str(DATA / "lp_scsd1.mtx"), "--numerics", num, "--json"]) == 0
        r = json.loads(capsys.readouterr().out)
        assert r["ok"] and r["numerics"] == num and r["error"] <= r["tolerance"]
        errors[num] = r["error"]
    assert errors["float"] < 1e-12 < errors["q16.16"]
    assert main(["sim", "--kernel", "spmv", "--data", str(DATA / "lp_scsd1.mtx"), "--numerics", "q16.16"]) == 0
    out = capsys.readouterr().out
    assert "kernel spmv on lp_scsd1.mtx (77x760) computing y = M·c" in out and "check against numpy (q16.16): PASS" in out


@pytest.mark.rtl
@pytest.mark.slow  # a LiteDRAM board top in Verilator: minutes
def test_a_real_rectangular_matrix_on_the_simulated_board(capsys):
    """``run --board ulx3s-85f --sim --kernel spmv --data lp_scsd1.mtx --numerics q16.16``: the
    matrix in the board's DRAM, the board's values equal sw_sim's and within the bound of
    scipy's."""
    from fuseflow_cli.cli import main

    assert main(["run", "--board", "ulx3s-85f", "--sim", "--kernel", "spmv", "--data", str(DATA / "lp_scsd1.mtx"),
                 "--numerics", "q16.16", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["check"] == "pass" and r["outputs"]["y"]["equal_to_sw_sim"]
    c = r["check_against_numpy"]
    assert c["ok"] and c["numerics"] == "q16.16" and 0 < c["error"] <= c["tolerance"]


def test_save_writes_sparse_outputs_as_csr_and_dense_ones_as_arrays(tmp_path, capsys):
    """``sim --save``: a sparse result (SpMM M·Mᵀ on lp_scsd1) comes back as scipy CSR with the
    real values, within the bound of scipy's product; a dense one (SpMV) as its array; and the
    file round-trips through numpy without this package."""
    from fuseflow_cli.cli import main

    lp = DATA / "lp_scsd1.mtx"
    assert main(["sim", "--kernel", "spmm_csr", "--data", str(lp), "--numerics", "q16.16", "--json",
                 "--save", str(tmp_path / "c")]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["saved"] == str(tmp_path / "c.npz")
    [(name, c)] = load_results(r["saved"]).items()
    m = _matrix("lp_scsd1")
    assert name == "C" and sp.issparse(c) and c.shape == (77, 77)
    assert np.abs(c.toarray() - (m @ m.T).toarray()).max() <= r["tolerance"] * (1 + 1e-9)
    assert set(np.load(r["saved"]).files) == {"C.data", "C.indices", "C.indptr", "C.shape"}
    assert main(["sim", "--kernel", "spmv", "--size", "16", "--save", str(tmp_path / "y.npz")]) == 0
    assert "outputs saved:" in capsys.readouterr().out
    y = np.load(tmp_path / "y.npz")["y"]
    assert y.dtype.kind == "i" and y.shape == (16,)
    # a directory that does not exist is refused before the run
    assert main(["sim", "--kernel", "spmv", "--save", str(tmp_path / "no" / "y.npz")]) == 2
    assert "no directory" in capsys.readouterr().err
    # a 3-D dense tensor and a TensorData round-trip
    save_results(tmp_path / "t.npz", {"T": np.arange(8.0).reshape(2, 2, 2)})
    assert np.array_equal(load_results(tmp_path / "t.npz")["T"], np.arange(8.0).reshape(2, 2, 2))


def test_sim_model_save_is_within_the_bound_of_pytorch(tmp_path, capsys):
    """``sim --model gcn --numerics q16.16 --save``: the saved output against PyTorch's."""
    pytest.importorskip("torch")
    from fuseflow.models.zoo import make_case
    from fuseflow_cli.cli import main

    assert main(["sim", "--model", "gcn", "--numerics", "q16.16", "--json", "--save", str(tmp_path / "g.npz")]) == 0
    r = json.loads(capsys.readouterr().out)
    [(name, got)] = load_results(r["saved"]).items()
    want = make_case("gcn").reference()
    want = np.asarray(want[name] if isinstance(want, dict) else want, dtype=np.float64)
    assert got.shape == want.shape and np.abs(got - want).max() <= r["tolerance"] * (1 + 1e-9)
