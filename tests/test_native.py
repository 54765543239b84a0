"""The compiled cycle model (sw_sim.native) against the Python one: the same cycles, per-node
counters, FLOP/byte counters and values on every kind of graph, the Python model run in a
subprocess with ``FUSEFLOW_SW_SIM=python``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

import sw_sim
from fuseflow.compiler import Program, compile_program, einsum, graph_runs
from fuseflow.compiler.passes.skip import enable_skipping, skip_sites
from fuseflow.kernels import KERNELS, example
from sw_sim import native, run_graph

ROOT = Path(__file__).resolve().parents[1]


# name -> (B's format, C's format, dataflow order of X or None): the compiled X = B·C programs
MATMULS = {"inner": ("dcsr", "dcsc", "ijk"), "gustavson": ("csr", "csr", "ikj"), "coo": ("coo", "csr", None)}


def _matmul(name: str):
    """X = B·C (24x24 operands) in the formats and order ``MATMULS[name]``, compiled."""
    b_fmt, c_fmt, order = MATMULS[name]
    p = Program(name)
    b = p.tensor("B", (24, 24), b_fmt)
    c = p.tensor("C", (24, 24), c_fmt)
    p.output(p.let("X", einsum("ik,kj->ij", b, c)))
    return compile_program(p, orders={"X": order} if order else None)


def _operands(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name in ("B", "C"):
        a = rng.integers(-8, 9, (24, 24))
        a[rng.random((24, 24)) > 0.2] = 0
        out[name] = a
    return out


def _record(res) -> dict:
    return {"cycles": res.cycles,
            "nodes": {n: [s.tokens_in, s.tokens_out, s.fire_cycles, s.stall_cycles, s.starve_cycles,
                          s.mem_cycles, s.done_cycle] for n, s in res.stats.items()},
            "counters": res.counters,
            "outputs": {t: np.asarray(td.to_dense()).tolist() for t, td in res.outputs.items()}}


def run_cases() -> dict[str, dict]:
    """Every built-in kernel (plain, with coordinate skipping where it applies, behind an hbm2
    memory) and three compiled programs (DCSR x DCSC inner product, Gustavson with a sparse
    accumulator, COO x CSR, also behind hbm2): what each run reports."""
    out = {}
    for k in KERNELS:
        g, data, _, _ = example(k, 24, seed=1, density=0.2)
        out[k] = _record(run_graph(g, data))
        out[f"{k}@hbm2"] = _record(run_graph(g, data, memory="hbm2"))
        if any(site.convertible for site in skip_sites(g)):
            out[f"{k}+skip"] = _record(run_graph(enable_skipping(g), data))
    for name in MATMULS:
        for i, (_, _, res) in enumerate(graph_runs(_matmul(name), _operands(2), simulate=run_graph)):
            out[f"{name}.{i}"] = _record(res)
    # COO levels read off chip (the singleton level: a crd port only)
    for i, (_, _, res) in enumerate(graph_runs(_matmul("coo"), _operands(3), simulate=run_graph, memory="hbm2")):
        out[f"coo@hbm2.{i}"] = _record(res)
    return out


def test_engine_is_compiled_where_it_can_be():
    """The suite runs the compiled model (Cython and a C compiler are installed with the dev
    extras); FUSEFLOW_SW_SIM=python is the one way to get the Python model."""
    if os.environ.get("FUSEFLOW_SW_SIM", "auto") == "python":
        assert sw_sim.ENGINE == "python"
    else:
        assert sw_sim.ENGINE == "compiled"
        assert Path(sw_sim.engine.__file__).suffix != ".py"


def test_compiled_and_python_models_agree():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        here = run_cases()
    env = {**os.environ, "FUSEFLOW_SW_SIM": "python", "PYTHONPATH": str(ROOT)}
    code = ("import json, sys; sys.path.insert(0, 'tests'); import sw_sim; "
            "assert sw_sim.ENGINE == 'python'; import test_native; "
            "print(json.dumps(test_native.run_cases()))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    there = json.loads(proc.stdout)
    assert set(here) == set(there)
    assert len(here) >= 15
    for case in here:
        assert json.loads(json.dumps(here[case])) == there[case], case


def test_bad_mode_is_a_clear_error():
    env = {**os.environ, "FUSEFLOW_SW_SIM": "fast", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", "import sw_sim"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode != 0
    assert "FUSEFLOW_SW_SIM='fast'" in proc.stderr and "auto, compiled, python" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_pxd_is_compiled_and_every_compiled_module_has_one():
    pxd = {p.stem for p in (ROOT / "sw_sim").glob("*.pxd")}
    assert pxd == set(native.COMPILED)


def test_build_key_follows_the_sources(tmp_path, monkeypatch):
    """Editing a compiled module's source selects another build directory (no stale build)."""
    key = native.source_key("3.0")
    assert native.source_key("3.1") != key
    src = tmp_path / "sw_sim"
    src.mkdir()
    for name in native.COMPILED:
        for suffix in (".py", ".pxd"):
            (src / f"{name}{suffix}").write_bytes((native.HERE / f"{name}{suffix}").read_bytes())
    monkeypatch.setattr(native, "HERE", src)
    assert native.source_key("3.0") == key
    (src / "join.py").write_text((src / "join.py").read_text() + "\n# edited\n")
    assert native.source_key("3.0") != key
