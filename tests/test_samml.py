import json

import pytest

from fuseflow.kernels import KERNELS
from fuseflow.samml import Graph, GraphError, NodeKind, Role
from fuseflow.tensor import CSR, TensorData


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernels_verify_and_round_trip(name, tmp_path):
    g = KERNELS[name](8)
    g.verify()
    g.save(tmp_path / "g.json")
    h = Graph.load(tmp_path / "g.json")
    assert h.to_json() == g.to_json()
    assert h.structure_hash() == g.structure_hash()
    dot = g.to_dot()
    assert dot.startswith("digraph") and all(f'"{n}"' in dot for n in g.nodes)


def _tiny() -> Graph:
    g = Graph("tiny")
    g.tensor("A", (4, 4), CSR)
    g.tensor("y", (4,), __import__("fuseflow").TensorFormat(("dense",)), Role.OUTPUT)
    return g


def test_dangling_and_double_driven_ports_are_named():
    g = _tiny()
    r = g.add(NodeKind.ROOT, "root")
    s = g.add(NodeKind.SCAN, "scan", tensor="A", level=0)
    g.add(NodeKind.SCAN, "scan2", tensor="A", level=1)
    g.connect(r["ref"], s["ref"])
    g.connect(r["ref"], "scan2.ref")
    with pytest.raises(GraphError) as exc:
        g.verify()
    msg = str(exc.value)
    assert "root.ref feeds both scan.ref and scan2.ref: fan-out needs a broadcast" in msg
    assert "output port scan.crd is not connected" in msg
    assert "output port scan2.ref is not connected" in msg


def test_kind_mismatch_and_unknown_port():
    g = _tiny()
    r = g.add(NodeKind.ROOT, "root")
    a = g.add(NodeKind.ALU, "alu", op="add")
    g.connect(r["ref"], a["a"])
    g.connect(r["nope"], a["b"])
    with pytest.raises(GraphError) as exc:
        g.verify()
    assert "edge root.ref -> alu.a: a ref stream drives a val port" in str(exc.value)
    assert "node 'root' (root) has no output port 'nope'" in str(exc.value)


def test_bad_params_are_named():
    g = _tiny()
    g.add(NodeKind.SCAN, "s1", tensor="Q", level=0)
    g.add(NodeKind.SCAN, "s2", tensor="A", level=5)
    g.add(NodeKind.ALU, "a1", op="pow")
    g.add(NodeKind.VALS_WRITE, "w", tensor="A")
    with pytest.raises(GraphError) as exc:
        g.verify()
    msg = str(exc.value)
    assert "node 's1' (scan): tensor 'Q' is not declared" in msg
    assert "node 's2' (scan): level 5 out of range for tensor 'A'" in msg
    assert "node 'a1' (alu): op 'pow' is not one of" in msg
    assert "node 'w' (vals_write): writes tensor 'A', which is not an output" in msg


def test_missing_and_mismatched_tensor_data():
    g = KERNELS["spmv"](4)
    import numpy as np

    with pytest.raises(GraphError, match="input tensor 'c' has no data"):
        g.verify({"B": TensorData.from_dense(np.eye(4, dtype=int), CSR)})
    with pytest.raises(GraphError, match=r"tensor 'B': data shape \(3, 3\) != declared \(4, 4\)"):
        g.verify({"B": TensorData.from_dense(np.eye(3, dtype=int), CSR),
                  "c": TensorData.from_dense(np.ones(4, dtype=int), g.tensors["c"].fmt)})


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(GraphError, match="does not exist"):
        Graph.load(tmp_path / "missing.json")
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(GraphError, match="bad.json.*not valid JSON"):
        Graph.load(p)
    p.write_text(json.dumps({"nodes": [{"name": "x", "kind": "warp"}]}))
    with pytest.raises(GraphError, match="node 'x' has unknown kind 'warp'"):
        Graph.load(p)
