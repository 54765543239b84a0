"""The board top in simulation: Verilator + cocotb with a UART model in place of the board.

:func:`simulate_board` builds (cached) :class:`fpga.board_top.BoardCore` for a graph and runs
:mod:`fpga.tb_board`, whose host side is :func:`fpga.host.run_on_board` — the driver of
``fuseflow-hw run``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from fuseflow.ir.overflow import Overflow, check_policy, enforce
from fuseflow.ir.samml import Graph
from fuseflow.ir.tensor import TensorData
from hw.build import to_verilog
from hw.elaborate import GraphTop, HwConfig
from hw.litedram import DramGraphTop, generate_core
from rtl_sim.dram import DRAM_WAIVERS
from rtl_sim.toolchain import run_cocotb, verilator_build

from .board_top import BoardCore
from .host import BoardResult, tensor_from_arrays

__all__ = ["SIM_DIVISOR", "simulate_board"]

SIM_DIVISOR = 8  # clock cycles per UART bit in simulation (the bridge needs >= 4)
_TOP = "fuseflow_board"


def _source_digest() -> str:
    """Hash of the RTL sources, so an edited primitive or bridge never reuses a stale build."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in sorted(
        [*(root / "hw").glob("*.py"), root / "fpga" / "uart.py", root / "fpga" / "board_top.py"]
    ):
        h.update(f.read_bytes())
    return h.hexdigest()


def simulate_board(
    graph: Graph,
    datasets: Sequence[Mapping[str, TensorData]],
    *,
    cfg: HwConfig | None = None,
    divisor: int = SIM_DIVISOR,
    on_overflow: str = "raise",
    dram: str | None = None,
) -> list[BoardResult]:
    """Run each dataset through the simulated board top, one after another, in one simulation.
    A flagged node raises :class:`~fuseflow.ir.overflow.NumericOverflowError` unless
    ``on_overflow`` is ``"report"`` (a warning) or ``"ignore"``.

    ``dram``: the tensors live in that board's DRAM (``cfg`` from :func:`rtl_sim.dram.dram_config`):
    the top has the generated LiteDRAM controller with LiteDRAM's SDRAM model behind it, and the
    host loads and reads the tensors over the UART through it."""
    check_policy(on_overflow)
    cfg = cfg or HwConfig()
    for data in datasets:
        graph.verify(data)
    digest = generate_core(dram, True)[1]["digest"] if dram else None
    key = hashlib.sha256(
        json.dumps(["board", graph.structure_hash(), repr(cfg), divisor, _source_digest(), dram, digest]).encode()
    ).hexdigest()[:16]

    def make() -> tuple[str, dict]:
        top = DramGraphTop(graph, cfg, dram, sim=True) if dram else GraphTop(graph, cfg)
        core = BoardCore(top, divisor)
        text = to_verilog(core, _TOP) + ("\n" + top.dram_verilog if dram else "")
        return text, {
            "memory_map": top.mmap.to_json(),
            "ident": core.ident,
            "graph": graph.to_json(),
            "divisor": divisor,
            "dram": dram,
        }

    bdir = verilator_build(key, make, _TOP, extra_args=DRAM_WAIVERS if dram else ())
    meta = json.loads((bdir / "meta.json").read_text())
    runs = [{"inputs": {t: data[t].arrays() for t in graph.input_tensors()}} for data in datasets]
    res = run_cocotb(bdir, _TOP, "fpga.tb_board", {"meta": meta, "runs": runs})
    out = []
    for r in res["results"]:
        outputs = {
            t: tensor_from_arrays(graph.tensors[t].shape, graph.tensors[t].fmt, arrays)
            for t, arrays in r["outputs"].items()
        }
        out.append(BoardResult(outputs, r["cycles"], r["polls"], r["overflow"], r["status"], r["load_bytes"],
                               r["resent"]))
        enforce([Overflow(n, 1, None, str(cfg.num)) for n in r["overflow"]], on_overflow,
                f"graph {graph.name!r} (simulated board)")
    return out
