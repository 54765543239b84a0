"""Base of the RTL primitives and the memory-port signatures they share.

Every primitive is a ``wiring.Component``.  Input ports are ``i_<port>``, output ports are
``o_<port>``, both ``amaranth.lib.stream`` interfaces carrying SAMML words.  Each output is the
read side of a FIFO with ``SyncFIFO`` timing inside the primitive (:mod:`hw.fifo`), so an
output's ``valid`` and ``payload`` come from registers (never from ``ready``) and stay stable
until taken — the channel FIFO of the timing contract.  (``Root`` offers its two tokens from its
state register instead, which its consumer cannot tell apart.)  A primitive's input ``ready``
is its decision to pop this cycle.
"""

from __future__ import annotations

from amaranth.hdl import Module, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .fifo import HeadFIFO, RamFIFO
from .word import check_width

__all__ = ["MemRead", "MemWrite", "StreamPrimitive", "addr_bits"]


def addr_bits(depth: int) -> int:
    """Address width of a memory of ``depth`` entries (at least 1): ``ceil_log2(depth)``, not
    ``amaranth.utils.bits_for`` (the width that holds the value ``depth``)."""
    return max(1, (max(depth, 1) - 1).bit_length())


def MemWrite(addr_width: int, data_width: int) -> wiring.Signature:
    """Host -> memory write port (seen from the host)."""
    return wiring.Signature({"addr": Out(addr_width), "data": Out(data_width), "en": Out(1)})


def MemRead(addr_width: int, data_width: int) -> wiring.Signature:
    """Host -> memory read port (seen from the host); data one cycle after addr."""
    return wiring.Signature({"addr": Out(addr_width), "data": In(data_width)})


class StreamPrimitive(wiring.Component):
    """Ports from ``ins``/``outs`` (name -> data width); ``depths`` sets each output FIFO.
    Output FIFOs at least ``ram_fifo_depth`` deep (``HwConfig.ram_fifo_depth``) are
    :class:`hw.fifo.RamFIFO` (block RAM), the others :class:`hw.fifo.HeadFIFO` (head
    register); both have the port timing of Amaranth's ``SyncFIFO``."""

    ram_fifo_depth: int | None = None

    def __init__(self, ins: dict[str, int], outs: dict[str, int], depths: dict[str, int] | None = None,
                 extra: dict | None = None) -> None:
        name = type(self).__name__
        for port, w in {**ins, **outs}.items():
            try:
                check_width(w)
            except ValueError as exc:
                raise ValueError(f"{name}: port {port!r}: {exc}") from None
        for port, d in (depths or {}).items():
            if port not in outs:
                raise ValueError(f"{name}: a FIFO depth for {port!r}, which is not an output ({', '.join(outs)})")
            if not isinstance(d, int) or isinstance(d, bool) or d < 1:
                raise ValueError(f"{name}: output {port!r} FIFO depth {d!r}: must be an integer of at least 1")
        members: dict = {}
        for n, w in ins.items():
            members[f"i_{n}"] = In(stream.Signature(w + 1))
        for n, w in outs.items():
            members[f"o_{n}"] = Out(stream.Signature(w + 1))
        members.update(extra or {})
        self.in_widths = dict(ins)
        self.out_widths = dict(outs)
        self.depths = {n: (depths or {}).get(n, 2) for n in outs}
        super().__init__(members)

    # -- used by subclasses inside logic() --------------------------------------------------
    def elaborate(self, platform) -> Module:
        m = Module()
        self._platform = platform  # the build target (None in simulation): hw.dsp picks its blocks by it
        self._fifos: dict[str, RamFIFO | HeadFIFO] = {}
        for n, w in self.out_widths.items():
            d = self.depths[n]
            if self.ram_fifo_depth is not None and d >= max(self.ram_fifo_depth, 2):
                f = RamFIFO(width=w + 1, depth=d)
            else:
                f = HeadFIFO(width=w + 1, depth=d)
            m.submodules[f"fifo_{n}"] = f
            port = getattr(self, f"o_{n}")
            m.d.comb += [port.payload.eq(f.r_data), port.valid.eq(f.r_rdy), f.r_en.eq(port.ready)]
            self._fifos[n] = f
        self.logic(m)
        return m

    def logic(self, m: Module) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def room(self, *names: str) -> Value:
        """All named outputs (default: all) can take a token this cycle (registered ``w_rdy``)."""
        acc: Value | int = 1
        for n in names or tuple(self.out_widths):
            acc = acc & self._fifos[n].w_rdy
        return Value.cast(acc)

    def push(self, m: Module, name: str, word: Value | int | None = None) -> None:
        """Write ``word`` to output ``name`` this cycle; ``None``: the data was assigned
        outside the control flow (one multiplexer less in front of the FIFO)."""
        f = self._fifos[name]
        m.d.comb += f.w_en.eq(1)
        if word is not None:
            m.d.comb += f.w_data.eq(word)

    def pop(self, m: Module, name: str) -> None:
        m.d.comb += getattr(self, f"i_{name}").ready.eq(1)

    def inp(self, name: str):
        return getattr(self, f"i_{name}")
