"""Every failure the fuzzers found, shrunk by hand to a minimal module and named after what it
exercises; each compares with PyTorch on the dense tensors (the rule: a sparse tensor means the
dense tensor it stores).  An open bug is ``xfail(strict=True)`` with one line saying what is
wrong: the lead removes the mark (and the class in ``known.py``) with the fix.
/work/scratch/fuzz/findings.md has the diagnosis of each."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the frontend needs PyTorch")
import torch.nn.functional as F
from harness import check
from torch import nn

from fuseflow.compiler import LoweringError, Program, einsum, layernorm, run_program
from fuseflow.compiler import compile_program as compile_prog
from fuseflow.compiler import minimum as fc_minimum
from fuseflow.compiler import relu as fc_relu
from fuseflow.compiler import softmax as fc_softmax
from fuseflow.models import trace
from fuseflow.models.plan import compile_model, run_model
from sw_sim import run_graph

FUSIONS = ("unfused", "partial", "full")


def _dense(v):
    return v.to_dense() if isinstance(v, torch.Tensor) and v.layout != torch.strided else v


def assert_matches_pytorch(module: nn.Module, inputs: dict, formats: dict | None, fusion: str, **options) -> None:
    """``module`` through trace / compile_model / run_model (sw_sim, float) equals PyTorch on
    the dense tensors (``check``: shape, and 1e-9 of the largest magnitude)."""
    with torch.no_grad():
        want = module(**{k: _dense(v) for k, v in inputs.items()}).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ir = trace(module, inputs, formats)
        res = run_model(compile_model(ir, fusion, **options), simulate=run_graph)
    why = check(ir.outputs[0], res.outputs[ir.outputs[0]], want)
    assert why is None, why


def _csr_half(rows: int = 6, cols: int = 8, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float64)
    x[torch.rand(rows, cols, generator=g) < 0.5] = 0.0
    return x.to_sparse_csr()


# ----------------------------------------------------------------------------- layernorm
@pytest.mark.parametrize("fusion", FUSIONS)
def test_layernorm_over_csr_rows_counts_implicit_zeros(fusion: str) -> None:
    """Fixed in 01053d4 (statistics were over the stored entries only, off by up to 0.77)."""
    torch.manual_seed(0)
    assert_matches_pytorch(nn.LayerNorm(8).double().eval(), {"input": _csr_half()}, None, fusion)


# ----------------------------------------------------------------------------- masked softmax
class MaskedSoftmax(nn.Module):
    def forward(self, x, m):
        return torch.softmax(x.masked_fill(~m, float("-inf")), dim=-1)


_SCORES = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 0.5]], dtype=torch.float64)
_KEEP = torch.tensor([[True, True, False], [True, False, True]])


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("layout", ["csr", "coo", "annotated_csr"])
def test_masked_softmax_of_sparse_scores_counts_implicit_zeros_inside_the_mask(layout: str, fusion: str) -> None:
    x = {"csr": _SCORES.to_sparse_csr(), "coo": _SCORES.to_sparse_coo(), "annotated_csr": _SCORES}[layout]
    fmts = {"m": "csr", **({"x": "csr"} if layout == "annotated_csr" else {})}
    assert_matches_pytorch(MaskedSoftmax(), {"x": x, "m": _KEEP}, fmts, fusion)


class MaskedSoftmaxOfScaledTranspose(nn.Module):
    def forward(self, x, m):
        return torch.softmax((x * 2).T.masked_fill(~m, float("-inf")), dim=-1)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_masked_softmax_of_a_computed_transposed_score_counts_its_zeros(fusion: str) -> None:
    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 0.5], [0.3, 0.0, 0.0]], dtype=torch.float64)
    m = torch.tensor([[True, True, False], [True, False, True], [True, True, True]])
    assert_matches_pytorch(MaskedSoftmaxOfScaledTranspose(), {"x": x, "m": m}, {"m": "csr"}, fusion)


def test_masked_softmax_of_dense_scores_matches() -> None:
    """The control: the same scores dense (only the mask sparse) are right."""
    assert_matches_pytorch(MaskedSoftmax(), {"x": _SCORES, "m": _KEEP}, {"m": "csr"}, "partial")


# ----------------------------------------------------------------------------- 0-d values
class Expr(nn.Module):
    """A module of two inputs ``x``, ``y`` computing ``fn(x, y)`` in its own forward."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x, y):
        return self.fn(x, y)


ZERO_D = {
    "scale_of_full_sum": lambda x, v: x.sum() * 2,
    "shift_of_full_sum": lambda x, v: x.sum() + 1,
    "sigmoid_of_full_sum": lambda x, v: torch.sigmoid(x.sum()),
    "vector_minus_its_mean": lambda x, v: v - v.mean(),
    "vector_over_keepdim_sum": lambda x, v: v / (v.sum(-1, keepdim=True) + 1.0),
    "vector_times_full_sum": lambda x, v: v * v.sum(),
}


@pytest.mark.parametrize(("expr", "fusion"), [(e, f) for e in sorted(ZERO_D) for f in FUSIONS
                                               if (e, f) != ("vector_times_full_sum", "unfused")])
def test_scale_of_a_full_sum_compiles(expr: str, fusion: str) -> None:
    """Fixed (B3): a 0-d value read by a later statement (emit.py prev_row ValueError, table.py
    _place_child_cells IndexError before)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64)
    v = torch.randn(3, generator=g, dtype=torch.float64)
    assert_matches_pytorch(Expr(ZERO_D[expr]), {"x": x, "y": v}, None, fusion)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_program_scale_of_a_0d_sum(fusion: str) -> None:
    """The same bug at the program level: ``S = Σ_ij A_ij; Y = 2·S`` (fixed, B3)."""
    p = Program("zero_d")
    a = p.tensor("A", (4, 3), "dense")
    s = p.let("S", einsum("ij->", a))
    p.output(p.let("Y", s * 2.0))
    data = {"A": np.arange(12.0).reshape(4, 3)}
    res = run_program(compile_prog(p, fusion), data, simulate=run_graph, numerics="float")
    assert float(res.dense("Y")) == 2 * 66.0


# ----------------------------------------------------------------------------- regions
class LinearThen(nn.Module):
    """A linear submodule on ``relu(x)``, then ``head`` of its result in the root forward."""

    def __init__(self, head) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 3)
        self.head = head

    def forward(self, x):
        return self.head(self.lin(torch.relu(x)))


ROOT_HEADS = {
    "layer_norm": lambda h: F.layer_norm(h, (3,)),
    # B4 with the other tuple-valued ops: the getitem of max.dim / min.dim in the root forward
    "max_min_dim": lambda h: h - h.max(dim=-1, keepdim=True).values + h.min(dim=-1, keepdim=True)[0],
}


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("head", sorted(ROOT_HEADS))
def test_root_op_after_a_submodule_joins_its_region(head: str, fusion: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 6, dtype=torch.float64)
    assert_matches_pytorch(LinearThen(ROOT_HEADS[head]).double().eval(), {"x": x}, None, fusion)


# ----------------------------------------------------------------------------- COO
class SelectRowOfReluMatmul(nn.Module):
    def forward(self, x, w):
        return torch.relu(x @ w)[1]


@pytest.mark.parametrize("fusion", ["partial", "full"])
@pytest.mark.parametrize("layout", ["coo", "annotated_coo"])
def test_select_row_of_relu_of_coo_matmul_fused(layout: str, fusion: str) -> None:
    """Fixed (B5, with P5): relu(Σ_k x_ik w_kj) with x COO, then Σ_i t_ij·onehot_i (a row select)
    summed every row: the factored intermediate was nested under a row ordered after its index."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, generator=g, dtype=torch.float64)
    w = torch.randn(4, 3, generator=g, dtype=torch.float64)
    ins = {"x": x.to_sparse_coo() if layout == "coo" else x, "w": w}
    assert_matches_pytorch(SelectRowOfReluMatmul(), ins, {"x": "coo"} if layout != "coo" else None, fusion)


def test_select_row_of_relu_of_coo_matmul_unfused() -> None:
    """The control: unfused it is right."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, generator=g, dtype=torch.float64)
    w = torch.randn(4, 3, generator=g, dtype=torch.float64)
    assert_matches_pytorch(SelectRowOfReluMatmul(), {"x": x.to_sparse_coo(), "w": w}, None, "unfused")


# ----------------------------------------------------------------------------- par
def _sddmm_then_total() -> Program:
    """``T = M ⊙ (B·Cᵀ)`` (M CSR), ``Y = Σ_ij T``, one region."""
    p = Program("sddmm_total")
    m = p.tensor("M", (3, 4), "csr")
    b = p.tensor("B", (3, 2), "dense")
    c = p.tensor("C", (4, 2), "dense")
    t = p.let("T", einsum("ij,ik,jk->ij", m, b, c))
    y = p.let("Y", einsum("ij->", t))
    p.region(t, y)
    p.output(y)
    return p


def test_par_over_the_reduced_index_of_a_fused_total_sum() -> None:
    """Fixed (P1): the lanes' partial spacc1 sums feed the combining union, whose coordinates
    are discarded like the accumulator's were (a dangling comb crd, lane crds both discarded
    and connected before)."""
    rng = np.random.default_rng(0)
    data = {"M": (rng.random((3, 4)) < 0.6) * 1.0, "B": rng.standard_normal((3, 2)),
            "C": rng.standard_normal((4, 2))}
    res = run_program(compile_prog(_sddmm_then_total(), "full", par={"j": 2}), data, simulate=run_graph,
                      numerics="float")
    want = np.einsum("ij,ik,jk->", data["M"], data["B"], data["C"])
    assert abs(float(res.dense("Y")) - want) <= 1e-9 * max(1.0, abs(want))


def _transpose_colsum_min() -> Program:
    p = Program("colsum_min")
    a = p.tensor("A", (4, 1), "dcsr")
    b = p.tensor("B", (4,), "compressed")
    t0 = p.let("T0", einsum("ji->ij", a))
    t1 = p.let("T1", einsum("ij->j", t0))
    t2 = p.let("T2", fc_minimum(t1, b))
    p.output(t1, t2)
    return p


def test_par_and_block_on_the_same_index() -> None:
    """Fixed (P2): par's combining union / adder tree takes the vector lanes of the partial
    spacc1 values (it took those of the edge it was built for, the coordinates: 1 lane)."""
    rng = np.random.default_rng(0)
    data = {"A": np.zeros((4, 1)), "B": rng.standard_normal(4)}
    res = run_program(compile_prog(_transpose_colsum_min(), "unfused", par={"j": 2}, block={"j": 2}), data,
                      simulate=run_graph, numerics="float")
    np.testing.assert_allclose(res.dense("T2"), np.minimum(0.0, data["B"]), atol=1e-12)


# ----------------------------------------------------------------------------- block
def _run_prog(p: Program, data: dict, **options):
    return run_program(compile_prog(p, **options), data, simulate=run_graph, numerics="float")


@pytest.mark.parametrize("fusion", ["unfused", "full"])
def test_block_of_an_outer_product_spmm(fusion: str) -> None:
    """Fixed (P3): spacc2 has no vector form, so blocking an output index of the order-2
    accumulator (A CSC: k -> i -> j) is refused naming the reduction (a GraphError 'unknown
    parameter lanes' before); blocking k, the reduced index, works."""
    p = Program("outer_spmm")
    a = p.tensor("A", (2, 2), "csc")
    b = p.tensor("B", (2, 4), "dense")
    p.output(p.let("T", einsum("ik,kj->ij", a, b)))
    data = {"A": np.array([[1.0, 0.0], [2.0, 3.0]]), "B": np.array([[1.0, 0.0, 3.0, 0.0], [0.0, 1.0, 2.0, 0.0]])}
    with pytest.raises(LoweringError, match=r"reduction over u0 .*spacc2.*no vector form"):
        compile_prog(p, fusion, block={"j": 2})
    np.testing.assert_allclose(_run_prog(p, data, fusion=fusion, block={"k": 2}).dense("T"),
                               data["A"] @ data["B"], atol=1e-12)


def _np_softmax_stored(a: np.ndarray) -> np.ndarray:
    """Softmax along rows over the stored (nonzero) entries; a row with none is 0 (docs)."""
    z = np.where(a != 0, a, -np.inf)
    m = np.max(z, 1, keepdims=True)
    e = np.where(a != 0, np.exp(z - np.where(np.isfinite(m), m, 0.0)), 0.0)
    s = e.sum(1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def test_softmax_of_csr_rows_with_the_row_index_blocked() -> None:
    """Fixed (P4): a block of a CSR matrix blocked along i is stored wherever one of its rows has
    an entry, so the lanes cannot tell their own coordinates from the block's (the masked
    softmax visited the other rows' explicit zeros, off by 0.53): refused, naming the tensor;
    with A dense, blocking i is right."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 3))
    a[rng.random((4, 3)) > 0.3] = 0.0
    a[3] = 0.0
    for fmt in ("csr", "dense"):
        p = Program("softmax_blocked_rows")
        p.output(p.let("T", fc_softmax(p.tensor("A", (4, 3), fmt))))
        if fmt == "csr":
            with pytest.raises(LoweringError, match="softmax along j .* A is blocked"):
                compile_prog(p, "partial", block={"i": 2})
            continue
        want = _np_softmax_stored(np.where(a != 0, a, 1e-300))  # dense: every coordinate visited
        np.testing.assert_allclose(_run_prog(p, {"A": a}, fusion="partial", block={"i": 2}).dense("T"),
                                   want, atol=1e-12)


# ----------------------------------------------------------------------------- fused masked attention
@pytest.mark.parametrize("fusion", ["unfused", "partial", "full"])
def test_fused_attention_with_a_coo_mask_and_a_sparse_output_factor(fusion: str) -> None:
    """Fixed (P5, full fusion off by 0.2): S was nested under the row index i, driven by the COO
    mask's non-unique level, so the index summing M's duplicates (above i in the POG) ran below
    it and each row's softmax saw one entry at a time; a nested table whose rows would break a
    POG edge is refused now (the region is split there)."""
    rng = np.random.default_rng(1)
    m = (rng.random((3, 4)) < 0.7) * 1.0
    m[0, 0] = 1.0
    data = {"M": m, "B": rng.standard_normal((3, 1)), "C": np.zeros((4, 1)), "D": rng.standard_normal((4, 1)),
            "E": rng.standard_normal((3, 1))}
    p = Program("coo_attention")
    mt = p.tensor("M", (3, 4), "coo")
    b, c, d = (p.tensor(n, s, "dense") for n, s in (("B", (3, 1)), ("C", (4, 1)), ("D", (4, 1))))
    e = p.tensor("E", (3, 1), "csr")
    s = p.let("S", einsum("ij,ik,jk->ij", mt, b, c))
    pr = p.let("P", fc_softmax(s))
    o = p.let("O", einsum("ij,jk->ik", pr, d))
    p.output(p.let("Y", o * e))
    probs = _np_softmax_stored(np.where(m != 0, 1e-300 + np.einsum("ik,jk->ij", data["B"], data["C"]), 0.0))
    want = (probs @ data["D"]) * data["E"]
    np.testing.assert_allclose(_run_prog(p, data, fusion=fusion).dense("Y"), want, atol=1e-9)


# ----------------------------------------------------------------------------- par: empty product rows
def test_par_of_a_shifted_spmm_with_an_empty_product() -> None:
    """Fixed (P6): the crd_drop of T0's empty rows ran in the lanes, so a lane gave the
    serializer fewer i coordinates than sel dealt (ProtocolError); it runs after the merge."""
    p = Program("shifted_spmm")
    a = p.tensor("A", (4, 2), "dcsr")
    b = p.tensor("B", (2, 2), "csc")
    t0 = p.let("T0", einsum("ik,kj->ij", a, b))
    p.output(p.let("T1", t0 + 2.0))
    data = {"A": np.array([[0.0, 1.0], [0.0, 0.0], [2.0, 0.0], [0.0, 0.0]]), "B": np.zeros((2, 2))}
    np.testing.assert_allclose(_run_prog(p, data, fusion="partial", par={"i": 2}).dense("T1"),
                               np.full((4, 2), 2.0), atol=1e-12)


# ----------------------------------------------------------------------------- softmax of nothing
def test_fused_softmax_of_an_empty_reduction_is_zero() -> None:
    """Fixed (P7): the reduction under the softmax emitted a 0 for its empty fibre (reduce), which
    the softmax visited (1 instead of 0); it emits only the coordinates some term reaches now."""
    p = Program("softmax_of_nothing")
    a = p.tensor("A", (1, 1), "csc")
    b = p.tensor("B", (1, 1), "csr")
    c = p.tensor("C", (1,), "compressed")
    t0 = p.let("T0", einsum("ij,ij->ij", a, b))
    t1 = p.let("T1", einsum("ij,j->i", t0, c))
    t2 = p.let("T2", fc_softmax(t1))
    p.output(t2, p.let("T3", fc_relu(t2)))
    data = {"A": np.array([[0.7]]), "B": np.array([[1.2]]), "C": np.zeros(1)}
    assert _run_prog(p, data, fusion="full").dense("T2").tolist() == [0.0]


# ----------------------------------------------------------------------------- softmax of a product
@pytest.mark.parametrize("fusion", FUSIONS)
def test_softmax_of_a_product_skips_the_coordinates_no_k_reaches(fusion: str) -> None:
    """P8 (program fuzzer seed 757): softmax(A·B), A CSR, B CSC.  The product visits (i, j) where
    some k has A_ik and B_kj stored (docs/compiler.md); the reduction emitted a 0 for every (i, j)
    (a reduce per fibre), so the masked softmax normalised over coordinates no k reaches (0.473
    where 0 is right).  Also through a materialised T0 (unfused) and with an empty row."""
    a = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    b = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    c = np.array([[2.0, -1.0], [0.5, 3.0], [1.0, 1.0], [4.0, 2.0]])
    p = Program("softmax_of_spmm")
    t0 = p.let("T0", einsum("ik,kj->ij", p.tensor("A", (4, 3), "csr"), p.tensor("B", (3, 2), "csc")))
    t1 = p.let("T1", fc_softmax(t0))
    p.output(p.let("T2", t1 / p.tensor("C", (4, 2), "dense")))
    got = _run_prog(p, {"A": a, "B": b, "C": c}, fusion=fusion).dense("T2")
    reached = (a != 0).astype(float) @ (b != 0).astype(float) > 0
    t = a @ b
    probs = _np_softmax_stored(np.where(reached, np.where(t != 0, t, 1e-300), 0.0))
    assert not reached[1, 0] and probs[1, 0] == 0.0
    np.testing.assert_allclose(got, probs / c, atol=1e-12)


# ----------------------------------------------------------------------------- third pass (issue 32)
def _np_layernorm(x: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)


def _np_softmax_all(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_softmax_after_a_layernorm_of_a_product_with_empty_rows(fusion: str) -> None:
    """Q3 (program fuzzer seed 4073): layernorm visits every coordinate (docs/compiler.md), so a
    softmax after it normalises over every coordinate, also of a row where the product A·B
    (A, B DCSR) stores nothing.  The layernorm's iteration was densified along j only, so such a
    row was never visited: the softmax gave 0 there instead of 1/3 (1.5 instead of 1.8333 after
    the shift)."""
    a = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 2.0, -1.0]])
    b = np.array([[0.0, 1.5, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    p = Program("softmax_after_layernorm")
    t0 = p.let("T0", einsum("ik,kj->ij", p.tensor("A", (4, 3), "dcsr"), p.tensor("B", (3, 3), "dcsr")))
    t1 = p.let("T1", layernorm(t0, 1e-3))
    t2 = p.let("T2", fc_softmax(t1))
    p.output(p.let("T3", t2 + 1.5))
    got = _run_prog(p, {"A": a, "B": b}, fusion=fusion).dense("T3")
    want = _np_softmax_all(_np_layernorm(a @ b, 1e-3)) + 1.5
    np.testing.assert_allclose(got, want, atol=1e-9)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_softmax_after_a_layernorm_of_an_all_zero_product(fusion: str) -> None:
    """Q1 (program fuzzer seed 2815): A⊙B with A all zero stores nothing; softmax of it is 0
    (masked), the layernorm after it is 0 at every coordinate and visits all of them, so the
    softmax after the layernorm is 1/|row| (was 0: no row was visited)."""
    a = np.zeros((4, 2))
    b = np.array([[-1.9, 0.0], [2.4, 1.0], [0.0, 0.0], [0.0, 0.3]])
    p = Program("softmax_layernorm_softmax")
    t0 = p.let("T0", p.tensor("A", (4, 2), "dcsr") * p.tensor("B", (4, 2), "coo"))
    t1 = p.let("T1", fc_softmax(t0))
    t2 = p.let("T2", layernorm(t1, 1e-5))
    t3 = p.let("T3", fc_softmax(t2))
    p.output(t2, t3)
    res = _run_prog(p, {"A": a, "B": b}, fusion=fusion)
    t1_want = np.zeros((4, 2))  # masked softmax of nothing stored (docs/compiler.md)
    np.testing.assert_allclose(res.dense("T2"), _np_layernorm(t1_want, 1e-5), atol=1e-9)
    np.testing.assert_allclose(res.dense("T3"), _np_softmax_all(_np_layernorm(t1_want, 1e-5)), atol=1e-9)


def test_softmax_of_a_product_blocked_along_the_reduced_index_is_refused() -> None:
    """Q2 (program fuzzer seed 3986): softmax(A·B) with A, B CSR and k blocked: a block of A or B
    is stored wherever one of its lanes has an entry, so the blocked reduction reaches (i, j)
    that no k reaches in A·B (A_00 · B_02 is an explicit zero of both blocks) and the masked
    softmax counted them (0.714 where 1.0 is right).  Refused, naming the blocked tensor; the
    unblocked schedule computes the documented value."""
    a = np.array([[1.45, 0.0], [0.33, -0.79]])
    b = np.array([[0.0, 0.63, 0.0, 0.0], [0.0, 0.0, -0.39, 0.0]])
    p = Program("blocked_softmax_of_spmm")
    t0 = p.let("T0", einsum("ik,kj->ij", p.tensor("A", (2, 2), "csr"), p.tensor("B", (2, 4), "csr")))
    t1 = p.let("T1", fc_softmax(t0))
    p.output(t1, p.let("T2", t1 * -0.5))
    data = {"A": a, "B": b}
    for fusion in FUSIONS:
        with pytest.raises(Exception, match=r"softmax runs over the coordinates .* is blocked"):
            compile_prog(p, fusion=fusion, block={"k": 2})
    with pytest.raises(Exception, match=r"softmax runs over the coordinates .* is blocked"):
        compile_prog(p, fusion="unfused", par={"i": 2}, block={"k": 2})
    reached = (a != 0).astype(float) @ (b != 0).astype(float) > 0
    t = a @ b
    want = _np_softmax_stored(np.where(reached, np.where(t != 0, t, 1e-300), 0.0))
    assert want[0, 1] == 1.0
    np.testing.assert_allclose(_run_prog(p, data, fusion="unfused").dense("T1"), want, atol=1e-12)


class FillThenGram(nn.Module):
    """Module fuzzer seed 1055, shrunk: h = masked softmax, filled along j, then h · hᵀ."""

    def forward(self, x, m0, m1):
        h2 = F.softmax(torch.where(m0, x, float("-inf")), dim=-1)
        h3 = h2.masked_fill(m1, 1.5)
        return torch.einsum("ij,kj->ik", h3, h3)[:, 2]


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("fill", [[True, True, True, True], [True, False, True, False]])
def test_a_view_read_by_both_factors_of_a_fused_product(fusion: str, fill: list) -> None:
    """M1 (module fuzzer seed 1055): h3 = where(m1, 1.5, softmax) is 1.5 + (1 - m1)·softmax, so
    h3 · h3ᵀ fuses to Σ_j (s_j + n_j·p_ij)(s_j + n_j·p_kj) with s = 1.5·m1 and n = 1 - m1 read by
    both factors.  A table has one column per view, so the join at j merged the second factor's
    s and n into the first's: Union(s, n ∩ p) ∩ p' instead of Union(s, n ∩ p) ∩ Union(s, n ∩ p'),
    dropping every j where p_kj is not stored (4.5 where PyTorch gives 9.0).  Such a merge is
    refused now (the planner splits the graph there)."""
    x = torch.tensor([[0.0, 1.0, 0.0, -0.5], [0.3, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0],
                      [2.0, -1.0, 0.5, 0.0], [0.0, 0.0, 1.0, 1.0]], dtype=torch.float64)
    m0 = torch.tensor([[True, True, False, False], [False, True, False, True], [True, False, False, False],
                       [True, True, True, True], [False, False, True, False]])
    inputs = {"x": x.to_sparse_csr(), "m0": m0, "m1": torch.tensor(fill)}
    assert_matches_pytorch(FillThenGram(), inputs, {"m0": "csr"}, fusion)


class EmptyBroadcastProduct(nn.Module):
    """Module fuzzer seed 1613, shrunk: a product that is all zeros, given a middle dimension of
    one, then multiplied again."""

    def forward(self, x, w0, w1):
        return torch.einsum("bij,jk->bik", (x @ w0).unsqueeze(1), w1)


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("rows", [[0.0, 0.0, 0.0], [0.0, 1.5, -2.0]])
def test_an_empty_product_broadcast_along_a_middle_dimension(fusion: str, rows: list) -> None:
    """Module fuzzer seed 1613: the broadcast's output took the levels (compressed, dense,
    compressed), and with the product empty the innermost writer closed one fiber at the stop of
    the empty outer fiber (no position of the dense level between), so the next graph refused its
    input ('seg has 2 entries, expected 1').  A dense level between compressed levels is
    compressed now (undeclared formats) or refused (declared ones, next test)."""
    x = torch.tensor([rows], dtype=torch.float64).to_sparse_coo()
    w0 = torch.arange(6, dtype=torch.float64).reshape(3, 2) - 2.5
    w1 = torch.tensor([[1.0, 0.0, -2.0], [0.5, 3.0, 0.0]], dtype=torch.float64)
    assert_matches_pytorch(EmptyBroadcastProduct(), {"x": x, "w0": w0, "w1": w1}, None, fusion)


def test_a_declared_dense_level_between_compressed_levels_is_refused() -> None:
    """The declared-format side of seed 1613: the writers could not count the fibers of the level
    below an empty one, so the compiler refuses and names the level."""
    p = Program("hidden_dense")
    a = p.tensor("A", (2, 3), "csr")
    ones = p.tensor("O", (2,), "dense")
    p.output(p.let("T", einsum("ac,b->abc", a, ones), fmt=["compressed", "dense", "compressed"]))
    with pytest.raises(LoweringError, match=r"output T: level 1 \(index b\) is declared dense between compressed"):
        compile_prog(p, fusion="unfused")


class GeluOfVarianceSquared(nn.Module):
    """Module fuzzer seed 1409 (a timeout: the partial compile ran for minutes)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin0 = nn.Linear(4, 3).double()

    def forward(self, x, y0, y1):
        h2 = torch.var(torch.cat([x, y0], dim=1) / y1, -1, unbiased=True, keepdim=False)
        h3 = F.gelu(h2, approximate="tanh")
        return self.lin0((h3 * h3 + 1.0) ** 0.5)


def test_the_factoring_search_of_a_deep_nonlinear_chain_is_bounded(monkeypatch) -> None:
    """Seed 1409: gelu(tanh) reads the variance several times and the square reads the gelu
    twice, so the factoring search tried every nest of every copy: about 11,000 tables and
    100 s for one compile.  Candidates are now one per intermediate, and past
    ``NEST_BUDGET`` tables no new nest is tried (the intermediate is inlined, a region split
    realises it).  Counted in tables built, not seconds; the values still equal PyTorch."""
    from fuseflow.compiler import table as table_mod

    built = [0]  # the most tables one search built
    real = table_mod._build_table

    def counting(group, out, factored, nest, memo):
        built[0] = max(built[0], memo.get(table_mod._BUILDS, 0))
        return real(group, out, factored, nest, memo)

    monkeypatch.setattr(table_mod, "_build_table", counting)
    torch.manual_seed(1409)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 4, generator=g, dtype=torch.float64)
    x[torch.rand(4, 4, generator=g) < 0.5] = 0.0
    inputs = {"x": x.to_sparse_coo(), "y0": torch.randn(4, 1, generator=g, dtype=torch.float64),
              "y1": torch.rand(5, generator=g, dtype=torch.float64) + 0.5}
    assert_matches_pytorch(GeluOfVarianceSquared().eval(), inputs, None, "partial")
    assert built[0] < table_mod.NEST_BUDGET + 200, built[0]


class ShiftThenLinear(nn.Module):
    """Module fuzzer seed 2368, shrunk: a scalar shift of a CSC input, then a Linear."""

    def __init__(self, chain: str) -> None:
        super().__init__()
        self.chain = chain
        self.lin0 = nn.Linear(6, 2).double()

    def forward(self, x):
        h = torch.add(x, 0.25)
        if self.chain == "gelu":
            h = F.relu(torch.rsqrt(F.gelu(h + 1.5, approximate="tanh") ** 2 + 1.0))
        return self.lin0(h)


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("chain", ["shift", "gelu"])
def test_a_shifted_csc_input_read_row_major(fusion: str, chain: str) -> None:
    """Module fuzzer seed 2368: ``x + 0.25`` of a CSC input is densified along the row index
    only (the column level is dense), but the Linear's row-major order made the compiler read x
    from a permuted CSR copy, whose compressed column level left out every shifted implicit
    zero (off by 0.18, every fusion).  In a densified group a permuted copy now keeps its
    levels dense down to the indices the densifier counted on."""
    x = torch.tensor([[1.3889, 0.0, 0.0, 0.0, 0.0, 0.0],
                      [-0.2881, 0.0, 0.0, 1.7684, 0.0, -0.8499]], dtype=torch.float64)
    torch.manual_seed(0)
    assert_matches_pytorch(ShiftThenLinear(chain).eval(), {"x": x.to_sparse_csc()}, None, fusion)


class CenteredCat(nn.Module):
    """Module fuzzer seed 2545: a masked input centred on its mean, then a concatenation that
    reads the centred value twice."""

    def forward(self, x, m0):
        h1 = torch.where(m0, x, 0.0)
        h1 = h1 - h1.mean(-1, keepdim=True)
        return torch.cat([F.leaky_relu(h1, 0.01), h1], dim=0)


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("zero", [True, False])
def test_a_split_run_hands_its_intermediates_to_the_later_parts(fusion: str, zero: bool) -> None:
    """Module fuzzer seed 2545: the run did not compile whole, so the planner split it, but each
    part wrote only what the caller needed after the whole run, not what a later part of the
    split reads (KeyError 't5_sub')."""
    g = torch.Generator().manual_seed(3)
    x = torch.zeros(3, 8, 2, dtype=torch.float64) if zero else torch.randn(3, 8, 2, generator=g, dtype=torch.float64)
    if not zero:
        x[torch.rand(3, 8, 2, generator=g) < 0.6] = 0.0
    inputs = {"x": x.to_sparse_coo(), "m0": torch.tensor([False, True])}
    assert_matches_pytorch(CenteredCat(), inputs, None, fusion)


class UnusedGelu(nn.Module):
    """A value computed and never used (found shrinking seed 2368)."""

    def forward(self, x):
        h1 = torch.add(x, 0.25) - -1.5
        h2 = F.gelu(h1, approximate="tanh")
        torch.rsqrt(h2 * h2 + 1.0)
        return h1


@pytest.mark.parametrize("fusion", FUSIONS)
def test_a_value_no_output_reads_is_dropped(fusion: str) -> None:
    """The capture kept the gelu's decomposition of an unused value, and its graph had no
    writer ('nothing defines when it is done'); nodes that reach no output are dropped now."""
    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, -3.0]], dtype=torch.float64)
    assert_matches_pytorch(UnusedGelu(), {"x": x.to_sparse_csr()}, None, fusion)


class SigmoidGelu(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) + F.gelu(x, approximate="tanh")


@pytest.mark.parametrize("fusion", FUSIONS)
def test_sigmoid_and_gelu_of_large_negative_values(fusion: str) -> None:
    """Module fuzzer seed 4722: the float sigmoid computed 1 / (1 + exp(-x)), and exp(-x)
    overflowed (OverflowError: math range error) below x = -709; PyTorch gives 0.  Both the
    sigmoid and the gelu built on it now take the stable form."""
    x = torch.tensor([[-800.0, 0.0, 3.0], [0.0, -1000.0, 750.0]], dtype=torch.float64)
    assert_matches_pytorch(SigmoidGelu(), {"x": x.to_sparse_csr()}, None, fusion)


class StdOfOneRow(nn.Module):
    def forward(self, x):
        return x.std(1, keepdim=True, correction=0)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_more_lanes_than_coordinates_is_refused_where_a_join_drives_the_index(fusion: str) -> None:
    """Module fuzzer seed 4970: ``par i=2`` on a one-row input; where a join (not a scanner)
    drives i, the lane check could not find the index's size and let it through, and the
    empty lane's reducer broke the serializer's protocol (ProtocolError).  Refused now, naming
    the index and its size, as it was where a scanner drives the index."""
    x = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    ir = trace(StdOfOneRow(), {"x": x}, None)
    with pytest.raises(Exception, match=r"par i=2: index 'i' has only 1 coordinates"):
        compile_model(ir, fusion, par={"i": 2})
    assert_matches_pytorch(StdOfOneRow(), {"x": x}, None, fusion)


class GeluLinearMm(nn.Module):
    """Module fuzzer seed 3823."""

    def __init__(self) -> None:
        super().__init__()
        self.lin0 = nn.Linear(1, 1).double()

    def forward(self, x, w0, y0):
        h2 = self.lin0(F.gelu(x, approximate="tanh") / -0.5)
        return torch.tanh(torch.mm(w0, h2)) - y0


def test_two_permuted_copies_of_one_tensor_with_different_levels() -> None:
    """Module fuzzer seed 3823: the gelu's cube x·x·x reads the CSC input x row-major from a
    CSR copy, and the densified sigmoid term from a dense copy (the fix of seed 2368); both
    copies were named x_p01, so one graph got the other's data ('data format [d,d] !=
    declared [d,c]').  A copy with its own levels has its own name now."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(8, 1, generator=g, dtype=torch.float64)
    x[torch.rand(8, 1, generator=g) < 0.3] = 0.0
    inputs = {"x": x.to_sparse_csc(), "w0": torch.randn(8, 8, generator=g, dtype=torch.float64),
              "y0": torch.randn(8, 1, generator=g, dtype=torch.float64)}
    torch.manual_seed(0)
    assert_matches_pytorch(GeluLinearMm().eval(), inputs, None, "unfused")


class _SoftmaxChain(nn.Module):
    """Fuzz seed 346: softmax, sigmoid, a row-normalised division, a masked softmax, one row."""

    def forward(self, x, m0):
        h1 = torch.sigmoid(x.softmax(-1))
        h2 = torch.div(h1, (h1 * h1).sum(-1, keepdim=True) + 1.0)
        return F.softmax(torch.where(m0, h2, float("-inf")), dim=-1).select(0, 3)


def test_par_over_an_index_one_graph_iterates_and_another_reduces() -> None:
    """Fixed: ``par b=3`` on a fused graph that iterates ``b`` and reduces a ``b`` of another
    statement (as a fresh ``u0``) was refused as "no graph iterates index 'b' (the graphs
    iterate b, u0)"; the graph's own ``b`` takes the lanes, and the values are PyTorch's."""
    g = torch.Generator().manual_seed(346)
    x = torch.randn(4, 8, generator=g, dtype=torch.float64)
    m0 = torch.rand(4, 8, generator=g) < 0.3
    m0[3, 0] = True  # the selected row keeps an entry
    assert_matches_pytorch(_SoftmaxChain(), {"x": x, "m0": m0.to_sparse_csr()}, {"m0": "csr"}, "full",
                           par={"b": 3})
