"""A program whose result is a scalar (every index reduced): sw_sim, the CLI's --run and the
dense view of the 0-d result, checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from fuseflow.compiler import Program, compile_program, einsum, run_program
from fuseflow.ir.tensor import TensorData, TensorFormat
from fuseflow_cli.cli import main
from sw_sim import run_graph


@pytest.mark.parametrize("fmt", ["csr", "dense", "dcsr"])
def test_full_reduction_to_a_scalar_equals_numpy(fmt) -> None:
    rng = np.random.default_rng(5)
    a = (rng.random((6, 7)) < 0.4) * rng.integers(-9, 9, (6, 7))
    p = Program()
    A = p.tensor("A", a.shape, fmt)
    p.output(p.let("s", einsum("ij->", A)))
    res = run_program(compile_program(p), {"A": a}, simulate=run_graph)
    s = res.outputs["s"].to_dense()
    assert s.shape == () and int(s) == int(a.sum())


def test_zero_dimensional_tensor_data_round_trip() -> None:
    seven = TensorData.from_dense(np.array(7), TensorFormat((), ()))
    assert int(seven.to_dense()) == 7


def test_compile_run_with_a_scalar_result(tmp_path, capsys) -> None:
    prog = tmp_path / "total.py"
    prog.write_text(
        "import numpy as np\n"
        "from fuseflow.compiler import Program, einsum\n"
        "def program():\n"
        "    p = Program()\n"
        "    A = p.tensor('A', (4, 5), 'csr')\n"
        "    p.output(p.let('s', einsum('ij->', A)))\n"
        "    return p\n"
        "def example_data(seed=0):\n"
        "    rng = np.random.default_rng(seed)\n"
        "    return {'A': (rng.random((4, 5)) < 0.4) * rng.integers(1, 9, (4, 5))}\n")
    assert main(["compile", str(prog), "--run", "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert ": PASS" in out.out and "Traceback" not in out.err
