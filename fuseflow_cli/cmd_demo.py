"""``fuseflow-hw demo``: the whole flow on built-in kernels in about a minute.

For SpMV and SpMM (CSR) at --size: numpy operands, sw_sim (checked against numpy), Verilog, and
the Verilated RTL (values and cycles checked against sw_sim).  Writes OUT/KERNEL/fuseflow_top.v,
memory_map.json, summary.json and graph.dot (the SAMML graph in Graphviz DOT).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from fuseflow.kernels import example
from hw import build_graph
from rtl_sim import run_graph as rtl_run
from sw_sim import run_graph

from .argtypes import MAX_SIZE, int_range
from .ui import print_table, spinner


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="numpy -> sw_sim -> Verilog -> Verilator on SpMV and SpMM (64x64)")
    p.add_argument("-o", "--out", default="fuseflow-demo", help="where to write the Verilog, memory maps and DOT graphs "
                   "(default ./fuseflow-demo)")
    p.add_argument("--size", type=int_range(1, MAX_SIZE), default=64,
                   help="matrix size N of the kernels (NxN operands; default 64)")
    p.add_argument("--no-rtl", action="store_true", help="skip the Verilator runs")


def _kernel(kernel: str, args, status) -> tuple[list, bool]:
    """One kernel through the flow: its table row and whether every check passed."""
    status(f"{kernel}: sw_sim")
    g, data, _, expected = example(kernel, args.size, seed=0)
    sw = run_graph(g, data)
    [name] = sw.outputs
    sw_ok = bool(np.array_equal(sw.outputs[name].to_dense(), expected))
    status(f"{kernel}: elaborating to Verilog")
    summary = build_graph(g, Path(args.out) / kernel)
    (Path(args.out) / kernel / "graph.dot").write_text(g.to_dot())
    row = [kernel, "PASS" if sw_ok else "FAIL", sw.cycles, f"{summary['verilog_lines']} lines"]
    if args.no_rtl:
        return row, sw_ok
    status(f"{kernel}: Verilator (the first run compiles the model)")
    t0 = time.time()
    rtl = rtl_run(g, data)
    rtl_ok = bool(np.array_equal(rtl.outputs[name].to_dense(), expected))
    row += ["PASS" if rtl_ok else "FAIL", rtl.cycles, f"{time.time() - t0:.0f} s"]
    return row, sw_ok and rtl_ok and rtl.cycles == sw.cycles


def run(args) -> int:
    rows, ok = [], True
    with spinner("demo") as status:
        for kernel in ("spmv", "spmm_csr"):
            row, passed = _kernel(kernel, args, status)
            rows.append(row)
            ok &= passed
            print(f"{kernel}: done", flush=True)
    header = ["kernel", "sw_sim vs numpy", "sw_sim cycles", "Verilog"]
    if not args.no_rtl:
        header += ["RTL vs numpy", "RTL cycles", "RTL wall"]
    print_table(rows, header)
    print(f"Verilog, memory maps and DOT graphs (graph.dot) in {args.out}/")
    return 0 if ok else 1
