"""The pass pipeline: its description, IR dumps after any pass, the unknown-pass error, FIFO
sizing run once per graph, and region splits decided up front by a check (no retries)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from compiler_programs import one_statement
from test_compiler_golden import REGEN, graphsage, split_sum, spmm

from fuseflow.compiler import (
    PIPELINE,
    FusionError,
    LoweringError,
    Options,
    Program,
    UnknownPass,
    check_program,
    compile_program,
    describe_pipeline,
    dump_ir,
    einsum,
    lower_group,
    pass_names,
    pipeline,
    reference,
    run_pipeline,
    run_program,
)
from fuseflow.compiler.fusion import fuse_group, plan_groups
from fuseflow.compiler.passes import fifo, lower
from fuseflow.models.frontend import MKind, MNode, ModelIR
from fuseflow.models.plan import HostOpStep, compile_model
from sw_sim import run_graph

GOLDEN = Path(__file__).parent / "golden"


def test_pipeline_order_and_ir_types_chain() -> None:
    assert pass_names() == ["block", "plan", "fuse", "table", "locate", "lower", "skip", "par",
                            "fifo", "verify"]
    assert PIPELINE[0].input_ir == PIPELINE[0].output_ir == PIPELINE[1].input_ir == "Program"
    assert PIPELINE[-1].output_ir == "samml.Graph"
    assert PIPELINE[1].output_ir == f"list[{PIPELINE[2].input_ir}]"  # one group plan per graph
    for a, b in itertools.pairwise(PIPELINE[2:]):
        assert a.output_ir == b.input_ir, (a.name, b.name)
    assert all(p.description and "\n" not in p.description for p in PIPELINE)


def test_describe_pipeline_lists_every_pass_in_order() -> None:
    text = describe_pipeline()
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["#", "pass"]
    for k, p in enumerate(PIPELINE, 1):
        row = lines[k]
        assert row.split()[:2] == [str(k), p.name]
        assert f"{p.input_ir} -> {p.output_ir}" in row and row.endswith(p.description)


def test_dump_after_calls_back_once_per_graph_with_the_pass_text() -> None:
    seen: list[tuple[str, str, str]] = []
    compiled = run_pipeline(split_sum(), dump_after="table", on_dump=lambda *a: seen.append(a))
    assert [(p, g) for p, g, _ in seen] == [("table", "split_sum_g0"), ("table", "split_sum_g1")]
    assert seen[1][2].startswith("fusion table for Y")
    assert len(compiled.graphs) == 2
    plan: list[tuple[str, str, str]] = []
    run_pipeline(spmm(), dump_after="plan", on_dump=lambda *a: plan.append(a))
    assert [(p, g) for p, g, _ in plan] == [("plan", "spmm")]


def test_dump_ir_is_the_golden_text_and_the_compiled_graph() -> None:
    text = dump_ir(spmm(), "fuse", Options(factored=False))
    assert text == (GOLDEN / "spmm.fuse.txt").read_text()
    assert text.startswith("== spmm_g0 after fuse\nfused einsum:\n  T_{i,j} = ")
    (graph,) = compile_program(spmm()).graphs
    assert dump_ir(spmm(), "verify").split("\n", 1)[1] == pipeline.graph_text(graph)


@pytest.mark.parametrize("call", [lambda: dump_ir(spmm(), "codegen"),
                                  lambda: run_pipeline(spmm(), dump_after="codegen")])
def test_unknown_pass_is_an_error_listing_the_passes(call) -> None:
    with pytest.raises(UnknownPass, match=r"unknown pass 'codegen'; the passes are block, plan, fuse, "
                                          r"table, locate, lower, skip, par, fifo, verify"):
        call()


def test_fifo_sizing_runs_once_per_graph(monkeypatch) -> None:
    calls: list[str] = []
    real = fifo.size_fifos
    monkeypatch.setattr(fifo, "size_fifos", lambda g: (calls.append(g.name), real(g)))
    compiled = compile_program(split_sum())
    assert calls == [g.name for g in compiled.graphs] == ["split_sum_g0", "split_sum_g1"]


def test_region_split_is_decided_up_front_and_nothing_is_generated_twice(monkeypatch) -> None:
    emitted: list[str] = []
    real = lower.emit_graph
    monkeypatch.setattr(lower, "emit_graph", lambda g, t: (emitted.append(g.name), real(g, t))[1])
    compiled = compile_program(split_sum())
    assert emitted == ["split_sum_g0", "split_sum_g1"]
    assert "region split here" in compiled.groups[1].group.notes[0]
    plan = dump_ir(split_sum(), "plan")
    assert ("region split under additions: yes (output Y: the reduction inside T is added to "
            "other terms but cannot be lowered as a factored intermediate)") in plan
    assert "region split under additions: no" in dump_ir(graphsage(), "plan")


def _bad_order() -> Program:
    return one_statement("bad", [("A", (3, 4), "csr"), ("X", (4, 5), "dense")], "T",
                         lambda A, X: einsum("ik,kj->ij", A, X), order="kij")


def _bad_division() -> Program:
    return one_statement("badd", [("A", (3, 4), "dense"), ("B", (3, 4), "csr")], "Y",
                         lambda A, B: A / B)


@pytest.mark.parametrize(("build", "error"), [(_bad_order, FusionError), (_bad_division, LoweringError)])
def test_check_program_says_why_and_compile_raises_the_same(build, error) -> None:
    why = check_program(build())
    assert why
    with pytest.raises(error) as exc:
        compile_program(build())
    assert str(exc.value) == why
    assert check_program(spmm()) is None and check_program(split_sum()) is None


def test_lower_group_runs_the_group_passes_after_fuse() -> None:
    p = spmm()
    (plan,) = plan_groups(p)
    group = fuse_group(p, plan, {n: d.fmt for n, d in p.decls.items() if d.fmt is not None})
    tables, graph = lower_group(group, factored=False)
    (expected,) = compile_program(spmm(), factored=False).graphs
    assert pipeline.graph_text(graph).replace("spmm_g0", "G") == \
        pipeline.graph_text(expected).replace("spmm_g0", "G")
    assert [t.output.tensor for t in tables] == ["T"]


def test_describe_pipeline_golden() -> None:
    path = GOLDEN / "pipeline.txt"
    if REGEN:
        path.write_text(describe_pipeline())
    assert describe_pipeline() == path.read_text()


def test_a_cycle_through_two_tensors_gets_two_permuted_copies() -> None:
    """``(A + B) ⊙ (A + B)ᵀ``: both tensors' transposed views conflict; each is permuted once
    (the cycle check used to pick the already permuted view again and crash)."""
    p = Program("sym")
    A, B = p.tensor("A", (6, 6), "csr"), p.tensor("B", (6, 6), "dcsr")
    T = p.let("T", A + B)
    p.output(p.let("Y", T * einsum("ij->ji", T)))
    compiled = compile_program(p)
    assert [c.name for c in compiled.permuted] == ["B_p10", "A_p10"]
    rng = np.random.default_rng(0)
    data = {n: rng.integers(-3, 4, (6, 6)) * (rng.random((6, 6)) < 0.4) for n in "AB"}
    np.testing.assert_array_equal(run_program(compiled, data, simulate=run_graph).dense("Y"), reference(p, data)["Y"])


def test_model_planner_decides_by_the_check_and_breaks_the_graph_where_none_compiles() -> None:
    """A reduction above three output indices (an order-3 accumulator) cannot be compiled at
    any granularity: the planner asks :func:`check_program` for each candidate (fusion x
    intermediate layout); none compiles, so the node runs on the host (a reported graph break
    naming the reason), and ``strict`` makes that an error."""
    def node(name, kind, args, shape, region="r0", **attrs):
        return MNode(name, kind, args, shape, region, "", attrs)

    nodes = [node("A", MKind.INPUT, (), (4, 3, 5, 6)),
             node("T", MKind.EINSUM, ("A",), (3, 5, 6), spec="kijl->ijl"),
             node("Y", MKind.UNARY, ("T",), (3, 5, 6), region="r1", op="relu")]
    ir = ModelIR("m", nodes, {}, {"A": "cccc"}, ["Y"], {})
    cm = compile_model(ir, "full")
    host = [s for s in cm.steps if isinstance(s, HostOpStep)]
    assert [s.node.name for s in host] == ["T"]
    assert "needs a sparse accumulator of order 3" in host[0].label()
    with pytest.raises(LoweringError, match="strict: einsum .* would run on the host .* order 3"):
        compile_model(ir, "full", strict=True)
