"""Conversions instead of refusals (docs/compiler.md, "Conversions"): where the operands' formats
cannot give what a statement asks for directly, the compiler inserts the conversion and says so
in ``--explain``, and the values are numpy's on the dense tensors (the sparse tensor means the
dense tensor it stores):

(a) an output requested in a mode order its operands cannot produce (CSC from a COO operand, a
    dataflow order the user wrote, two outputs of one graph in conflicting orders) is computed in
    an order they allow and re-sorted on the host (an output conversion);
(b) a function with ``f(0) != 0`` of a sparse result (a product's, a sum with a dense operand)
    iterates densely;
(c) a bias broadcast over a sparse result whose rows may be empty iterates those rows densely.

Each case is compiled at every fusion granularity, simulated in sw_sim on seeded random sparse
inputs with empty rows and columns, and compared with numpy; the model frontend's twins with
PyTorch."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest
from compiler_programs import assert_canonical

from fuseflow.compiler import (
    Program,
    compile_program,
    einsum,
    exp,
    relu,
    run_program,
    sigmoid,
)
from fuseflow.ir.tensor import Format
from fuseflow.models.frontend import trace
from fuseflow.models.plan import compile_model, run_model
from sw_sim import run_graph

try:
    import torch
except ImportError:  # the model frontend's tests need PyTorch (pip install -e '.[torch]')
    torch = None

FUSIONS = ["unfused", "partial", "full"]
SEEDS = [0, 1]


def _sparse(rng: np.random.Generator, shape: tuple[int, ...], density: float = 0.35) -> np.ndarray:
    """Random integers with an empty first row and last column."""
    a = rng.integers(-3, 4, shape) * (rng.random(shape) < density)
    a[0] = 0
    a[:, -1] = 0
    return a


def _run(p: Program, data: dict[str, np.ndarray], fusion: str, numerics: str = "int32"):
    compiled = compile_program(p, fusion)
    extra = {} if numerics == "int32" else {"numerics": numerics}
    return compiled, run_program(compiled, data, simulate=run_graph, **extra)


def _check(p: Program, data: dict[str, np.ndarray], want: dict[str, np.ndarray], fusion: str,
           numerics: str = "int32"):
    compiled, res = _run(p, data, fusion, numerics)
    for name, w in want.items():
        assert_canonical(name, res.outputs[name])
        got = res.dense(name)
        assert got.shape == w.shape
        if numerics == "int32":
            np.testing.assert_array_equal(got, w, err_msg=name)
        else:
            np.testing.assert_allclose(got, w, rtol=1e-9, atol=1e-9, err_msg=name)
    return compiled, res


# ----------------------------------------------------------------------------- (a) output conversion
def _coo_copy_to_csc() -> Program:
    p = Program("coo_to_csc")
    p.output(p.let("Y", einsum("ij->ij", p.tensor("A", (5, 6), "coo")), fmt="csc"))
    return p


def _spmm_csc_in_user_order() -> Program:
    p = Program("spmm_csc")
    A, X = p.tensor("A", (5, 6), "csr"), p.tensor("X", (6, 4), "dense")
    p.output(p.let("Y", einsum("ik,kj->ij", A, X), fmt="csc", order="ikj"))
    return p


def _two_outputs_in_two_orders() -> Program:
    p = Program("csr_and_csc")
    A, B = p.tensor("A", (5, 6), "csr"), p.tensor("B", (6, 4), "csr")
    t = p.let("T", einsum("ik,kj->ij", A, B), fmt="csr")
    p.output(t)
    p.output(p.let("Y", relu(t), fmt="dcsc"))
    return p


def _converted_output_read_later() -> Program:
    p = Program("csc_then_scale")
    A, X = p.tensor("A", (5, 6), "coo"), p.tensor("X", (6, 4), "dense")
    y = p.let("Y", einsum("ik,kj->ij", A, X), fmt="csc", order="ikj")
    p.region(y)
    z = p.let("Z", 3 * relu(y))
    p.region(z)
    p.output(y)
    p.output(z)
    return p


# builder, numpy on the dense inputs, the fusions that convert an output (in the others, a graph
# of its own reads the other output from a permuted copy)
OUTPUT_CASES: dict[str, tuple[Callable[[], Program], Callable[[dict], dict], set[str]]] = {
    "coo_to_csc": (_coo_copy_to_csc, lambda d: {"Y": d["A"]}, set(FUSIONS)),
    "spmm_csc_user_order": (_spmm_csc_in_user_order, lambda d: {"Y": d["A"] @ d["X"]}, set(FUSIONS)),
    "two_outputs": (_two_outputs_in_two_orders,
                    lambda d: {"T": d["A"] @ d["B"], "Y": np.maximum(d["A"] @ d["B"], 0)}, {"full"}),
    "read_later": (_converted_output_read_later,
                   lambda d: {"Y": d["A"] @ d["X"], "Z": 3 * np.maximum(d["A"] @ d["X"], 0)},
                   set(FUSIONS)),
}


def _data(p: Program, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for name in p.inputs():
        d = p.decls[name]
        dense = all(f is Format.DENSE for f in d.fmt.levels)
        out[name] = rng.integers(-3, 4, d.shape) if dense else _sparse(rng, d.shape)
    return out


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("case", sorted(OUTPUT_CASES))
def test_output_in_another_order_is_converted_on_the_host(case: str, fusion: str, seed: int) -> None:
    build, want, converting = OUTPUT_CASES[case]
    p = build()
    data = _data(p, np.random.default_rng(seed))
    compiled, res = _check(p, data, want(data), fusion)
    converted = [c for c in compiled.permuted if c.name in {s.out for s in p.statements}]
    assert bool(converted) == (fusion in converting)
    if not converted:
        return
    for c in converted:  # stored as declared, after the host's re-sort
        assert res.outputs[c.name].fmt == p.decls[c.name].fmt
        assert "output conversion on the host" in c.reason
    assert "output conversion on the host" in compiled.explain()


def test_the_explain_text_of_an_output_conversion() -> None:
    text = compile_program(_spmm_csc_in_user_order()).explain()
    assert ("permuted copy: Y = Y_computed stored as [d,c]@10 (output conversion on the host: Y is "
            "requested in mode order j -> i, which conflicts with the orders of its operands (POG "
            "cycle i -> u0 -> j -> i): computed as Y_computed in an order they allow") in text
    assert "chosen order: i -> u0 -> j" in text  # the user's order, kept


def test_a_user_order_that_conflicts_with_an_operand_stays_an_error() -> None:
    """Only an output's mode order is converted: an operand's is the user's to resolve."""
    p = Program("bad")
    A, X = p.tensor("A", (3, 4), "csr"), p.tensor("X", (4, 5), "dense")
    p.output(p.let("T", einsum("ik,kj->ij", A, X), fmt="csc", order="kij"))
    with pytest.raises(Exception, match="the ordering constraints form a cycle"):
        compile_program(p)


# ----------------------------------------------------------------------------- (b) f(0) != 0
def _sigmoid_of_spgemm() -> Program:
    p = Program("sigmoid_spgemm")
    A, B = p.tensor("A", (5, 6), "csr"), p.tensor("B", (6, 4), "csc")
    p.output(p.let("Y", sigmoid(einsum("ik,kj->ij", A, B))))
    return p


def _exp_of_sum_with_dense() -> Program:
    p = Program("exp_sum")
    A, X = p.tensor("A", (5, 6), "csr"), p.tensor("X", (5, 6), "dense")
    p.output(p.let("Y", exp((A + X) / 4)))
    return p


def _exp_of_product() -> Program:
    p = Program("exp_product")
    A, C = p.tensor("A", (5, 6), "dcsr"), p.tensor("C", (5, 6), "csc")
    p.output(p.let("Y", exp(A * C / 8)))
    return p


def _shift_of_spgemm() -> Program:
    p = Program("shift_spgemm")
    A, B = p.tensor("A", (5, 6), "dcsr"), p.tensor("B", (6, 4), "dcsr")
    t = p.let("T", einsum("ik,kj->ij", A, B))
    p.output(p.let("Y", t + 1))
    return p


def _exp_of_a_biased_result() -> Program:
    """``exp`` of ``A + b`` (A DCSR): the sum's densified rows and the dense ``b`` visit every
    coordinate, nothing more to add (fused, the table sees that through the inlined sum)."""
    p = Program("exp_biased")
    t = p.let("T", p.tensor("A", (5, 6), "dcsr") + p.tensor("b", (6,), "dense"))
    p.output(p.let("Y", exp(t / 8)))
    return p


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


F0_CASES = {
    "sigmoid_spgemm": (_sigmoid_of_spgemm, lambda d: _sig(d["A"] @ d["B"]), "float"),
    "exp_sum_dense": (_exp_of_sum_with_dense, lambda d: np.exp((d["A"] + d["X"]) / 4), "float"),
    "exp_product": (_exp_of_product, lambda d: np.exp(d["A"] * d["C"] / 8), "float"),
    "shift_spgemm": (_shift_of_spgemm, lambda d: d["A"] @ d["B"] + 1, "int32"),
    "exp_biased": (_exp_of_a_biased_result, lambda d: np.exp((d["A"] + d["b"]) / 8), "float"),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("case", sorted(F0_CASES))
def test_function_not_zero_at_zero_iterates_densely(case: str, fusion: str, seed: int) -> None:
    build, want, numerics = F0_CASES[case]
    p = build()
    data = _data(p, np.random.default_rng(seed))
    compiled, _ = _check(p, data, {"Y": want(data)}, fusion, numerics)
    text = compiled.explain()
    if case != "exp_sum_dense":  # there the dense X gives every coordinate already
        assert "_iter" in text
    if case not in ("exp_sum_dense", "exp_biased"):  # (the bias densified exp_biased's operand)
        assert "is not 0 where its operand is 0 (f(0) != 0), so every coordinate is computed" in text


# ----------------------------------------------------------------------------- (c) broadcast bias
def _bias_over_dcsr() -> Program:
    p = Program("bias_dcsr")
    p.output(p.let("Y", p.tensor("A", (5, 6), "dcsr") + p.tensor("b", (6,), "dense")))
    return p


def _bias_after_spmm() -> Program:
    p = Program("spmm_bias")
    A, X, b = p.tensor("A", (5, 6), "dcsr"), p.tensor("X", (6, 4), "dense"), p.tensor("b", (4,), "dense")
    t = p.let("T", einsum("ik,kj->ij", A, X))
    p.output(p.let("Y", relu(t + b)))
    return p


def _bias_after_spgemm() -> Program:
    p = Program("spgemm_bias")
    A, B, b = p.tensor("A", (5, 6), "csr"), p.tensor("B", (6, 4), "csr"), p.tensor("b", (4,), "dense")
    t = p.let("T", einsum("ik,kj->ij", A, B), fmt="dcsr")
    p.output(p.let("Y", t - b))
    return p


def _bias_fused_under_a_product() -> Program:
    p = Program("fused_bias")
    A, C, b = p.tensor("A", (5, 6), "csr"), p.tensor("C", (6, 4), "dcsr"), p.tensor("b", (4,), "dense")
    h = p.let("H", relu(C + b))
    p.output(p.let("Y", einsum("ik,kj->ij", A, h)))
    return p


def _bias_along_a_transpose() -> Program:
    p = Program("transposed_bias")
    A, b = p.tensor("A", (5, 6), "csr"), p.tensor("b", (5,), "dense")
    p.output(p.let("Y", einsum("ij->ji", A) + b))
    return p


def _bias_into_csc() -> Program:
    """A CSR operand read from a column-major copy for a CSC result: the copy keeps A's rows
    dense (they enumerate the rows the bias reaches)."""
    p = Program("bias_csc")
    p.output(p.let("Y", p.tensor("A", (5, 6), "csr") + p.tensor("b", (6,), "dense"), fmt="csc"))
    return p


BIAS_CASES = {
    "bias_into_csc": (_bias_into_csc, lambda d: d["A"] + d["b"]),
    "bias_dcsr": (_bias_over_dcsr, lambda d: d["A"] + d["b"]),
    "spmm_bias": (_bias_after_spmm, lambda d: np.maximum(d["A"] @ d["X"] + d["b"], 0)),
    "spgemm_bias": (_bias_after_spgemm, lambda d: d["A"] @ d["B"] - d["b"]),
    "fused_bias": (_bias_fused_under_a_product, lambda d: d["A"] @ np.maximum(d["C"] + d["b"], 0)),
    "transposed_bias": (_bias_along_a_transpose, lambda d: d["A"].T + d["b"]),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("case", sorted(BIAS_CASES))
def test_bias_over_empty_rows_iterates_densely(case: str, fusion: str, seed: int) -> None:
    build, want = BIAS_CASES[case]
    p = build()
    data = _data(p, np.random.default_rng(seed))
    compiled, _ = _check(p, data, {"Y": want(data)}, fusion)
    densified = case != "bias_into_csc"  # (a CSR operand: rows dense)
    assert ("_iter" in compiled.explain()) == densified
    assert ("is broadcast over indices it lacks and reaches the coordinates where" in compiled.explain()) == densified


def test_a_bias_over_dense_rows_adds_no_iteration() -> None:
    """A CSR operand's rows are dense: nothing to densify (the graph is unchanged)."""
    p = Program("bias_csr")
    p.output(p.let("Y", p.tensor("A", (5, 6), "csr") + p.tensor("b", (6,), "dense")))
    assert "_iter" not in compile_program(p).explain()


# ----------------------------------------------------------------------------- the model frontend
def _exp_of_spmm(adj, x, _):
    return torch.exp(adj @ x)


def _sparse_linear(adj, x, lin):
    """A bias broadcast over ``adj @ x``, whose rows are empty where ``adj``'s are, and a
    sigmoid of a product of sparse operands."""
    return lin(adj @ x) + torch.sigmoid(adj * adj)[:, :3]


@pytest.mark.skipif(torch is None, reason="the model frontend needs PyTorch")
@pytest.mark.parametrize("forward", [_exp_of_spmm, _sparse_linear])
@pytest.mark.parametrize("fusion", ["unfused", "full"])
def test_model_frontend_values_equal_pytorch(forward, fusion: str) -> None:
    class Module(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, adj, x):
            return forward(adj, x, self.lin)

    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    torch.manual_seed(0)
    m = Module().double().eval()
    g = torch.Generator().manual_seed(3)
    adj = (torch.rand(6, 6, generator=g) < 0.3).double()
    adj[0] = 0  # an empty row: exp(0) = 1 there, and the bias
    x = torch.rand(6, 4, generator=g, dtype=torch.float64)
    ir = trace(m, {"adj": adj, "x": x}, formats={"adj": "dcsr"})
    res = run_model(compile_model(ir, fusion), simulate=run_graph)
    [out] = res.outputs.values()
    ref = m(adj, x).detach().numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)
