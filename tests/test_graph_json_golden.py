"""The graph JSON that the compiler emits is byte-identical across refactors.

Every graph of the compiler correlation suite (each program in every fusion mode it compiles
in), of the model correlation suite, of the example programs, of the zoo models (small instances) and of the hand-written kernels is
saved as ``Graph.save`` writes it; the SHA-256 of each text is kept in
``golden/graph_json.json``.  A change to the IR, a primitive declaration or a compiler pass that
alters any byte of any graph fails here, naming the graph.

Regenerate (after reviewing why the graphs changed) with
``FUSEFLOW_REGEN_GOLDEN=1 python -m pytest tests/test_graph_json_golden.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from fuseflow.compiler import compile_program
from fuseflow.suites.compiler import MODES, PROGRAMS
from fuseflow.kernels import KERNELS
from fuseflow.models import FUSIONS, compile_model, trace
from fuseflow.models.zoo import make_case
from fuseflow.ir.samml import Graph

GOLDEN = Path(__file__).parent / "golden" / "graph_json.json"
EXAMPLES = Path(__file__).parent.parent / "examples" / "programs"
# small zoo instances: every model kind, every fusion granularity
ZOO = (("gcn", {"hidden": 8}), ("graphsage", {"hidden": 8}), ("sae", {"sae_in": 16, "batch": 3}),
       ("gpt", {"seq": 16, "d": 8, "blocks": 1}))
REGEN = os.environ.get("FUSEFLOW_REGEN_GOLDEN") == "1"


def _text(g: Graph) -> str:
    """The graph as saved, without its reference record (what it computes, kept as the
    compiler's statements: tests/test_graph_reference.py checks it against numpy)."""
    d = g.to_json()
    d.pop("reference", None)
    return json.dumps(d, indent=1) + "\n"


def _example_programs():
    for path in sorted(EXAMPLES.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield path.stem, mod.program()


def all_graphs() -> dict[str, str]:
    """Graph id -> its JSON text."""
    out: dict[str, str] = {}
    for name, prog in PROGRAMS.items():
        for mode, (fusion, factored, locate) in MODES.items():
            if mode not in prog.modes:
                continue
            compiled = compile_program(prog.build(), fusion, factored=factored, locate=locate)
            for k, g in enumerate(compiled.graphs):
                out[f"suite/{name}/{mode}/{k}"] = _text(g)
    for name, prog in _example_programs():
        for fusion in ("full", "partial", "unfused"):
            for k, g in enumerate(compile_program(prog, fusion).graphs):
                out[f"example/{name}/{fusion}/{k}"] = _text(g)
    for name, make in KERNELS.items():
        out[f"kernel/{name}/16"] = _text(make(16))
    for model, kw in ZOO:
        case = make_case(model, **kw)
        ir = trace(case.module, case.inputs, case.formats)
        for fusion in FUSIONS:
            for k, g in enumerate(compile_model(ir, fusion).graphs):
                out[f"model/{model}/{fusion}/{k}"] = _text(g)
    return out


def test_graph_json_is_byte_identical() -> None:
    digests = {k: hashlib.sha256(t.encode()).hexdigest() for k, t in all_graphs().items()}
    if REGEN:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert sorted(digests) == sorted(golden), "the set of graphs changed"
    changed = [k for k in golden if digests[k] != golden[k]]
    assert not changed, f"graph JSON changed for {changed}"
