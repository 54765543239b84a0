"""A whole model on one board top, simulated: the 2-layer GCN on the karate graph, both graphs in
``hw.dram_model.ModelTop`` with their tensors in the ULX3S's DRAM (LiteDRAM's SDRAM model behind
the generated controller), driven over the UART by the host driver (``fpga.model_run``).  The
suite's LiteDRAM Verilator build.  References: PyTorch (within the q16.16 bound) and sw_sim's run
of the same model (values equal; cycles under the board's DRAM preset, a statistical model)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from fpga.model_run import BoardModel, build_model_top, model_graphs, model_hw_config
from fuseflow.ir.memory import Placement
from fuseflow.models.bounds import check_model
from fuseflow.models.frontend import trace
from fuseflow.models.plan import compile_model, run_model
from fuseflow.models.zoo import make_case
from hw.elaborate import HwConfig
from sw_sim import run_graph


@pytest.mark.rtl
def test_gcn_whole_on_the_simulated_ulx3s():
    """The karate GCN's two graphs on the on-chip sequencer (one start) and started one by one
    by the host: both equal to sw_sim's values and within PyTorch's bound."""
    case = make_case("gcn", "karate")
    ir = trace(case.module, case.inputs, case.formats, name=case.name)
    cm = compile_model(ir, "partial")
    graphs = model_graphs(cm)
    assert len(graphs) == 2
    cfg = model_hw_config(cm, ir, HwConfig.for_numerics("q16.16"), "ulx3s")
    bdir, meta = build_model_top(graphs, cfg, "ulx3s", 8)
    bm, pipe = BoardModel.simulated(bdir, meta)
    with pipe:
        # the graphs back to back on the on-chip sequencer, then each started by the host
        res = run_model(cm, numerics="q16.16", simulate=bm.simulate, program_runner=bm.run_program)
        seq_runs = list(bm.runs)
        host = run_model(cm, numerics="q16.16", simulate=bm.simulate)
    sw = run_model(cm, numerics="q16.16", simulate=run_graph, memory=cfg.memory,
                   onchip=Placement(cfg.onchip, strict=False))
    [out] = ir.outputs
    assert np.array_equal(res.outputs[out], sw.outputs[out])
    assert np.array_equal(host.outputs[out], sw.outputs[out])
    checks = check_model(cm, res, case.reference(), "q16.16")
    assert all(c.ok for c in checks), [c.to_json() for c in checks]
    [seq] = bm.sequences  # one start for both graphs: nothing runs on the host between them
    assert seq.graphs == [g.name for g in graphs]
    assert [r.sequence for r in seq_runs] == [0, 0] and [r.sequence for r in bm.runs[2:]] == [None, None]
    # the sequence's own counter: both graphs' cycles and the starts between them (a few cycles)
    assert 0 <= seq.cycles - sum(r.cycles for r in seq_runs) <= 16
    for first, second in (seq_runs, bm.runs[2:]):
        # the second graph reads the first one's output (t4_relu) and the adjacency the host
        # loaded for the first one from DRAM, without loading them again
        assert {"adj", "x"} <= set(first.loaded) and first.from_dram == []
        assert set(second.from_dram) >= {"adj", "t4_relu"} and "adj" not in second.loaded
        assert second.load_bytes < first.load_bytes / 4
    for runs in (seq_runs, bm.runs[2:]):
        for r, (name, cycles) in zip(runs, sw.cycles):
            assert r.graph == name and abs(r.cycles / cycles - 1) < 0.15  # the preset's statistical bound


@pytest.mark.parametrize("command", [
    ["run", "--board", "ulx3s-85f", "--sim", "--model", "gcn", "--onchip", "nosuch"],
    ["synth", "--board", "ulx3s-85f", "--model", "gcn", "--onchip", "nosuch", "-o", "{out}"],
])
def test_a_model_on_a_dram_board_names_an_unknown_onchip_tensor(command, tmp_path, capsys):
    from fuseflow_cli.cli import main

    assert main([a.format(out=tmp_path / "o") for a in command]) == 2
    err = capsys.readouterr().err
    assert "--onchip: no tensor 'nosuch' in model gcn" in err and "adj" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [
    ["run", "--board", "ulx3s-85f", "--sim", "--model", "gcn", "--par", "i=4"],
    ["synth", "--board", "ulx3s-85f", "--model", "gcn", "--par", "i=4", "-o", "{out}"],
])
def test_a_banked_intermediate_a_later_graph_reads_is_refused(command, tmp_path, capsys):
    """The first graph's lanes would write t4_relu in banks, which the second graph cannot read
    from DRAM as one tensor: refused before anything is built, naming the way out."""
    from fuseflow_cli.cli import main

    assert main([a.format(out=tmp_path / "o") for a in command]) == 2
    err = capsys.readouterr().err
    assert "writes 't4_relu' in 4 banks" in err and "--no-par-banks" in err
    assert not (tmp_path / "o").exists()


def test_a_whole_model_needs_a_board_with_dram(capsys):
    from fuseflow_cli.cli import main

    assert main(["run", "--board", "icebreaker", "--sim", "--model", "gcn"]) == 2
    assert "a whole model runs on a board with DRAM" in capsys.readouterr().err


def test_run_model_on_a_port_checks_the_build_directory(tmp_path, capsys):
    """``run --model --port --build DIR`` takes the memory map and ident of a ``synth --model``
    build; a directory of another compilation is refused before the port is opened."""
    import json

    from fuseflow_cli.cli import main

    base = ["run", "--board", "ulx3s-85f", "--model", "gcn", "--port", "/dev/fuseflow-no-such-tty"]
    assert main(base) == 2
    assert "give --build DIR" in capsys.readouterr().err
    d = tmp_path / "build"
    (d / "graphs").mkdir(parents=True)
    (d / "synth_report.json").write_text(json.dumps({"board": "ulx3s-85f", "ident": 1, "baud": 2000000}))
    (d / "design.json").write_text("{}")
    (d / "memory_map.json").write_text(json.dumps({"graphs": [{"name": "other_g0"}], "sequencer": {}}))
    assert main([*base, "--build", str(d)]) == 2
    err = capsys.readouterr().err
    assert "holds graphs ['other_g0']" in err and "gcn_t1_matmul_g0" in err


@pytest.mark.rtl
@pytest.mark.slow
def test_cora_gcn_whole_on_the_simulated_ulx3s(capsys):
    """The Cora-sized 2-layer GCN (all 1,433 features) whole on the simulated ULX3S-85F: values
    equal sw_sim's and within PyTorch's bound, cycles within 5 % of sw_sim's under the board's
    preset (about 7 minutes: 88 M simulated cycles, most of them the UART load)."""
    import json

    from fuseflow_cli.cli import main

    assert main(["run", "--board", "ulx3s-85f", "--sim", "--model", "gcn", "--dataset", "cora", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["check"] == "pass" and all(r["equal_to_sw_sim"].values())
    assert abs(r["cycles_ratio"] - 1) <= 0.05
    assert "t4_relu" in r["graphs"][1]["from_dram"]


@pytest.mark.parametrize("onchip, lengths", [((), [2]), (("t4_relu",), [1, 1])])
def test_the_sequencer_runs_graphs_whose_intermediates_stay_in_dram(onchip, lengths):
    """The graphs of one compiler step go to the on-chip sequencer together when each one's
    inputs written by an earlier one are in the DRAM slots it wrote; an intermediate kept on
    chip (here the first layer's output, ``--onchip t4_relu``) goes through the host, so the
    step runs as single graphs the host starts."""
    from fuseflow.models.steps import CompilerStep
    from hw.dram_model import ModelTop

    case = make_case("gcn", "karate")
    ir = trace(case.module, case.inputs, case.formats, name=case.name)
    cm = compile_model(ir, "partial")
    graphs = model_graphs(cm)
    cfg = model_hw_config(cm, ir, HwConfig.for_numerics("q16.16"), "ulx3s", onchip=list(onchip))
    assert set(onchip) <= set(cfg.onchip)
    top = ModelTop(graphs, cfg, "ulx3s", sim=True)
    top.discard()
    bm = BoardModel(None, {**top.host_map(), "ident": 0})
    [step] = [s for s in cm.steps if isinstance(s, CompilerStep)]
    step_graphs = [cg.graph for cg in step.compiled.groups]
    got, i = [], 0
    while i < len(step_graphs):
        seg = bm.sequence(step.compiled, step_graphs, i)
        got.append(len(seg))
        i += len(seg)
    assert got == lengths


def test_the_board_manifest_places_every_graph_and_names_the_host_work():
    """``model.json`` of a model's board top (``build --board``, ``synth``): every step in order,
    each graph with its index and host base in the top, the sequencer's runs; and the host's
    work between graphs, none for the GCN and the reshapes for the GPT block."""
    import argparse

    from fpga.model_run import host_work
    from fuseflow_cli.board_model import board_model_manifest
    from hw.dram_model import ModelTop

    case = make_case("gcn", "karate")
    ir = trace(case.module, case.inputs, case.formats, name=case.name)
    cm = compile_model(ir, "partial")
    graphs = model_graphs(cm)
    cfg = model_hw_config(cm, ir, HwConfig.for_numerics("q16.16"), "ulx3s")
    top = ModelTop(graphs, cfg, "ulx3s", sim=False)
    top.discard()
    m = board_model_manifest(argparse.Namespace(model="gcn", fusion="partial"), cm, top, "ulx3s-85f")
    placed = [g for s in m["steps"] if s["kind"] == "graphs" for g in s["graphs"]]
    assert [(g["name"], g["index"], g["base"]) for g in placed] == \
        [(g.name, k, top.graph_base(k)) for k, g in enumerate(graphs)]
    assert m["sequences"] == [[g.name for g in graphs]] and m["host_work"] == []
    assert m["sequencer"]["base"] == len(graphs) << top.local_width
    assert placed[1]["inputs"].count("t4_relu") == 1 and "t4_relu" in placed[0]["outputs"]
    gpt = make_case("gpt")
    gcm = compile_model(trace(gpt.module, gpt.inputs, gpt.formats, name=gpt.name), "partial")
    work = host_work(gcm)
    assert work and all(w.startswith("data movement: host reshape") for w in work[:3])


@pytest.mark.parametrize("command, expect", [
    (["run", "--board", "ulx3s-85f", "--sim", "--model", "gpt"], "needs the host between its graphs for 18 step(s)"),
    (["synth", "--board", "ulx3s-85f", "--model", "gpt", "-o", "{out}"], "data movement: host reshape t5_bias"),
    (["synth", "--board", "icebreaker", "--model", "gcn", "-o", "{out}"], "only on a board with DRAM"),
    (["build", "--model", "gcn", "-o", "{out}"], "only with --board"),
    (["run", "--board", "ulx3s-85f", "--sim", "--kernel", "spmv"], "applies to models only"),
])
def test_no_host_steps_refuses_a_model_that_needs_the_host(command, expect, tmp_path, capsys):
    """``--no-host-steps``: the GPT block's reshapes and permutes run on the host between its
    graphs, so it is refused before anything is built, naming them; the flag means nothing
    without a whole model on a DRAM board, and is refused there too."""
    from fuseflow_cli.cli import main

    assert main([a.format(out=tmp_path / "o") for a in command] + ["--no-host-steps"]) == 2
    assert expect in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _manifest(tmp_path, **change) -> str:
    """A ``build --model gcn`` manifest as the build writes it, without elaborating (the Verilog
    is not needed here): the same fields from the same compilation."""
    from fuseflow_cli.models import model_steps

    case = make_case("gcn", "karate")
    cm = compile_model(trace(case.module, case.inputs, case.formats, name=case.name), "partial")
    m = {"model": "gcn", "fusion": "partial", "numerics": "q16.16", "options": {"dataset": "karate", "hidden": 16},
         "graphs": [g.name for g in cm.graphs], "structure": {g.name: g.structure_hash() for g in cm.graphs},
         "steps": model_steps(cm, lambda g, computes: {"name": g.name})}
    m.update(change)
    path = tmp_path / "model.json"
    path.write_text(__import__("json").dumps(m))
    return str(path)


@pytest.mark.parametrize("extra, change, says", [
    (["--hidden", "8"], {}, "the manifest fixes --hidden"),
    (["--model", "sae"], {}, "a model manifest names its model (gcn); drop --model"),
    ([], {"structure": {"gcn_t1_matmul_g0": "0", "gcn_t1_matmul_g1": "1"}}, "compiles model gcn (partial) to other graphs"),
])
def test_a_model_manifest_is_taken_whole_or_refused(extra, change, says, tmp_path, capsys):
    """``rtl MODEL.json`` / ``synth MODEL.json``: the manifest of ``build --model`` fixes the
    model, its options and its graphs; a clashing option, a second source or graphs this
    version compiles differently are refused before anything runs."""
    from fuseflow_cli.cli import main

    path = _manifest(tmp_path, **change)
    for cmd in (["rtl", path], ["synth", path, "--board", "icebreaker", "-o", str(tmp_path / "o")]):
        assert main([*cmd, *extra]) == 2
        assert says in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.rtl
@pytest.mark.slow  # two Verilator builds (the same graphs as rtl --model gcn)
def test_rtl_on_a_build_manifest_runs_every_graph(tmp_path, capsys):
    from fuseflow_cli.cli import main

    assert main(["build", "--model", "gcn", "-o", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert main(["rtl", str(tmp_path / "b" / "model.json")]) == 0
    out = capsys.readouterr().out
    assert "RTL = sw_sim in values, overflow flags and cycles for 2 graphs: yes" in out
    assert "check against PyTorch: t7_bias" in out and ": PASS" in out


@pytest.mark.slow  # two syntheses
def test_synth_on_a_build_manifest_reports_every_graph(tmp_path, capsys):
    """On a board without DRAM every graph of the manifest is its own bitstream, one report row
    each (checked against the reports the tools wrote)."""
    import json

    from fuseflow_cli.cli import main

    assert main(["build", "--model", "gcn", "-o", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert main(["synth", str(tmp_path / "b" / "model.json"), "--board", "ulx3s-85f", "--no-dram", "--json",
                 "-o", str(tmp_path / "s")]) == 0
    r = json.loads(capsys.readouterr().out)
    assert list(r["graphs"]) == ["gcn_t1_matmul_g0", "gcn_t1_matmul_g1"]
    for g, rep in r["graphs"].items():
        saved = json.loads((tmp_path / "s" / g / "synth_report.json").read_text())
        assert rep["resources"]["LUT"]["used"] == saved["resources"]["LUT"]["used"] > 0
