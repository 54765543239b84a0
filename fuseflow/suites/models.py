"""Model pieces for the sim-vs-RTL correlation report (``fuseflow-hw correlate --suite ml``).

Kernels of the paper's hardware validation, compiled with the FuseFlow compiler on integer
data (the RTL runs integer numerics, so the expected values are exact numpy results):

* one GCN layer ``(A + I)·X·W + b`` on KarateClub, unfused (one graph per kernel) and
  partially fused;
* one GraphSAGE layer ``A·X·W_n + X·W_s`` on KarateClub, unfused and partially fused;
* BigBird attention pieces at sequence 16, head size 8, block 4: the masked score SDDMM
  ``M ⊙ (Q·Kᵀ)`` and the sparse-probabilities times values ``P·V``.

No torch needed.  Each entry's ``make(simulate)`` returns ``(graph, data, expected)`` (every
input has a numpy value, so ``simulate`` is not used); ``expected`` is
the numpy value of the graph's output (``None`` only for compiler temporaries without a
statement of their own).  Graphs writing several outputs are left out (the report compares one
output per kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from fuseflow.compiler import Program, compile_program, einsum
from fuseflow.ir.simulator import Simulator

from .entry import Case, SuiteEntry
from fuseflow.ir.tensor import TensorData

from ..models.datasets import bigbird_mask, karate

__all__ = ["correlation_suite"]

# a program, its input arrays and the numpy value of every tensor it names
Built = tuple[Program, dict[str, np.ndarray], dict[str, np.ndarray]]


def _declare(p: Program, env: dict[str, np.ndarray], formats: dict[str, str]) -> list:
    """Declare the inputs named in ``formats`` (name -> format) with their shapes in ``env``."""
    return [p.tensor(name, env[name].shape, fmt) for name, fmt in formats.items()]


def _gcn_layer() -> Built:
    ds = karate()
    rng = np.random.default_rng(5)
    a = ds.adjacency.toarray() + np.eye(ds.num_nodes)  # 34 x 34: the suite's numpy reference
    x = ds.features
    w = rng.integers(-2, 3, size=(ds.num_features, 4)).astype(np.float64)
    b = rng.integers(-2, 3, size=4).astype(np.float64)
    p = Program("gcn_layer_karate")
    env = {"A": a, "X": x, "W": w, "b": b}
    A, X, W, B = _declare(p, env, {"A": "csr", "X": "csr", "W": "dense", "b": "dense"})
    T1 = p.let("T1", einsum("ik,kj->ij", A, X))
    T2 = p.let("T2", einsum("ij,jl->il", T1, W))
    Y = p.let("Y", T2 + B)
    p.region(T1, T2, Y)
    p.output(Y)
    env |= {"T1": a @ x}
    env |= {"T2": env["T1"] @ w}
    env |= {"Y": env["T2"] + b}
    return p, {k: env[k] for k in ("A", "X", "W", "b")}, env


def _sage_layer() -> Built:
    ds = karate(features=8, seed=3)
    rng = np.random.default_rng(6)
    a, x = ds.adjacency.toarray(), ds.features
    wn = rng.integers(-2, 3, size=(8, 4)).astype(np.float64)
    ws = rng.integers(-2, 3, size=(8, 4)).astype(np.float64)
    p = Program("sage_layer_karate")
    env = {"A": a, "X": x, "Wn": wn, "Ws": ws}
    A, X, Wn, Ws = _declare(p, env, {"A": "csr", "X": "dense", "Wn": "dense", "Ws": "dense"})
    T1 = p.let("T1", einsum("ik,kj->ij", A, X))
    T2 = p.let("T2", einsum("ij,jl->il", T1, Wn))
    T3 = p.let("T3", einsum("ij,jl->il", X, Ws))
    Y = p.let("Y", T2 + T3)
    p.region(T1, T2, T3, Y)
    p.output(Y)
    env |= {"T1": a @ x, "T3": x @ ws}
    env |= {"T2": env["T1"] @ wn}
    env |= {"Y": env["T2"] + env["T3"]}
    return p, {k: env[k] for k in ("A", "X", "Wn", "Ws")}, env


def _bigbird(piece: str) -> Built:
    seq, dh = 16, 8
    rng = np.random.default_rng(7)
    m = bigbird_mask(seq, 4, seed=1).astype(np.float64)
    q = rng.integers(-3, 4, size=(seq, dh)).astype(np.float64)
    k = rng.integers(-3, 4, size=(seq, dh)).astype(np.float64)
    v = rng.integers(-3, 4, size=(seq, dh)).astype(np.float64)
    if piece == "sddmm":
        p = Program("bigbird_scores")
        M = p.tensor("M", m.shape, "csr")
        Q = p.tensor("Q", q.shape, "dense")
        K = p.tensor("K", k.shape, "dense")
        S = p.let("S", einsum("ij,ik,jk->ij", M, Q, K))
        p.output(S)
        return p, {"M": m, "Q": q, "K": k}, {"M": m, "Q": q, "K": k, "S": m * (q @ k.T)}
    pm = m * rng.integers(1, 4, size=m.shape)
    p = Program("bigbird_pv")
    P = p.tensor("P", pm.shape, "csr")
    V = p.tensor("V", v.shape, "dense")
    O = p.let("O", einsum("ij,jd->id", P, V))
    p.output(O)
    return p, {"P": pm, "V": v}, {"P": pm, "V": v, "O": pm @ v}


def _entries(label: str, model: str, build: Callable[[], Built], fusions: tuple[str, ...]
             ) -> list[SuiteEntry]:
    out = []
    for fusion in fusions:
        cp = compile_program(build()[0], fusion)
        for gi, g in enumerate(cp.graphs):
            if len(set(g.tensors) - set(g.input_tensors())) != 1:
                continue  # the report compares one output per kernel
            out.append(SuiteEntry(f"{label}_{fusion}_{gi}_{g.name}", model,
                                  partial(_case, build, fusion, gi)))
    return out


def _case(build: Callable[[], Built], fusion: str, gi: int, simulate: Simulator) -> Case:
    """Graph ``gi`` of the compiled program with numpy inputs (``simulate`` is not needed)."""
    p, _, env = build()
    cp = compile_program(p, fusion)
    g = cp.graphs[gi]
    data = {}
    for t in g.input_tensors():
        if t not in env:
            raise ValueError(f"{g.name}: input {t!r} is a compiler temporary without a numpy value")
        data[t] = TensorData.from_dense(env[t].astype(np.int64), cp.formats[t])
    [out] = [n for n in g.tensors if n not in g.input_tensors()]
    exp = env.get(out)
    return g, data, None if exp is None else exp.astype(np.int64)


def correlation_suite() -> list[SuiteEntry]:
    """GCN / GraphSAGE layer kernels on KarateClub and BigBird attention pieces."""
    return (_entries("gcn1_karate", "gcn", _gcn_layer, ("unfused", "partial"))
            + _entries("sage1_karate", "graphsage", _sage_layer, ("unfused", "partial"))
            + _entries("bigbird_sddmm", "gpt3_bigbird", partial(_bigbird, "sddmm"), ("full",))
            + _entries("bigbird_pv", "gpt3_bigbird", partial(_bigbird, "pv"), ("full",)))
