import json

import pytest

from fuseflow.kernels import KERNELS
from fuseflow.ir.samml import Graph, GraphError, NodeKind, Role
from fuseflow.ir.tensor import CSR, TensorData


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


def _problems(g: Graph) -> str:
    """The verifier's message for ``g``, which must be invalid."""
    with pytest.raises(GraphError) as exc:
        g.verify()
    return str(exc.value)


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
    msg = _problems(g)
    assert "root.ref feeds both scan.ref and scan2.ref: fan-out needs a broadcast" in msg
    assert "output port scan.crd is not connected" in msg
    assert "output port scan2.ref is not connected" in msg


def test_kind_mismatch_and_unknown_port():
    g = _tiny()
    r = g.add(NodeKind.ROOT, "root")
    a = g.add(NodeKind.ALU, "alu", op="add")
    g.connect(r["ref"], a["a"])
    g.connect(r["nope"], a["b"])
    msg = _problems(g)
    assert "edge root.ref -> alu.a: a ref stream drives a val port" in msg
    assert "node 'root' (root) has no output port 'nope'" in msg


def test_bad_tensor_uses_are_named():
    g = _tiny()
    g.add(NodeKind.SCAN, "s1", tensor="Q", level=0)
    g.add(NodeKind.SCAN, "s2", tensor="A", level=5)
    g.add(NodeKind.VALS_WRITE, "w", tensor="A")
    msg = _problems(g)
    assert "node 's1' (scan): tensor 'Q' is not declared" in msg
    assert "node 's2' (scan): level 5 out of range for tensor 'A'" in msg
    assert "node 'w' (vals_write): writes tensor 'A', which is not an output" in msg


@pytest.mark.parametrize(("kind", "params", "message"), [
    (NodeKind.ALU, {"op": "pow"}, "node 'x' (alu): op 'pow' is not one of ['add'"),
    (NodeKind.SCAN, {"tensor": "A", "level": "0"}, "node 'x' (scan): parameter 'level' must be an integer, got '0'"),
    (NodeKind.SCAN, {"tensor": "A", "level": True}, "parameter 'level' must be an integer, got True"),
    (NodeKind.SCAN, {"tensor": "A"}, "node 'x' (scan): missing parameter 'level'"),
    (NodeKind.SCAN, {"tensor": "A", "level": 0, "lvl": 1}, "node 'x' (scan): unknown parameter 'lvl' (takes tensor, level, skip, offset, stride)"),
    (NodeKind.ROOT, {"n": 1}, "node 'x' (root): unknown parameter 'n' (takes no parameters)"),
    (NodeKind.REDUCE, {"op": "mul"}, "node 'x' (reduce): op 'mul' is not one of ['add', 'max']"),
    (NodeKind.INTERSECT, {"n": 1}, "node 'x' (intersect): n=1 is too small"),
    (NodeKind.UNION, {"n": 2, "val_refs": [2]}, "val_refs [2] names inputs outside 0..n-1"),
    (NodeKind.REPEAT, {"stream": "crd"}, "a repeat carries a ref or val stream, not 'crd'"),
    (NodeKind.BROADCAST, {"n": 2, "stream": "bits"}, "stream 'bits' is not one of ['crd', 'ref', 'val', 'repsig']"),
    (NodeKind.ALU, {"op": "add_scalar", "scalar": "2"}, "parameter 'scalar' must be a number, got '2'"),
    (NodeKind.CRD_MASK, {"pred": "block", "block": 3, "pattern": [[1, 0], [1]]},
     "node 'x' (crd_mask): block=3 must be a power of two; node 'x' (crd_mask): pattern must be a non-empty rectangular"),
    (NodeKind.CRD_MASK, {"pred": "band", "before": -1}, "before=-1 and after=0 must be >= 0"),
    (NodeKind.SPACC1, {"dim": 0}, "node 'x' (spacc1): dim=0 must be at least 1"),
    (NodeKind.SPACC1, {"dim": 4, "buffers": 3}, "node 'x' (spacc1): buffers=3 must be 1 or 2"),
    (NodeKind.SPACC2, {"dim0": 2, "dim1": 2, "buffers": 0}, "node 'x' (spacc2): buffers=0 must be 1 or 2"),
    (NodeKind.SPACC2, {"dim0": 2, "dim1": 2, "buffers": "2"}, "node 'x' (spacc2): parameter 'buffers' must be an integer"),
    (NodeKind.LOCATE, {"dim": 0}, "node 'x' (locate): dim=0 must be at least 1"),
    (NodeKind.LOCATE, {}, "node 'x' (locate): missing parameter 'dim'"),
])
def test_bad_params_are_errors_naming_node_and_parameter(kind, params, message):
    with pytest.raises(GraphError) as exc:
        _tiny().add(kind, "x", **params)
    assert message in str(exc.value)


def test_graph_json_with_bad_params_lists_every_node(tmp_path):
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"nodes": [{"name": "a", "kind": "alu", "params": {"op": "pow"}},
                                       {"name": "b", "kind": "broadcast", "params": {"n": 2, "width": 3}},
                                       {"name": "c", "kind": "root"}]}))
    with pytest.raises(GraphError) as exc:
        Graph.load(p)
    msg = str(exc.value)
    assert str(p) in msg and "node 'a' (alu): op 'pow'" in msg and "node 'b' (broadcast): unknown parameter 'width'" in msg


def test_params_keep_their_json_form():
    """Loading coerces enums and lists but keeps numbers as written, so save(load(f)) == f."""
    g = _tiny()
    n = g.add(NodeKind.ALU, "x", op="mul_scalar", scalar=2)
    assert n.params == {"op": n.typed().op, "scalar": 2} and isinstance(n.params["scalar"], int)
    m = g.add(NodeKind.CRD_MASK, "m", pred="block", block=2, pattern=[[1, 0], [0, 1]])
    assert m.typed().pattern == ((1, 0), (0, 1))
    assert g.to_json()["nodes"][1]["params"] == {"pred": "block", "block": 2, "pattern": [[1, 0], [0, 1]]}


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
