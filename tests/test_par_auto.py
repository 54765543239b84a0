"""``--par auto[=L]``: the estimate's split of a lane budget (fuseflow.cost.par_search).

The truth is sw_sim: the pick's simulated cycles are compared with the fewest over every
candidate the test simulates itself, the parallel run's values with scipy's; the command line
takes the pick as if the factors had been given, says it on stderr, records it in --json, and
refuses budgets that are not powers of two within the lane maximum (bad-input corpus: the
``par-auto:`` cases)."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from fuseflow.compiler.passes.par import parallelize
from fuseflow.cost import estimate_graph
from fuseflow.cost.par_search import (
    candidate_pars,
    choose_par,
    choose_par_graphs,
    par_text,
    split_graphs,
)
from fuseflow.kernels import example
from fuseflow.schedule import ScheduleError, parse_par
from fuseflow_cli.cli import main
from sw_sim import run_graph


def test_candidates_are_every_power_of_two_split_over_at_most_two_indices():
    cands = candidate_pars(["k", "i", "j"], 16)
    keys = {par_text(c) for c in cands}
    assert len(keys) == len(cands)  # no candidate twice
    # independent count: 1 lane, 4 factors on each of 3 indices, 6 pairs (a, b) with a*b <= 16 per index pair
    pairs = sum(1 for a in (2, 4, 8, 16) for b in (2, 4, 8, 16) if a * b <= 16)
    assert len(cands) == 1 + 3 * 4 + 3 * pairs
    for c in cands:
        assert len(c) <= 2 and math.prod(c.values()) <= 16
        assert all(f > 1 and f & (f - 1) == 0 for f in c.values())
    assert {} in cands and {"i": 16} in cands and {"i": 4, "j": 4} in cands and {"i": 2, "k": 2} in cands
    assert candidate_pars(["i"], 1) == [{}]


def _sim_all(g, data, budget):
    """sw_sim cycles of every split par accepts (the test's own enumeration)."""
    return {par_text(par): run_graph(h, data).cycles for par, h, refused in split_graphs(g, budget)
            if not refused}


@pytest.mark.parametrize("kernel,size,budget", [("spmm_csr", 16, 8), ("spmv", 32, 16)])
def test_pick_is_within_15_percent_of_the_sw_sim_best(kernel, size, budget):
    g, data, _, expected = example(kernel, size, 0, 0.1)
    choice = choose_par(g, budget, lambda h: estimate_graph(h, data)[0].cycles)
    assert math.prod(choice.chosen.values()) <= budget
    truth = _sim_all(g, data, budget)
    assert set(truth) == set(choice.cycles)  # the same legal splits
    best = min(truth.values())
    assert truth[par_text(choice.chosen)] <= 1.15 * best, (choice.chosen, truth)
    h = copy.deepcopy(g)
    parallelize(h, choice.chosen)
    res = run_graph(h, data)
    np.testing.assert_array_equal(next(iter(res.outputs.values())).to_dense(), expected)
    assert g.nodes.keys() == example(kernel, size, 0, 0.1)[0].nodes.keys()  # the search worked on copies


def test_ties_go_to_fewer_lanes_and_refusals_drop_out():
    g, _, _, _ = example("spmv", 8, 0, 0.2)
    choice = choose_par(g, 16, lambda h: 100.0)  # every split the same: the one lane wins
    assert choice.chosen == {}
    assert any("only 8 coordinates" in why for why in choice.rejected.values())  # i=16
    both = choose_par_graphs([g], 4, lambda h: 100.0)
    assert both.to_json()["chosen"] == {} and both.speedup == 1.0


def test_parse_par_auto():
    assert parse_par(["auto"]) == {"auto": 16}
    assert parse_par(["auto=4"]) == {"auto": 4}
    for bad, says in [(["auto=3"], "power of two"), (["auto=0"], "at least 1"), (["auto=128"], "at most 64"),
                      (["auto", "i=2"], "either auto"), (["auto=2", "auto=4"], "once")]:
        with pytest.raises(ScheduleError, match=says):
            parse_par(bad)


def _cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_sim_takes_the_pick_says_it_and_records_it(capsys):
    rc, out, err = _cli(capsys, "sim", "--kernel", "spmv", "--size", "32", "--par", "auto=8", "--json")
    assert rc == 0, err
    rec = json.loads(out)
    pc = rec["par_choice"]
    assert pc["budget"] == 8 and math.prod(pc["chosen"].values()) <= 8
    assert pc["estimated_cycles"] <= pc["baseline_cycles"]
    assert {c["lanes"] for c in pc["candidates"] if "lanes" in c} <= {1, 2, 4, 8}
    assert rec["schedule"]["par"] == pc["chosen"]  # applied as if given
    assert rec["ok"] is True  # the parallel run's values against numpy
    line = [x for x in err.splitlines() if x.startswith("par auto (8 lanes) -> ")]
    assert len(line) == 1 and "estimated cycles" in line[0] and "x of 1 lane" in line[0]
    # the same factors given by hand: the same cycles
    given = [a for i, f in pc["chosen"].items() for a in ("--par", f"{i}={f}")]
    rc, out2, _ = _cli(capsys, "sim", "--kernel", "spmv", "--size", "32", *given, "--json")
    assert rc == 0 and json.loads(out2)["cycles"] == rec["cycles"]


def test_estimate_json_and_schedule_file(capsys, tmp_path):
    rc, out, err = _cli(capsys, "estimate", "--kernel", "spmm_csr", "--size", "16", "--par", "auto", "--json")
    assert rc == 0, err
    assert json.loads(out)["par_choice"]["budget"] == 16
    sched = tmp_path / "s.toml"
    sched.write_text("[par]\nauto = 4\n")
    rc, out, err = _cli(capsys, "sim", "--kernel", "spmv", "--size", "16", "--schedule", str(sched), "--json")
    assert rc == 0, err
    assert json.loads(out)["par_choice"]["budget"] == 4 and "par auto (4 lanes)" in err


@pytest.mark.parametrize("argv,says", [
    (["--par", "auto=3"], "--par auto=3: the lane budget must be a power of two"),
    (["--par", "auto=0"], "--par auto=0"),
    (["--par", "auto=256"], "at most 64 lanes"),
    (["--par", "auto", "--par", "i=2"], "--par auto and --par i=2"),
])
def test_bad_budgets_are_exit_2(capsys, argv, says):
    rc, _, err = _cli(capsys, "sim", "--kernel", "spmv", "--size", "8", *argv)
    assert rc == 2 and says in err and "Traceback" not in err


@pytest.mark.slow
def test_model_par_auto(capsys):
    pytest.importorskip("torch")
    rc, out, err = _cli(capsys, "sim", "--model", "gcn", "--par", "auto=4", "--json")
    assert rc == 0, err
    line = next(x for x in err.splitlines() if x.startswith("par auto (4 lanes) -> "))
    rec = json.loads(out)
    chosen = {k: v for k, v in rec["schedule"]["par"].items()}
    assert chosen and all(":" in k for k in chosen) and all(f <= 4 for f in chosen.values())
    assert ", ".join(f"{k}={v}" for k, v in chosen.items()) in line
    assert rec["ok"] is True
    assert rec["par_choice"] and rec["par_choice"]["budget"] == 4
