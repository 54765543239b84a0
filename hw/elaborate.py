"""Graph elaboration: a verified SAMML graph -> one streaming RTL top with a host port.

Host port (one word per cycle, ``HOST_DW``-bit data): drive ``host_addr``/``host_wdata`` and
pulse ``host_we`` to write; ``host_rdata`` returns the word at the ``host_addr`` of the previous
cycle.  Address map (also written as ``memory_map.json`` by ``fuseflow-hw build``):

* ``0``: CTRL — write 1 to clear the datapath and start; read: bit 0 running, bit 1 done.
* ``1``: CYCLES — cycles from start to done (the RTL cycle count).
* ``2 + k``: the entry counts of the output arrays, in the map's ``lengths`` order (at most 64).
* ``66``: STATUS — sticky status of the run, cleared by the start: bit 0 *overflow*, some
  arithmetic node brought a data result into range (wrapped or saturated, see
  :mod:`hw.arith`); bit 1 *overrun*, some output array's length exceeds its region depth (its
  writer's address wrapped).  Both bits are registered ORs (one cycle behind their sources).
* ``67 + k``: OVERFLOW words — bit ``b`` of word ``k`` is the sticky flag of node
  ``overflow[32 k + b]``, the map's list of the nodes that can overflow (ALU, reduce and
  accumulator nodes whose operation can wrap or saturate, in topological order).  A graph
  without such nodes has no OVERFLOW words and its STATUS bit 0 is always 0.
* then one region per tensor array (``"A.1.seg"``, ``"A.vals"``, …), aligned to its size.
  Writing an input array updates every memory copy of it (one per node that reads it).

With an off-chip memory model (``HwConfig.memory``) the top also holds the memory controller
of ``hw.dram``, joined to the nodes' memory ports in ``fuseflow.ir.memory.plan_ports`` order; the
data still lives in the block RAMs (same memory map), only the timing changes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from math import prod
from typing import Any

from amaranth.hdl import Cat, Elaboratable, Module, Mux, ResetInserter, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from fuseflow.ir.memory import MAX_OUTPUT_ARRAYS
from fuseflow.ir.samml import PRIMITIVES, Graph, NodeKind, TensorSpec
from fuseflow.ir.tensor import Format

from . import registry
from .base import addr_bits
from .config import DEFAULT_HW, HwConfig
from .dram import Controller, bus_link
from .registry import HwBuild, Memories, stream_width
from .word import CTL_WIDTH

__all__ = [
    "CTL_WIDTH",
    "DEFAULT_HW",
    "HOST_DW",
    "GraphTop",
    "HwConfig",
    "MemoryMap",
    "PrimitiveHarness",
    "crd_width_needed",
    "make_primitive",
    "node_arrays",
    "tensor_arrays",
    "tensor_capacities",
]

HOST_DW = 32
REG_CTRL, REG_CYCLES, REG_LEN0 = 0, 1, 2
MAX_LENGTHS = MAX_OUTPUT_ARRAYS  # length registers 2 .. 65
REG_STATUS = REG_LEN0 + MAX_LENGTHS  # 66
REG_OVF0 = REG_STATUS + 1  # 67: the OVERFLOW words
STATUS_OVERFLOW, STATUS_OVERRUN = 1, 2  # STATUS bits
REG_END = max(16, 1 << addr_bits(REG_OVF0))  # 128: the first region address
MAX_OVERFLOW_NODES = HOST_DW * (REG_END - REG_OVF0)  # 61 words of 32 flags


def tensor_capacities(spec: TensorSpec, max_nnz: int | None = None) -> dict[str, int]:
    """Memory depth of each array of ``spec``: positions per level bounded by the dense size."""
    dims = [spec.level_dim(lvl) for lvl in range(spec.fmt.order)]
    caps: dict[str, int] = {}
    parent = 1
    for lvl, f in enumerate(spec.fmt.levels):
        if f is Format.DENSE:
            pos = parent * dims[lvl]
        elif f is Format.SINGLETON:  # one coordinate per parent position
            pos = parent
            caps[f"{lvl}.crd"] = max(pos, 1)
        else:
            # a non-unique level has a position per entry below it (at most the dense size,
            # unless coordinates repeat: then max_nnz must say how many)
            pos = prod(dims[: lvl + 1] if f.unique else dims)
            if max_nnz is not None:
                pos = min(pos, max_nnz) if f.unique else max_nnz
            caps[f"{lvl}.seg"] = parent + 1
            caps[f"{lvl}.crd"] = max(pos, 1)
        parent = pos
    caps["vals"] = max(parent, 1)
    return caps




def _node_memories(graph: Graph, cfg: HwConfig):
    """``(node, tensor, array, depth, width)`` of every tensor memory a node of ``graph`` holds,
    from the tensor sizes and ``cfg.max_nnz`` alone (nothing is built)."""
    caps = {t: tensor_capacities(s, cfg.nnz_for(t)) for t, s in graph.tensors.items()}
    for node in graph.nodes.values():
        use = node.spec.tensor
        if use is None:
            continue
        p = _node_hw_params(graph, node, caps)
        if not use.level:
            yield node, p["tensor"], "vals", p["vals_depth"], cfg.vw
            continue
        for array in ("seg", "crd"):
            if f"{array}_depth" in p:
                yield node, p["tensor"], array, p[f"{array}_depth"], cfg.cw


def tensor_arrays(graph: Graph, cfg: HwConfig) -> dict[str, tuple[str, int, int]]:
    """The tensor memories a top of ``graph`` holds, from the tensor sizes and ``cfg.max_nnz``
    alone (nothing is built): memory-map region -> ``(tensor, depth, width in bits)``, as
    :class:`GraphTop` will size them (its depths may round up)."""
    return {_array_name(node, array): (tensor, depth, width)
            for node, tensor, array, depth, width in _node_memories(graph, cfg)}


def node_arrays(graph: Graph, cfg: HwConfig) -> list[tuple[str, str, int, int, int]]:
    """Every tensor memory the RTL instantiates: ``(node, array, depth, width, read ports)`` per
    node that holds one (lanes and banks each hold their own copy, where :func:`tensor_arrays`
    lists the host's memory-map regions).  A scanner's ``seg`` is read at two positions a
    cycle (a fibre's start and end); every other array has one read port."""
    return [(node.name, array, depth, width, 2 if array == "seg" and not node.spec.sink else 1)
            for node, _tensor, array, depth, width in _node_memories(graph, cfg)]


def crd_width_needed(graph: Graph, max_nnz: tuple[tuple[str, int], ...] = ()) -> tuple[int, str, int]:
    """The narrowest crd / ref data width for ``graph``: every coordinate (below a level's
    dimension), position and reference (at most an array's capacity, see
    :func:`tensor_capacities`) must fit, and control words need :data:`CTL_WIDTH` bits.
    Returns ``(bits, tensor, largest value)``; the tensor is the one that sets the width."""
    caps = dict(max_nnz)
    best, who = 0, ""
    for name, spec in graph.tensors.items():
        dims = [spec.level_dim(lvl) for lvl in range(spec.fmt.order)]
        top = max([*dims, *tensor_capacities(spec, caps.get(name)).values()])
        if top > best:
            best, who = top, name
    return max(CTL_WIDTH, best.bit_length()), who, best


@dataclass
class Region:
    name: str  # "tensor.array"
    base: int
    size: int  # words (power of two)
    depth: int  # memory entries
    width: int
    access: str  # "w" (input, host writes) or "r" (output, host reads)


@dataclass
class MemoryMap:
    regions: list[Region] = field(default_factory=list)
    lengths: list[str] = field(default_factory=list)  # output arrays with a length register
    addr_width: int = 8
    overflow: list[str] = field(default_factory=list)  # nodes with an overflow flag, in bit order
    # banked outputs (the graph's ``banks``): tensor -> its bank tensors; level-0 position t of
    # the tensor is item t // n of bank t mod n (fuseflow.ir.banks assembles them)
    banks: dict[str, list[str]] = field(default_factory=dict)

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(f"no array {name!r} in the memory map; arrays: {[r.name for r in self.regions]}")

    def length_addr(self, name: str) -> int:
        return REG_LEN0 + self.lengths.index(name)

    @property
    def overflow_words(self) -> int:
        """How many OVERFLOW words (32 node flags each) the top has."""
        return -(-len(self.overflow) // HOST_DW)

    def flagged(self, words: list[int]) -> list[str]:
        """The nodes whose flag is set in the OVERFLOW ``words`` read back, in bit order."""
        return [n for k, n in enumerate(self.overflow) if words[k // HOST_DW] >> (k % HOST_DW) & 1]

    def to_json(self) -> dict:
        return {"addr_width": self.addr_width, "lengths": self.lengths,
                "registers": {"ctrl": REG_CTRL, "cycles": REG_CYCLES, "status": REG_STATUS,
                              "overflow": REG_OVF0},
                "overflow": self.overflow, "regions": [asdict(r) for r in self.regions],
                **({"banks": {t: {"tensors": bs, "interleave": f"level-0 position t of {t} is item "
                                                               f"t // {len(bs)} of bank t mod {len(bs)}"}
                              for t, bs in self.banks.items()}} if self.banks else {})}

    @classmethod
    def from_json(cls, d: dict) -> MemoryMap:
        return cls([Region(**r) for r in d["regions"]], list(d["lengths"]), d["addr_width"],
                   list(d.get("overflow", [])), {t: list(b["tensors"]) for t, b in d.get("banks", {}).items()})

    def add(self, name: str, depth: int, width: int, access: str) -> None:
        size = 1 << addr_bits(depth)
        end = max([r.base + r.size for r in self.regions], default=REG_END)
        base = (end + size - 1) // size * size
        self.regions.append(Region(name, base, size, depth, width, access))
        self.addr_width = max(self.addr_width, (base + size - 1).bit_length())


# --------------------------------------------------------------------------- primitive factory
def make_primitive(kind: NodeKind, params: dict[str, Any], cfg: HwConfig,
                   depths: dict[str, int] | None = None) -> tuple[wiring.Component, Memories]:
    """The RTL component of one node (the model registered for ``kind``) plus its host-visible
    memories.

    ``params`` are resolved parameters (``format``, ``dim`` and capacities ``seg_depth``,
    ``crd_depth``, ``vals_depth`` for memory primitives).  The second result maps array names
    (``seg``, ``crd``, ``vals``) to ``(port attribute, depth, width, access, length attribute)``.
    """
    return registry.build(kind, HwBuild(params, cfg, depths))


def _node_hw_params(graph: Graph, node, caps: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Node parameters plus what the tensor it names binds (by its declaration's tensor use):
    a level's ``format``, ``dim`` and (compressed) array capacities, or the values capacity."""
    params = node.all_params()
    use = node.spec.tensor
    if use is None:
        return params
    t = params["tensor"]
    if use.level:
        spec = graph.tensors[t]
        lvl = params["level"]
        params["format"] = spec.fmt.levels[lvl].value
        params["dim"] = spec.level_dim(lvl)
        f = spec.fmt.levels[lvl]
        if f.has_seg:
            params["seg_depth"] = caps[t][f"{lvl}.seg"]
        if f.has_crd:
            params["crd_depth"] = caps[t][f"{lvl}.crd"]
    else:
        params["vals_depth"] = caps[t]["vals"]
    return params


def _array_name(node, array: str) -> str:
    t = node.params["tensor"]
    if array == "vals":
        return f"{t}.vals"
    return f"{t}.{node.params['level']}.{array}"


# --------------------------------------------------------------------------- host bus
class _HostBus:
    """Decodes the host port onto memory ports and registers (shared by both tops)."""

    def __init__(self, mmap: MemoryMap) -> None:
        self.mmap = mmap
        self.writes: dict[str, list] = {}  # region -> [MemWrite-port interfaces]
        self.reads: dict[str, Any] = {}  # region -> MemRead-port interface
        self.lengths: dict[str, Any] = {}

    def elaborate(self, m: Module, top, extra_regs: dict[int, Any]) -> None:
        addr, wdata, we = top.host_addr, top.host_wdata, top.host_we
        def inside_of(r: Region):  # regions are aligned to their power-of-two size
            k = (r.size - 1).bit_length()
            return addr[k:] == (r.base >> k)

        for r in self.mmap.regions:
            inside = inside_of(r)
            off = addr[: addr_bits(r.depth)]
            for port in self.writes.get(r.name, []):
                m.d.comb += [port.addr.eq(off), port.data.eq(wdata), port.en.eq(we & inside)]
            if r.name in self.reads:
                m.d.comb += self.reads[r.name].addr.eq(off)
        # read: registered select, memory data arrives one cycle later
        sel = Signal(range(len(self.mmap.regions) + 2))
        reg_val = Signal(HOST_DW)
        regs = dict(extra_regs)
        for i, name in enumerate(self.mmap.lengths):
            regs[REG_LEN0 + i] = self.lengths[name]
        with m.Switch(addr):
            for a, v in regs.items():
                with m.Case(a):
                    m.d.sync += reg_val.eq(v)
            with m.Default():
                m.d.sync += reg_val.eq(0)
        m.d.sync += sel.eq(0)
        for i, r in enumerate(self.mmap.regions):
            if r.name in self.reads:
                with m.If(inside_of(r)):
                    m.d.sync += sel.eq(i + 1)
        with m.Switch(sel):
            with m.Case(0):
                m.d.comb += top.host_rdata.eq(reg_val)
            for i, r in enumerate(self.mmap.regions):
                if r.name in self.reads:
                    with m.Case(i + 1):
                        m.d.comb += top.host_rdata.eq(self.reads[r.name].data)


def _host_members(addr_width: int) -> dict:
    return {"host_addr": In(addr_width), "host_wdata": In(HOST_DW), "host_we": In(1),
            "host_rdata": Out(HOST_DW)}


class _Core(Elaboratable):
    def __init__(self) -> None:
        self.subs: dict[str, Elaboratable] = {}
        self.stmts: list = []

    def elaborate(self, platform):
        m = Module()
        for name, sub in self.subs.items():
            m.submodules[name] = sub
        m.d.comb += self.stmts
        return m


# --------------------------------------------------------------------------- graph top
class GraphTop(wiring.Component):
    """One streaming top for a whole SAMML graph (see the module docstring for the host port)."""

    def __init__(self, graph: Graph, cfg: HwConfig = DEFAULT_HW) -> None:
        graph.verify()
        need, tensor, top = crd_width_needed(graph, cfg.max_nnz)
        if cfg.cw < need:
            raise ValueError(f"crd/ref width {cfg.cw} is too narrow for graph {graph.name!r}: tensor "
                             f"{tensor!r} has coordinates or references up to {top}, which need "
                             f"{need} bits (use a width of at least {need})")
        self.graph, self.cfg = graph, cfg
        self.mem_ports = cfg.mem_ports(graph)
        mem_of: dict[str, dict[str, Any]] = {}
        for port in self.mem_ports:
            mem_of.setdefault(port.node, {})[port.array] = port
        self.caps = {t: tensor_capacities(s, cfg.nnz_for(t)) for t, s in graph.tensors.items()}
        self.mmap = MemoryMap(banks={t: list(bs) for t, bs in graph.banks.items()})
        self.core = _Core()
        self.bus = _HostBus(self.mmap)
        self.components: dict[str, wiring.Component] = {}
        self.writers: list[wiring.Component] = []
        self.roots: list[wiring.Component] = []
        depth_default = cfg.fifo_depth or graph.fifo_depth
        out_depths: dict[str, dict[str, int]] = {}
        for e in graph.edges:
            out_depths.setdefault(e.src.node, {})[e.src.port] = e.depth if e.depth is not None else depth_default
        for name in graph.topo_order():
            node = graph.nodes[name]
            depths = {p: out_depths.get(name, {}).get(p, depth_default) for p in node.outputs()}
            params = _node_hw_params(graph, node, self.caps)
            if name in mem_of:
                params["mem"] = mem_of[name]
            comp, mems = make_primitive(node.kind, params, cfg, depths)
            comp.ram_fifo_depth = cfg.ram_fifo_depth
            self.components[name] = comp
            self.core.subs[f"n_{name}"] = comp
            if node.spec.sink:
                self.writers.append(comp)
            if node.spec.source:
                self.roots.append(comp)
            for array, (attr, depth, width, access, length) in mems.items():
                region = _array_name(node, array)
                if region not in [r.name for r in self.mmap.regions]:
                    self.mmap.add(region, depth, width, access)
                if access == "w":
                    self.bus.writes.setdefault(region, []).append(getattr(comp, attr))
                else:
                    self.bus.reads[region] = getattr(comp, attr)
                    self.mmap.lengths.append(region)
                    self.bus.lengths[region] = getattr(comp, length)
        self._status_map()
        self._wire(graph, cfg)
        super().__init__({**_host_members(self.mmap.addr_width), "done": Out(1), "running": Out(1)})

    def _wire(self, graph: Graph, cfg: HwConfig) -> None:
        """Connect the nodes' streams along the graph's edges (checking both ends' widths),
        tie off discarded outputs and join the memory ports to the memory controller."""
        for e in graph.edges:
            src = getattr(self.components[e.src.node], f"o_{e.src.port}")
            dst = getattr(self.components[e.dst.node], f"i_{e.dst.port}")
            t = graph.edge_type(e)
            want = stream_width(t.kind, cfg, t.lanes) + 1  # lanes * vw data bits for a vector
            if len(src.payload) != want or len(dst.payload) != want:
                raise ValueError(f"edge {e}: a {t} stream is {want} bits wide, but the RTL models' ports are "
                                 f"{len(src.payload)} and {len(dst.payload)} bits")
            self.core.stmts += [dst.payload.eq(src.payload), dst.valid.eq(src.valid), src.ready.eq(dst.ready)]
        for d in graph.discards:
            self.core.stmts.append(getattr(self.components[d.node], f"o_{d.port}").ready.eq(1))
        if self.mem_ports:
            ctrl = self.core.subs["memory"] = Controller(cfg.memory, self.mem_ports, cfg.cw)
            for port in self.mem_ports:
                self.core.stmts += bus_link(getattr(ctrl, f"p{port.index}"),
                                            getattr(self.components[port.node], f"mem_{port.array}"))

    def elaborate(self, platform):
        m = Module()
        start = Signal()
        running = Signal()
        cycles = Signal(32)
        done = Signal()
        # The start write is registered: the clear fans out to every register of the datapath,
        # so it starts at a flip-flop (not at the host address decode).  While it is pending,
        # CTRL already reads "running" so a poll right after the write never sees the last run's
        # done.  Cycles are counted from the clear, so the count does not change.
        m.d.sync += start.eq(self.host_we & (self.host_addr == REG_CTRL) & self.host_wdata[0])
        m.submodules.core = ResetInserter({"sync": start})(self.core)
        all_done = 1
        for w in self.writers:
            all_done = all_done & w.done
        m.d.comb += [done.eq(running & all_done), self.done.eq(done), self.running.eq(running)]
        for r in self.roots:
            m.d.comb += r.go.eq(running)
        with m.If(start):
            m.d.sync += [running.eq(1), cycles.eq(0)]
        with m.Elif(running & ~all_done):
            m.d.sync += cycles.eq(cycles + 1)
        regs = {REG_CTRL: Mux(start, 1, (done << 1) | running), REG_CYCLES: cycles, **self._status(m, start)}
        self.bus.elaborate(m, self, regs)
        return m

    def _status_map(self) -> None:
        """The nodes with an overflow flag, in bit order (topological), into the memory map;
        the host port's register space bounds them and the length registers."""
        self.mmap.overflow = [n for n, c in self.components.items() if hasattr(c, "overflow")]
        name = self.graph.name
        if len(self.mmap.lengths) > MAX_LENGTHS:
            raise ValueError(f"graph {name!r} has {len(self.mmap.lengths)} output arrays; the host port "
                             f"has length registers for {MAX_LENGTHS}")
        if len(self.mmap.overflow) > MAX_OVERFLOW_NODES:
            raise ValueError(f"graph {name!r} has {len(self.mmap.overflow)} nodes that can overflow; the "
                             f"host port has status flags for {MAX_OVERFLOW_NODES}")

    def _status(self, m: Module, start: Signal) -> dict[int, Any]:
        """The STATUS register and the OVERFLOW words (module docstring).  The node flags are
        the nodes' sticky registers (cleared by the start with the datapath); STATUS holds
        registered ORs of them and of the writers' ``length > depth``, cleared by the start
        too, so the OR trees end at a flip-flop."""
        flags = [self.components[n].overflow for n in self.mmap.overflow]
        over = [self.bus.lengths[name] > self.mmap.region(name).depth for name in self.mmap.lengths]
        overflow, overrun = Signal(name="status_overflow"), Signal(name="status_overrun")
        for bit, sources in ((overflow, flags), (overrun, over)):
            if sources:
                m.d.sync += bit.eq(Mux(start, 0, Cat(*sources).any()))
        regs: dict[int, Any] = {REG_STATUS: Cat(overflow, overrun)}
        for k in range(self.mmap.overflow_words):
            regs[REG_OVF0 + k] = Cat(*flags[HOST_DW * k: HOST_DW * (k + 1)])
        return regs

    def summary(self) -> dict:
        counts: dict[str, int] = {}
        for n in self.graph.nodes.values():
            counts[n.kind.value] = counts.get(n.kind.value, 0) + 1
        return {"graph": self.graph.name, "nodes": len(self.graph.nodes), "edges": len(self.graph.edges),
                "primitives": counts, "config": asdict(self.cfg), "memory_map": self.mmap.to_json(),
                "memory_ports": [f"{p.node}.{p.array} ({p.key})" for p in self.mem_ports]}


# --------------------------------------------------------------------------- primitive harness
class PrimitiveHarness(wiring.Component):
    """One primitive behind input FIFOs, for stream-level tests.

    Ports: ``in_<port>`` (stream into a FIFO of ``depth`` feeding the primitive), ``out_<port>``
    (the primitive's outputs), ``go`` (roots), ``done`` (writers), ``overflow`` (the sticky
    overflow flag of a primitive that has one, :mod:`hw.arith`) and the host port for the
    primitive's memories (regions ``seg``, ``crd``, ``vals``).
    """

    def __init__(self, kind: NodeKind, params: dict[str, Any], cfg: HwConfig = DEFAULT_HW, depth: int = 2) -> None:
        spec = PRIMITIVES[kind]
        pv = spec.view(params)
        self.kind, self.cfg, self.depth = kind, cfg, depth
        ins, outs = spec.port_types(pv)
        self.in_ports = {p: stream_width(t.kind, cfg, t.lanes) for p, t in ins.items()}
        self.out_ports = {p: stream_width(t.kind, cfg, t.lanes) for p, t in outs.items()}
        self.prim, mems = make_primitive(kind, pv, cfg, {p: depth for p in self.out_ports})
        self.mmap = MemoryMap()
        self.bus = _HostBus(self.mmap)
        for array, (attr, mdepth, width, access, length) in mems.items():
            self.mmap.add(array, mdepth, width, access)
            if access == "w":
                self.bus.writes[array] = [getattr(self.prim, attr)]
            else:
                self.bus.reads[array] = getattr(self.prim, attr)
                self.mmap.lengths.append(array)
                self.bus.lengths[array] = getattr(self.prim, length)
        members = _host_members(self.mmap.addr_width)
        for p, w in self.in_ports.items():
            members[f"in_{p}"] = In(stream.Signature(w + 1))
        for p, w in self.out_ports.items():
            members[f"out_{p}"] = Out(stream.Signature(w + 1))
        members["go"] = In(1)
        members["done"] = Out(1)
        if hasattr(self.prim, "overflow"):
            members["overflow"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.prim = self.prim
        for p, w in self.in_ports.items():
            f = fifo.SyncFIFO(width=w + 1, depth=self.depth)
            m.submodules[f"fifo_{p}"] = f
            wiring.connect(m, wiring.flipped(getattr(self, f"in_{p}")), f.w_stream)
            wiring.connect(m, f.r_stream, getattr(self.prim, f"i_{p}"))
        for p in self.out_ports:
            wiring.connect(m, wiring.flipped(getattr(self, f"out_{p}")), getattr(self.prim, f"o_{p}"))
        if hasattr(self.prim, "go"):
            m.d.comb += self.prim.go.eq(self.go)
        if hasattr(self.prim, "done"):
            m.d.comb += self.done.eq(self.prim.done)
        if hasattr(self.prim, "overflow"):
            m.d.comb += self.overflow.eq(self.prim.overflow)
        self.bus.elaborate(m, self, {})
        return m


def memory_map_json(top: GraphTop | PrimitiveHarness) -> str:
    return json.dumps(top.mmap.to_json(), indent=1)
