import json

import pytest

from fuseflow.executor import make_executor
from fuseflow.suites import spine_entry, suite
from fuseflow_cli import cmd_correlate
from fuseflow_cli.cli import main
from rtl_sim import correlate
from rtl_sim.correlate import r_squared, run_suite, write_report
from sw_sim import run_graph


def test_r_squared_hand_computed():
    assert r_squared([1, 2, 3], [1, 2, 3]) == 1.0
    # y = [2, 4, 6] (mean 4, SS_tot = 8); predictions x = [2, 4, 5]: SS_res = 1 -> 1 - 1/8
    assert r_squared([2, 4, 5], [2, 4, 6]) == pytest.approx(0.875)


def test_spine_suite_has_twenty_kernels():
    names = [e.name for e in suite("spine")]
    assert len(names) == 20 and len(set(names)) == 20


@pytest.mark.rtl
def test_small_suite_report(tmp_path):
    entries = [spine_entry("spmv_8_a", "SpMV", "spmv", 8, 0.3, 1),
               spine_entry("spmv_8_b", "SpMV", "spmv", 8, 0.5, 2),
               spine_entry("add_8", "elementwise", "add", 8, 0.3, 3)]
    results = run_suite(entries, jobs=2)
    summary = write_report(results, tmp_path)
    data = json.loads((tmp_path / "correlation.json").read_text())
    assert [k["name"] for k in data["kernels"]] == ["spmv_8_a", "spmv_8_b", "add_8"]
    for k in data["kernels"]:
        assert k["values_equal"] and k["reference_ok"]
        assert k["rtl_cycles"] == k["sw_cycles"]
    assert data["r2"] == 1.0 and data["max_rel_error"] == 0.0 and summary["differing"] == []
    assert (tmp_path / "correlation.png").stat().st_size > 10_000
    assert "| spmv_8_a | SpMV |" in (tmp_path / "report.md").read_text()


@pytest.mark.rtl
def test_suite_on_a_dask_cluster_equals_serial():
    entries = [spine_entry("spmv_8_a", "SpMV", "spmv", 8, 0.3, 1),
               spine_entry("add_8", "elementwise", "add", 8, 0.3, 3)]
    with make_executor("serial") as ex:
        serial = run_suite(entries, executor=ex)
    with make_executor("dask", 2) as ex:
        dask = run_suite(entries, executor=ex)
    assert [(r.name, r.sw_cycles, r.rtl_cycles) for r in dask] == [(r.name, r.sw_cycles, r.rtl_cycles) for r in serial]
    assert all(r.values_equal and r.rtl_cycles == r.sw_cycles for r in dask)


@pytest.mark.rtl
def test_correlate_json(tmp_path, capsys, monkeypatch):
    small = [spine_entry("spmv_8_a", "SpMV", "spmv", 8, 0.3, 1),
             spine_entry("add_8", "elementwise", "add", 8, 0.3, 3)]
    # a two-kernel suite named "spine" (serial: the suite is looked up in this process)
    for mod in (cmd_correlate, correlate):
        monkeypatch.setattr(mod, "suite", lambda name: list(small))
    out = tmp_path / "rep"
    assert main(["correlate", "--suite", "spine", "-o", str(out), "--json", "--scheduler", "serial"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"suite", "scheduler", "r2", "max_rel_error", "kernels", "all_values_equal", "differing", "memory",
            "report", "plot"} <= set(data)
    assert [k["name"] for k in data["kernels"]] == ["spmv_8_a", "add_8"] and data["r2"] == 1.0
    on_disk = json.loads((out / "correlation.json").read_text())
    assert [k["rtl_cycles"] for k in data["kernels"]] == [k["rtl_cycles"] for k in on_disk["kernels"]]
    for k, e in zip(data["kernels"], small):
        g, d, _ = e.make(run_graph)
        assert k["sw_cycles"] == run_graph(g, d).cycles == k["rtl_cycles"]
