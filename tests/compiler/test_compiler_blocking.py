"""The ``block`` pass (sparsity blocking with vector lanes): block-pruned SpMM and BigBird
attention compile to graphs of vector loads, lanewise ALUs and lane reductions; values equal
numpy (computed here on the unblocked arrays), cycles fall with the block size, the blocked
dimension is followed through every statement, and bad requests are errors naming the index."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from fuseflow.compiler import (
    Fusion,
    Program,
    ProgramError,
    compile_program,
    einsum,
    run_program,
    softmax,
)
from fuseflow.compiler.passes.block import dimension_of
from fuseflow.models.datasets import bigbird_mask
from fuseflow.ir.samml import NodeKind
from fuseflow.schedule import ScheduleError, parse_block, schedule_from_dict
from sw_sim import run_graph

RNG = np.random.default_rng(21)


def spmm(n: int = 32, k: int = 32, m: int = 8) -> Program:
    p = Program("block_pruned_spmm")
    A = p.tensor("A", (n, k), "csr")
    X = p.tensor("X", (k, m), "dense")
    p.output(p.let("Y", einsum("ik,kj->ij", A, X)))
    return p


def block_pruned(n: int, k: int, b: int, density: float) -> np.ndarray:
    """A weight matrix with whole b-wide column blocks pruned per row (zeros inside kept
    blocks too)."""
    keep = np.repeat(RNG.random((n, k // b)) < density, b, axis=1)
    a = RNG.integers(-4, 5, (n, k)) * keep
    a[0] = 0  # an empty row
    return a


def _example(name: str):
    path = Path(__file__).resolve().parents[2] / "examples" / "programs" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def attention(seq: int = 32, head: int = 8) -> Program:
    """The BigBird attention core (S = M ∘ Q·Kᵀ, O = S·V) of examples/programs."""
    return _example("bigbird_attention").program(seq, head)


def attention_data(seq: int = 32, head: int = 8, block: int = 8) -> dict[str, np.ndarray]:
    return {"M": bigbird_mask(seq, block, seed=3).astype(np.int64),
            "Q": RNG.integers(-3, 4, (seq, head)), "K": RNG.integers(-3, 4, (seq, head)),
            "V": RNG.integers(-3, 4, (seq, head))}


def run(p: Program, data, fusion=Fusion.FULL, **kw):
    cp = compile_program(p, fusion, **kw)
    return cp, run_program(cp, data, simulate=run_graph)


def kinds(cp) -> dict[NodeKind, list]:
    out: dict[NodeKind, list] = {}
    for g in cp.graphs:
        for n in g.nodes.values():
            out.setdefault(n.kind, []).append(n)
    return out


@pytest.mark.parametrize(("block", "lanes"), [(2, None), (4, None), (8, None), (8, 4), (16, 4)])
def test_block_pruned_spmm_equals_numpy(block: int, lanes: int | None) -> None:
    a = block_pruned(32, 32, block, 0.3)
    x = RNG.integers(-3, 4, (32, 8))
    cp, res = run(spmm(), {"A": a, "X": x}, block={"k": block}, lanes=lanes)
    np.testing.assert_array_equal(res.dense("Y"), a @ x)
    w = lanes or block
    k = kinds(cp)
    assert all(n.param("lanes") == w for n in k[NodeKind.ARRAY_LOAD])
    assert [n.param("lanes") for n in k[NodeKind.LANE_REDUCE]] == [w]
    assert res.outputs["Y"].blocking is None  # Y lacks the blocked dimension: scalars


def test_block_pruned_spmm_cycles_fall_with_the_block() -> None:
    a = block_pruned(64, 64, 16, 0.25)
    x = RNG.integers(-3, 4, (64, 8))
    cycles = {}
    for b in (1, 4, 16):
        _, res = run(spmm(64, 64, 8), {"A": a, "X": x}, **({"block": {"k": b}} if b > 1 else {}))
        np.testing.assert_array_equal(res.dense("Y"), a @ x)
        cycles[b] = res.total_cycles
    assert cycles[1] > 2 * cycles[4] > 4 * cycles[16]


@pytest.mark.parametrize("fusion", [Fusion.FULL, Fusion.UNFUSED], ids=lambda f: f.value)
def test_bigbird_attention_blocked_equals_numpy(fusion) -> None:
    """Blocking the keys (j) blocks M's columns, K's and V's rows and S's columns; unfused, S is
    written as vectors by one graph and read as vectors by the next."""
    data = attention_data()
    cp, res = run(attention(), data, fusion, block={"j": 8})
    want = (data["M"] * (data["Q"] @ data["K"].T)) @ data["V"]
    np.testing.assert_array_equal(res.dense("O"), want)
    assert {t for t, d in cp.program.decls.items() if d.vector} == {"M", "K", "V", "S"}
    if fusion is Fusion.UNFUSED:
        [s_graph, _] = cp.graphs
        assert s_graph.tensors["S"].block is not None  # written blocked, as vectors


def test_blocked_attention_at_least_half_the_block_faster() -> None:
    data = attention_data(64, 16, 16)
    _, plain = run(attention(64, 16), data)
    _, blocked = run(attention(64, 16), data, block={"j": 16})
    np.testing.assert_array_equal(blocked.dense("O"), plain.dense("O"))
    assert plain.total_cycles >= 8 * blocked.total_cycles
    flops = [sum(c["flops_total"] for c in r.counters) for r in (plain, blocked)]
    assert flops[0] == flops[1]  # the same multiply-adds, W per vector op


def test_the_blocked_dimension_is_followed_through_statements() -> None:
    p = attention()
    modes = dimension_of(p, "j")
    assert modes == [("K", 0), ("M", 1), ("S", 1), ("V", 0)]
    assert dimension_of(p, "O:j") == dimension_of(p, "S:j")  # O's reduction reads S's columns


def test_blocking_errors_name_the_index() -> None:
    p = attention(24, 8)
    with pytest.raises(ProgramError, match="not a whole number of blocks of 16"):
        compile_program(p, block={"j": 16})
    with pytest.raises(ProgramError, match="one blocked dimension per program"):
        compile_program(attention(), block={"i": 4, "j": 4})
    with pytest.raises(ProgramError, match="no statement has an index 'z'"):
        compile_program(attention(), block={"z": 4})
    with pytest.raises(ProgramError, match="lanes 8 must divide the block size"):
        compile_program(attention(), block={"j": 4}, lanes=8)
    with pytest.raises(ProgramError, match="must be a power of two"):
        compile_program(attention(), block={"j": 3})
    q = Program("rowfn")
    M = q.tensor("M", (16, 16), "csr")
    q.output(q.let("P", softmax(M)))
    with pytest.raises(ProgramError, match="softmax runs along j, the blocked index"):
        compile_program(q, block={"j": 4})


def test_schedule_and_cli_options() -> None:
    s = schedule_from_dict({"block": {"j": 16}, "lanes": 8})
    assert dict(s.block) == {"j": 16} and s.lanes == 8
    assert s.to_json()["block"] == {"j": 16}
    assert parse_block(["j=16"]) == {"j": 16}
    for bad in (["j16"], ["j=12"], ["j=128"]):
        with pytest.raises(ScheduleError):
            parse_block(bad)
    with pytest.raises(ScheduleError, match="block.j = 3 must be a power of two"):
        schedule_from_dict({"block": {"j": 3}})


def test_compile_cli_block_run(tmp_path, capsys) -> None:
    from fuseflow_cli.cli import main

    example = Path(__file__).resolve().parents[2] / "examples" / "programs" / "bigbird_attention.py"
    assert main(["compile", str(example), "--block", "j=8", "--run", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "blocked: " in out and "vectors of 8 lanes" in out and ": PASS" in out
    assert main(["compile", str(example), "--lanes", "4"]) == 2
    assert "--lanes needs --block" in capsys.readouterr().err
