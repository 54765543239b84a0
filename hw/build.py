"""Verilog emission for graph tops and primitive harnesses."""

from __future__ import annotations

import json
from pathlib import Path

from amaranth.back import verilog

from fuseflow.ir.samml import Graph

from .elaborate import DEFAULT_HW, GraphTop, HwConfig

__all__ = ["build_graph", "to_verilog"]


def to_verilog(top, name: str) -> str:
    return verilog.convert(top, name=name, emit_src=False)


def build_graph(graph: Graph, outdir: str | Path, cfg: HwConfig = DEFAULT_HW, name: str = "fuseflow_top") -> dict:
    """Write ``<name>.v``, ``memory_map.json`` and ``summary.json`` for ``graph``; return the summary."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    top = GraphTop(graph, cfg)
    text = to_verilog(top, name)
    (out / f"{name}.v").write_text(text)
    (out / "memory_map.json").write_text(json.dumps(top.mmap.to_json(), indent=1) + "\n")
    summary = top.summary() | {"top": name, "verilog": f"{name}.v", "verilog_lines": text.count("\n")}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    graph.save(out / "graph.json")
    return summary
