"""A whole compiled model on one board top: every graph in :class:`hw.dram_model.ModelTop`, run
through the host driver over the UART (``docs/board.md``).

The host runs the model's steps in order (:func:`fuseflow.models.run.run_model`, the same loop
sw_sim's runs take), with the board as the simulator of each graph: it loads the graph's inputs
into DRAM, starts the graph, waits for it and reads its outputs back.  An input that an earlier
graph of the model wrote (or the host loaded for an earlier graph) into the same DRAM slot, and
that no host step changed since, is not loaded again: the intermediate stays in DRAM and the graph reads what the earlier one wrote.
Host steps (graph breaks, format conversions) run on the host between graphs, on the values read
back.  The sequencing is the host's: it starts each graph over the link.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

from fuseflow.ir.samml import Graph
from hw.build import to_verilog
from hw.dram_model import ModelTop
from hw.elaborate import HwConfig, MemoryMap
from rtl_sim.dram import DRAM_WAIVERS, dram_config

from .board_pipe import PipeBoard, pipe_build
from .board_top import BoardCore, config_to_json
from .host import BoardLink, region_tensor, run_on_board

__all__ = ["BoardModel", "GraphRun", "build_model_top", "model_graphs", "model_hw_config"]

_TOP = "fuseflow_board"


def model_graphs(cm) -> list[Graph]:
    """The graphs of compiled model ``cm`` in run order (names must be unique: the host finds a
    graph's place in the top by its name)."""
    graphs = list(cm.graphs)
    names = [g.name for g in graphs]
    if len(set(names)) != len(names):
        raise ValueError(f"model {cm.ir.name}: graph names repeat ({names}); cannot place them in one top")
    return graphs


def _source_digest() -> str:
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in sorted([*(root / "hw").glob("*.py"), root / "fpga" / "uart.py", root / "fpga" / "board_top.py",
                     root / "fpga" / "board_pipe.py"]):
        h.update(f.read_bytes())
    return h.hexdigest()


def build_model_top(graphs: list[Graph], cfg: HwConfig, board: str, divisor: int) -> tuple[Path, dict]:
    """The cached Verilator build of ``graphs`` in one board top (LiteDRAM's SDRAM model behind the
    controller), with the pipe harness; its meta: per graph the host base, memory map and DRAM
    layout, and the design's ident."""
    key = hashlib.sha256(json.dumps(["model-top", [g.structure_hash() for g in graphs], config_to_json(cfg),
                                     cfg.onchip, cfg.memory.to_json(), board, divisor, _source_digest()],
                                    sort_keys=True).encode()).hexdigest()[:16]

    def make():
        top = ModelTop(graphs, cfg, board, sim=True)
        core = BoardCore(top, divisor)
        text = to_verilog(core, _TOP) + "\n" + top.dram_verilog
        meta = {"memory_map": {"addr_width": top.addr_width}, "ident": core.ident, "divisor": divisor,
                "dram_bytes": top.allocator.next,
                "graphs": [{"name": s.graph.name, "base": top.graph_base(k), "memory_map": s.mmap.to_json(),
                            "layout": {r: v.base for r, v in s.layout.items()}}
                           for k, s in enumerate(top.subs)]}
        return text, meta

    return pipe_build(key, make, DRAM_WAIVERS)


class _OffsetLink:
    """A :class:`fpga.host.BoardLink` seen from one graph of a model top: every host address
    moved up by the graph's base."""

    def __init__(self, link: BoardLink, base: int) -> None:
        self.link, self.base = link, base

    def __getattr__(self, name):
        return getattr(self.link, name)

    async def write_words(self, addr, words, progress=None):
        await self.link.write_words(self.base + addr, words, progress)

    async def read_words(self, addr, n):
        return await self.link.read_words(self.base + addr, n)

    async def read(self, addr):
        return await self.link.read(self.base + addr)

    async def write(self, addr, word):
        await self.link.write(self.base + addr, word)


@dataclass
class GraphRun:
    """One graph's run on the board: its cycles, the bytes its load sent, the input tensors
    it found in DRAM (written there by an earlier graph, or loaded for one) and those loaded."""

    graph: str
    cycles: int
    load_bytes: int
    from_dram: list[str] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)


class BoardModel:
    """The model top of build ``meta`` behind ``transport`` as a simulator for
    :func:`fuseflow.models.run.run_model`: :meth:`simulate` runs one graph on the board."""

    def __init__(self, transport, meta: dict) -> None:
        self.link = BoardLink(transport)
        self.meta = meta
        self.graphs = {g["name"]: g for g in meta["graphs"]}
        self.in_dram: dict[str, tuple[int, int]] = {}  # region -> (DRAM base, id of the tensor written)
        self.runs: list[GraphRun] = []
        self._checked = False
        self._written: list = []  # keeps the tensors the board wrote alive (their ids are keys)
        self.progress = None  # progress(done, total) of each graph's load (fpga.host.run_on_board)

    def simulate(self, graph: Graph, data, numerics=None, **_):
        g = self.graphs.get(graph.name)
        if g is None:
            raise ValueError(f"graph {graph.name!r} is not in this model top ({', '.join(self.graphs)})")
        mmap = MemoryMap.from_json(g["memory_map"])
        layout = g["layout"]
        resident = set()
        for t in graph.input_tensors():
            regions = [r.name for r in mmap.regions if r.access == "w" and region_tensor(r.name) == t]
            if regions and all(r in layout and self.in_dram.get(r) == (layout[r], id(data[t])) for r in regions):
                resident.add(t)
        link = _OffsetLink(self.link, g["base"])
        ident = None if self._checked else self.meta["ident"]
        res = asyncio.run(run_on_board(link, graph, data, mmap, ident, on_overflow="ignore",
                                       skip=frozenset(resident), progress=self.progress))
        self._checked = True
        # what is in DRAM now: the outputs the graph wrote, and the inputs the host loaded
        # (no graph writes an input's slot)
        now = {**{t: data[t] for t in graph.input_tensors() if t not in resident}, **res.outputs}
        for t, td in now.items():
            self._written.append(td)
            for r in mmap.regions:
                if region_tensor(r.name) == t and r.name in layout:
                    self.in_dram[r.name] = (layout[r.name], id(td))
        self.runs.append(GraphRun(graph.name, res.cycles, res.load_bytes, sorted(resident),
                                  sorted(set(graph.input_tensors()) - resident)))
        return SimpleNamespace(outputs=res.outputs, cycles=res.cycles, overflows={n: 1 for n in res.overflow},
                               numerics=numerics)

    @classmethod
    def simulated(cls, bdir: Path, meta: dict) -> tuple[BoardModel, PipeBoard]:
        """The model top of a :func:`build_model_top` build, in Verilator behind a pipe."""
        board = PipeBoard(bdir, meta["divisor"])
        return cls(board, meta), board


def model_hw_config(cm, ir, cfg: HwConfig, board: str, *, onchip=(), min_bytes: int = 64) -> HwConfig:
    """The hardware config of compiled model ``cm`` on board ``board``'s DRAM: ``cfg``'s widths
    and numerics, each model input's capacity its stored values in the traced data (the data a
    run loads; the intermediates keep their dense capacity), and one placement over all the
    graphs: every tensor in DRAM but the ``onchip`` ones and those the rule of
    :func:`hw.litedram.dram_placement` keeps on chip in some graph."""
    nnz = dict(cfg.max_nnz)
    for n in ir.nodes:
        if n.name in ir.data and n.name not in nnz:
            v = ir.data[n.name]
            nnz[n.name] = max(1, int(v.nnz) if sp.issparse(v) else int(np.count_nonzero(np.asarray(v))))
    base = replace(cfg, max_nnz=tuple(sorted(nnz.items())))
    keep: set[str] = set()
    for g in model_graphs(cm):
        mine = replace(base, max_nnz=tuple((t, k) for t, k in base.max_nnz if t in g.tensors))
        keep |= set(dram_config(g, mine, board, onchip=[t for t in onchip if t in g.tensors],
                                min_bytes=min_bytes).onchip)
    return replace(dram_config(model_graphs(cm)[0], base, board), onchip=tuple(sorted(keep)))
