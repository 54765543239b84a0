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

from fuseflow.compiler.runner import initial_tensors, permuted_copy, program_result
from fuseflow.ir.overflow import check_policy
from fuseflow.ir.samml import Graph
from fuseflow.models.steps import CompilerStep
from hw.build import to_verilog
from hw.dram_model import ModelTop
from hw.elaborate import HwConfig, MemoryMap
from rtl_sim.dram import DRAM_WAIVERS, dram_config

from .board_pipe import PipeBoard, pipe_build
from .board_top import BoardCore, config_to_json
from .host import BoardLink, check_ident, load_inputs, poll_done, read_results, region_tensor, run_on_board

__all__ = ["BoardModel", "GraphRun", "SequenceRun", "build_model_top", "host_work", "model_graphs", "model_hw_config",
           "model_sequences"]

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


def _sim_run(res, numerics) -> SimpleNamespace:
    """A board result as a simulator's (:class:`fuseflow.ir.simulator.SimRun`)."""
    return SimpleNamespace(outputs=res.outputs, cycles=res.cycles, overflows={n: 1 for n in res.overflow},
                           numerics=numerics)


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
        host = top.host_map()
        meta = {"memory_map": {"addr_width": top.addr_width}, "ident": core.ident, "divisor": divisor,
                "dram_bytes": top.allocator.next, "sequencer": host["sequencer"], "graphs": host["graphs"]}
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
    it found in DRAM (written there by an earlier graph, or loaded for one) and those loaded;
    ``sequence``: the index of the on-chip sequence it ran in (``None``: started by the host)."""

    graph: str
    cycles: int
    load_bytes: int
    from_dram: list[str] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    sequence: int | None = None


@dataclass
class SequenceRun:
    """Graphs the on-chip sequencer ran back to back: their names and the cycles from its start
    to the last graph's done (the graphs' own cycles and the gaps between them)."""

    graphs: list[str]
    cycles: int


class BoardModel:
    """The model top of build ``meta`` behind ``transport`` as a simulator for
    :func:`fuseflow.models.run.run_model`: :meth:`simulate` runs one graph on the board, and
    :meth:`run_program` the graphs of a compiler step, back to back on the on-chip sequencer
    where nothing has to happen on the host between them."""

    def __init__(self, transport, meta: dict) -> None:
        self.link = BoardLink(transport)
        self.meta = meta
        self.graphs = {g["name"]: g for g in meta["graphs"]}
        self.order = [g["name"] for g in meta["graphs"]]
        self.in_dram: dict[str, tuple[int, int]] = {}  # region -> (DRAM base, id of the tensor written)
        self.runs: list[GraphRun] = []
        self.sequences: list[SequenceRun] = []
        self._checked = False
        self._written: list = []  # keeps the tensors the board wrote alive (their ids are keys)
        self.progress = None  # progress(done, total) of each graph's load (fpga.host.run_on_board)

    def _graph(self, graph: Graph) -> tuple[dict, MemoryMap]:
        g = self.graphs.get(graph.name)
        if g is None:
            raise ValueError(f"graph {graph.name!r} is not in this model top ({', '.join(self.graphs)})")
        return g, MemoryMap.from_json(g["memory_map"])

    def _regions(self, graph: Graph, t: str, access: str) -> list[str]:
        """The names of ``graph``'s memory regions of tensor ``t`` the host writes (``"w"``,
        its inputs) or reads (``"r"``, its outputs)."""
        _, mmap = self._graph(graph)
        return [r.name for r in mmap.regions if r.access == access and region_tensor(r.name) == t]

    def _resident(self, graph: Graph, data) -> set[str]:
        """The inputs of ``graph`` in DRAM already: in every region, the same tensor (written by
        an earlier graph, or loaded for one)."""
        layout = self._graph(graph)[0]["layout"]
        out = set()
        for t in graph.input_tensors():
            regions = self._regions(graph, t, "w")
            if t in data and regions and all(r in layout and self.in_dram.get(r) == (layout[r], id(data[t]))
                                             for r in regions):
                out.add(t)
        return out

    def _record(self, graph: Graph, now: dict) -> None:
        """``now`` (tensor -> data) is in ``graph``'s DRAM slots: the outputs it wrote and the
        inputs the host loaded (no graph writes an input's slot)."""
        g, mmap = self._graph(graph)
        for t, td in now.items():
            self._written.append(td)
            for r in mmap.regions:
                if region_tensor(r.name) == t and r.name in g["layout"]:
                    self.in_dram[r.name] = (g["layout"][r.name], id(td))

    def _ident(self) -> int | None:
        ident = None if self._checked else self.meta["ident"]
        self._checked = True
        return ident

    def simulate(self, graph: Graph, data, numerics=None, **_):
        g, mmap = self._graph(graph)
        resident = self._resident(graph, data)
        link = _OffsetLink(self.link, g["base"])
        res = asyncio.run(run_on_board(link, graph, data, mmap, self._ident(), on_overflow="ignore",
                                       skip=frozenset(resident), progress=self.progress))
        self._record(graph, {**{t: data[t] for t in graph.input_tensors() if t not in resident}, **res.outputs})
        self.runs.append(GraphRun(graph.name, res.cycles, res.load_bytes, sorted(resident),
                                  sorted(set(graph.input_tensors()) - resident)))
        return _sim_run(res, numerics)

    def run_program(self, compiled, data, *, numerics=None, on_overflow="raise", **_):
        """The graphs of ``compiled`` (a compiler step's program) on the board, as
        :func:`fuseflow.compiler.runner.run_program` runs them: each longest run of graphs
        that :meth:`sequence` allows goes to the on-chip sequencer in one start; the permuted
        copies the program makes between graphs are made on the host."""
        check_policy(on_overflow)
        return program_result(compiled, self._program_runs(compiled, data, numerics))

    def _program_runs(self, compiled, data, numerics):
        tensors = initial_tensors(compiled, data)
        graphs = [cg.graph for cg in compiled.groups]
        i = 0
        while i < len(graphs):
            seg = self.sequence(compiled, graphs, i)
            if len(seg) == 1:
                runs = [(seg[0], self.simulate(seg[0], {t: tensors[t] for t in seg[0].input_tensors()}, numerics))]
            else:
                runs = self._run_sequence(seg, tensors, numerics)
            for g, res in runs:
                yield g, res
                tensors.update(res.outputs)
                for p in compiled.permuted:
                    if p.source in res.outputs:
                        tensors[p.name] = permuted_copy(res.outputs[p.source], p.fmt)
            i += len(seg)

    def sequence(self, compiled, graphs: list[Graph], i: int) -> list[Graph]:
        """The longest run of ``graphs`` from ``i`` that the sequencer can run in one start:
        consecutive in the top, and every input of a later graph that an earlier one writes is
        read from the DRAM slots it was written to (not on chip in either graph, and not a
        permuted copy, which the host makes)."""
        seg = [graphs[i]]
        writer: dict[str, Graph] = {t: graphs[i] for t in graphs[i].output_tensors()}
        for h in graphs[i + 1:]:
            k = self.order.index(seg[-1].name)
            if k + 1 >= len(self.order) or self.order[k + 1] != h.name or not self._follows(compiled, writer, h):
                break
            seg.append(h)
            writer.update({t: h for t in h.output_tensors()})
        return seg

    def _follows(self, compiled, writer: dict[str, Graph], h: Graph) -> bool:
        copies = {p.name for p in compiled.permuted if p.source in writer}
        layout = self._graph(h)[0]["layout"]
        for t in h.input_tensors():
            if t in copies:
                return False
            if t in writer:
                wrote = self._graph(writer[t])[0]["layout"]
                regions = self._regions(h, t, "w")
                if not regions or any(r not in layout or wrote.get(r) != layout[r] for r in regions):
                    return False
        return True

    def _run_sequence(self, seg: list[Graph], tensors: dict, numerics) -> list:
        """Load every input of ``seg``'s graphs that no graph of it writes and that is not in
        DRAM already, start the sequencer over them, wait, and read each graph's results."""
        return asyncio.run(self._sequence_async(seg, tensors, numerics))

    async def _sequence_async(self, seg: list[Graph], tensors: dict, numerics) -> list:
        seq = self.meta["sequencer"]
        ident = self._ident()
        if ident is not None:
            await check_ident(self.link, ident, f"model top {', '.join(self.order)}")
        written: set[str] = set()
        plans = []
        for g in seg:
            meta, mmap = self._graph(g)
            link = _OffsetLink(self.link, meta["base"])
            data = {t: tensors[t] for t in g.input_tensors() if t not in written}
            resident = self._resident(g, data) | (set(g.input_tensors()) & written)
            load_bytes, _ = await load_inputs(link, g, data, mmap, progress=self.progress,
                                              skip=frozenset(resident))
            self._record(g, {t: data[t] for t in g.input_tensors() if t not in resident})
            plans.append((g, link, mmap, resident, load_bytes))
            written |= set(g.output_tensors())
        first, last = self.order.index(seg[0].name), self.order.index(seg[-1].name)
        seq_link = _OffsetLink(self.link, seq["base"])
        await seq_link.write(seq["ctrl"], 1 | (first << 8) | (last << 16))
        await poll_done(seq_link, seq["ctrl"], 2, 1_000_000, f"the sequence of graphs {first}..{last}")
        self.sequences.append(SequenceRun([g.name for g in seg], await seq_link.read(seq["cycles"])))
        out = []
        for g, link, mmap, resident, load_bytes in plans:
            res = await read_results(link, g, mmap, on_overflow="ignore")
            self._record(g, res.outputs)
            self.runs.append(GraphRun(g.name, res.cycles, load_bytes, sorted(resident),
                                      sorted(set(g.input_tensors()) - resident), len(self.sequences) - 1))
            out.append((g, _sim_run(res, numerics)))
        return out

    @classmethod
    def simulated(cls, bdir: Path, meta: dict) -> tuple[BoardModel, PipeBoard]:
        """The model top of a :func:`build_model_top` build, in Verilator behind a pipe."""
        board = PipeBoard(bdir, meta["divisor"])
        return cls(board, meta), board


def model_sequences(cm, meta: dict) -> list[list[str]]:
    """The graphs of compiled model ``cm`` as the board top of ``meta`` (its host map) runs
    them: each list the graphs one start of the on-chip sequencer runs (one graph: the host
    starts it), in order (:meth:`BoardModel.sequence`)."""
    bm = BoardModel(None, meta)
    out: list[list[str]] = []
    for step in cm.steps:
        if isinstance(step, CompilerStep):
            graphs = [cg.graph for cg in step.compiled.groups]
            i = 0
            while i < len(graphs):
                seg = bm.sequence(step.compiled, graphs, i)
                out.append([g.name for g in seg])
                i += len(seg)
        else:
            out += [[g.name] for g in step.graphs]
    return out


def host_work(cm) -> list[str]:
    """What the host does between the graphs of compiled model ``cm`` on a board: its host steps
    (graph breaks, conversions, data movement) and the permuted copies a compiled program makes
    of a tensor one of its graphs writes."""
    out = []
    for step in cm.steps:
        if isinstance(step, CompilerStep):
            written = {t for cg in step.compiled.groups for t in cg.graph.output_tensors()}
            out += [f"permuted copy {p.name} of {p.source}" for p in step.compiled.permuted if p.source in written]
        elif not step.graphs:
            out.append(f"{step.kind}: {step.label()}")
    return out


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
