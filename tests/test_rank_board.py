"""``rank --board B``: configurations ranked by predicted wall time (estimated cycles over the
clock the resource model predicts), only those predicted to fit the device with the margin, a
refusal naming the resource when none does; ``--assoc auto`` ranks every association order."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch", reason="the frontend needs PyTorch (pip install -e '.[torch]')")

import fuseflow_cli.board_search as board_search  # noqa: E402
from fpga.resource_model import DEVICE_LOGIC, FEATURES, ResourceModel  # noqa: E402
from fuseflow_cli.cli import main  # noqa: E402


def _model(lut_per_fifo_bit: float) -> ResourceModel:
    """A model with round coefficients: LUT grows with FIFO bits, the clock falls with LUTs."""
    return ResourceModel(family="gowin", lut={"one": 500.0, "fifo_bits": lut_per_fifo_bit},
                         ff={"one": 300.0, "fifo_bits": 0.5}, bram_threshold=2048.0, dsp_per_mul=4.0,
                         period={"one": 4.0, "log2_lut": 1.0, "lanes": 0.0}, designs=20, note="test model")


def _rank(argv, capsys, monkeypatch, model):
    monkeypatch.setattr(board_search, "load_model", lambda family: model)
    code = main(["rank", "--model", "gcn", "--board", "tang_primer_20k", "--json", *argv])
    cap = capsys.readouterr()
    return code, (json.loads(cap.out) if code == 0 else None), cap.err


def test_ranked_by_predicted_wall_time_among_the_fitting(capsys, monkeypatch):
    code, rec, _ = _rank(["--assoc", "auto"], capsys, monkeypatch, _model(0.05))
    assert code == 0
    board = rec["board"]
    assert board["device"] == "GW2A-LV18PG256C8/I7" and board["ranked"]
    walls = [r["wall_us"] for r in board["ranked"]]
    assert walls == sorted(walls) and len(walls) + len(board["refused"]) == len(rec["configs"]) == 12
    assert all(r["over"] for r in board["refused"])
    for r in board["ranked"]:
        p = r["predicted"]
        assert r["wall_us"] == pytest.approx(r["est_cycles"] / p["fmax_mhz"], rel=1e-3)
        assert p["DSP"] == pytest.approx(4.0 * round(p["DSP"] / 4.0))
    assert {c["assoc"] for c in rec["configs"]} >= {"as written", "adj·(x·layer1_lin_weight)"}


def test_a_margin_drops_what_does_not_fit_and_nothing_fitting_is_refused(capsys, monkeypatch):
    lut = DEVICE_LOGIC["GW2A-LV18PG256C8/I7"]["LUT"]
    code, rec, _ = _rank(["--margin", "0.5"], capsys, monkeypatch, _model(2.0))
    assert code == 0
    board = rec["board"]
    for r in board["ranked"]:
        assert r["predicted"]["LUT"] <= 0.5 * lut
    for r in board["refused"]:
        assert r["predicted"]["LUT"] > 0.5 * lut and r["over"][0].startswith("LUT ")
    code, _, err = _rank([], capsys, monkeypatch, _model(500.0))
    assert code == 2 and "no configuration is predicted to fit the GW2A-LV18PG256C8/I7" in err and "LUT " in err


def test_board_options_need_a_board(capsys):
    assert main(["rank", "--model", "gcn", "--synthesize", "2"]) == 2
    assert "--margin / --lanes / --max-nnz / --synthesize: for --board B" in capsys.readouterr().err
    assert main(["rank", "--model", "gcn", "--board", "tang_primer_20k", "--margin", "1"]) == 2


def test_lanes_add_the_splits_of_the_built_graph(capsys, monkeypatch):
    """``--lanes 4``: each configuration also as every legal split of its built graph into at most
    4 lanes: fewer estimated cycles, more predicted LUTs (the FIFOs of the lanes)."""
    code, rec, _ = _rank(["--fusion", "partial", "--lanes", "4"], capsys, monkeypatch, _model(0.05))
    assert code == 0
    rows = rec["board"]["ranked"] + rec["board"]["refused"]
    base = next(r for r in rows if r["configuration"] == "partial (compiler's orders)")
    splits = [r for r in rows if r["par"] and r["rank"] == base["rank"]]
    assert splits and any(r["par"] == "i=4" for r in splits)
    i4 = next(r for r in splits if r["par"] == "i=4")
    assert i4["est_cycles"] < base["est_cycles"] and i4["predicted"]["LUT"] > base["predicted"]["LUT"]


def test_a_board_build_takes_the_fastest_granularity_predicted_to_fit(tmp_path, capsys, monkeypatch):
    """``build --board`` without ``--fusion`` builds the board search's pick: here LUTs grow with
    the multipliers, so partial fusion (the fewest cycles) and full fusion are predicted not to
    fit the GW2A and the build takes unfused, which rank also ranks first; ``--fusion`` builds
    what it names, without the search."""
    import fuseflow_cli.cmd_synth as cmd_synth

    model = ResourceModel(family="gowin", lut={"one": 500.0, "mul_lanes": 12000.0}, ff={"one": 300.0},
                          bram_threshold=2048.0, dsp_per_mul=4.0, period={"one": 4.0, "log2_lut": 1.0, "lanes": 0.0},
                          designs=20, note="test model")
    for mod in (board_search, cmd_synth):
        monkeypatch.setattr(mod, "load_model", lambda family: model)
    assert main(["rank", "--model", "gcn", "--board", "tang_primer_20k", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["configs"][0]["fusion"] == "partial"  # the fewest estimated cycles
    assert [r["fusion"] for r in rec["board"]["ranked"]] == ["unfused"]
    assert main(["build", "--model", "gcn", "--board", "tang_primer_20k", "-o", str(tmp_path / "pick")]) == 0
    out = capsys.readouterr().out
    assert "board search -> unfused" in out and "gcn / unfused" in out
    assert main(["build", "--model", "gcn", "--board", "tang_primer_20k", "--fusion", "partial",
                 "-o", str(tmp_path / "told")]) == 0
    out = capsys.readouterr().out
    assert "board search" not in out and "gcn / partial" in out


def test_a_board_build_with_assoc_auto_builds_the_ranked_association(tmp_path, capsys, monkeypatch):
    """With ``--assoc auto`` the board search ranks every association order too, and the build
    compiles the first one ranked (its ``--assoc`` value), as ``rank --board --assoc auto``
    ranks it."""
    import fuseflow_cli.cmd_synth as cmd_synth

    model = _model(0.05)
    for mod in (board_search, cmd_synth):
        monkeypatch.setattr(mod, "load_model", lambda family: model)
    assert main(["rank", "--model", "gcn", "--board", "tang_primer_20k", "--assoc", "auto", "--per-group", "1",
                 "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["board"]["ranked"][0]
    assert main(["build", "--model", "gcn", "--board", "tang_primer_20k", "--assoc", "auto",
                 "-o", str(tmp_path / "pick")]) == 0
    cap = capsys.readouterr()
    with_assoc = "" if first["assoc"] == "as written" else f" with {first['assoc']}"
    assert f"board search -> {first['fusion']}{with_assoc}: {first['est_cycles']:,} estimated cycles" in cap.out
    assert (first["assoc"] == "as written") == ("assoc -> " not in cap.err)


def test_configurations_with_the_same_top_are_placed_and_routed_once(capsys, monkeypatch):
    """GraphSAGE's dataflow orders of its smaller graph leave the largest graph (the top a board
    builds) the same: ``--synthesize`` places and routes that top once and gives the others its
    clock, each with its own cycles."""
    tops = []

    def measure(r, board):  # records the top; the clock stands in for place and route's
        tops.append(json.dumps(r["_graph"].to_json(), sort_keys=True, default=str))
        r["measured"] = {"LUT": 1, "fmax_mhz": 50.0 + len(tops), "wall_us": round(r["est_cycles"] / (50.0 + len(tops)), 2)}

    monkeypatch.setattr(board_search, "_measure", measure)
    monkeypatch.setattr(board_search, "load_model", lambda family: _model(0.05))
    assert main(["rank", "--model", "graphsage", "--board", "tang_primer_20k", "--synthesize", "4", "--json"]) == 0
    ranked = json.loads(capsys.readouterr().out)["board"]["ranked"][:4]
    assert len(tops) == len(set(tops)) < 4
    for r in ranked:
        m = r["measured"]
        assert m["wall_us"] == pytest.approx(r["est_cycles"] / m["fmax_mhz"], rel=1e-3)
        if "same_top_as" in m:
            first = next(x for x in ranked if x["configuration"] == m["same_top_as"])
            assert "same_top_as" not in first["measured"] and first["measured"]["fmax_mhz"] == m["fmax_mhz"]
