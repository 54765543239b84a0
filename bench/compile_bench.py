"""Compile time and dataflow-order counts per program; sw_sim cycles unfused / partial / full
with the default lowering (factored iteration wherever it applies) and, for comparison, partial /
full with one iteration space per output (``factored=False``).

Run: ``python bench/compile_bench.py``.  Prints figures, asserts nothing (goal: < 100 ms per
program compile).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS / "compiler"), str(TESTS)]  # compiler_programs and its example_programs

import numpy as np
from compiler_programs import SUITE, random_inputs

from fuseflow.compiler import Fusion, compile_program, reference, run_program
from fuseflow.compiler.catalog import gcn_layer, nested_matmul
from sw_sim import run_graph


def compile_times(repeats: int = 5) -> None:
    print(f"{'program':20s} {'fusion':8s} {'graphs':>6s} {'compile ms':>10s} {'orders':>14s}")
    for name, case in SUITE.items():
        for fusion in (Fusion.UNFUSED, Fusion.FULL):
            times = []
            for _ in range(repeats):
                program = case.build()
                t0 = time.perf_counter()
                compiled = compile_program(program, fusion)
                times.append(time.perf_counter() - t0)
            orders = "/".join(f"{g.group.orders_count}{'+' if g.group.orders_capped else ''}"
                              for g in compiled.groups)
            print(f"{name:20s} {fusion.value:8s} {len(compiled.groups):6d} "
                  f"{statistics.median(times) * 1e3:10.2f} {orders:>14s}")


MODES = ((Fusion.UNFUSED, True), (Fusion.PARTIAL, True), (Fusion.FULL, True),
         (Fusion.PARTIAL, False), (Fusion.FULL, False))
HEAD = f"{'unfused':>9s} {'partial':>9s} {'full':>9s} {'p-global':>9s} {'f-global':>9s}"


def cycles(names: list[str], seeds: int = 3) -> None:
    """Total sw_sim cycles per fusion mode; "-global": one iteration space per output."""
    print(f"\n{'program':20s} {'seed':>4s} {HEAD} {'graphs':>10s}")
    for name in names:
        case = SUITE[name]
        for seed in range(seeds):
            program = case.build()
            data = random_inputs(program, case.density, seed)
            want = reference(program, data)
            row, graphs = [], []
            for fusion, factored in MODES:
                compiled = compile_program(program, fusion, factored=factored)
                result = run_program(compiled, data, simulate=run_graph)
                for k, v in want.items():
                    assert (result.dense(k) == v).all(), (name, fusion, k)
                row.append(result.total_cycles)
                graphs.append(str(len(compiled.graphs)))
            print(f"{name:20s} {seed:4d} " + " ".join(f"{c:9d}" for c in row)
                  + f" {'/'.join(graphs):>10s}")


def larger(n: int = 48, seed: int = 0) -> None:
    """Nested matmul and the GCN layer on n×n graphs (10% dense) with 16 features."""
    def nested():
        return nested_matmul(n, n, n, n)

    def gcn():
        return gcn_layer(n, 16, 8)

    rng = np.random.default_rng(seed)
    print(f"\n{n}x{n} graphs, 10% dense:     {HEAD}")
    for build in (nested, gcn):
        program = build()
        data = {}
        for name in program.inputs():
            shape = program.decls[name].shape
            a = rng.integers(-3, 4, shape)
            if name in "ABC":
                a[rng.random(shape) >= 0.1] = 0
            data[name] = a
        want = reference(program, data)
        row = []
        for fusion, factored in MODES:
            result = run_program(compile_program(program, fusion, factored=factored), data, simulate=run_graph)
            assert all((result.dense(k) == v).all() for k, v in want.items())
            row.append(result.total_cycles)
        print(f"{program.name:30s} " + " ".join(f"{c:9d}" for c in row))


if __name__ == "__main__":
    compile_times()
    cycles(["nested_matmul", "nested_matmul_cm", "gcn_layer", "graphsage_nbor", "two_outputs"])
    larger()
