"""Compile time and dataflow-order counts per program; sw_sim cycles unfused / partial / full.

Run: ``python bench/compile_bench.py``.  Prints figures, asserts nothing (goal: < 100 ms per
program compile).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compiler"))

from programs import SUITE, random_inputs

from fuseflow.compiler import Fusion, compile_program, reference, run_program


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


def cycles(names: list[str], seeds: int = 3) -> None:
    print(f"\n{'program':20s} {'seed':>4s} {'unfused':>9s} {'partial':>9s} {'full':>9s} {'full/unf':>9s}")
    for name in names:
        case = SUITE[name]
        for seed in range(seeds):
            program = case.build()
            data = random_inputs(program, case.density, seed)
            want = reference(program, data)
            row = []
            for fusion in (Fusion.UNFUSED, Fusion.PARTIAL, Fusion.FULL):
                result = run_program(compile_program(program, fusion), data)
                for k, v in want.items():
                    assert (result.dense(k) == v).all(), (name, fusion, k)
                row.append(result.total_cycles)
            print(f"{name:20s} {seed:4d} {row[0]:9d} {row[1]:9d} {row[2]:9d} {row[2] / row[0]:9.2f}")


if __name__ == "__main__":
    compile_times()
    cycles(["nested_matmul", "nested_matmul_cm", "gcn_layer", "graphsage_nbor", "two_outputs"])
