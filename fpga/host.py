"""Host side of the board link: the wire protocol of :mod:`fpga.uart` over a byte transport.

The driver is written once, as coroutines over :class:`ByteTransport`:

* :class:`SerialTransport` — a real serial port (pyserial, imported on first use);
* the cocotb UART model in :mod:`fpga.tb_board` — the simulated board top.

``fuseflow-hw run`` and the board-top simulation both call :func:`run_on_board`, so the code
tested in simulation is the code that talks to the FPGA.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from fuseflow.ir.banks import outputs_from_arrays
from fuseflow.ir.overflow import Overflow, enforce
from fuseflow.ir.samml import Graph
from fuseflow.ir.tensor import TensorData, TensorFormat
from fuseflow.ir.validate import require_words
from hw.elaborate import (
    REG_CTRL,
    REG_CYCLES,
    REG_OVF0,
    REG_STATUS,
    STATUS_OVERFLOW,
    STATUS_OVERRUN,
    MemoryMap,
)

from .uart import ACK, CMD_IDENT, CMD_READ, CMD_WRITE, checksum

__all__ = [
    "MAX_BURST",
    "BoardLink",
    "BoardResult",
    "ByteTransport",
    "LinkError",
    "SerialTransport",
    "check_ident",
    "decode_outputs",
    "load_inputs",
    "load_words",
    "poll_done",
    "read_results",
    "run_on_board",
    "tensor_from_arrays",
]

MAX_BURST = 0xFFFF  # words per W / R command (16-bit count)
_CTRL_DONE = 2


class LinkError(RuntimeError):
    """The board did not answer as the protocol says (timeout, wrong ack, wrong design)."""


class ByteTransport(Protocol):
    """A byte pipe to the board.  ``read`` returns exactly ``n`` bytes or raises :class:`LinkError`."""

    async def write(self, data: bytes) -> None: ...

    async def read(self, n: int) -> bytes: ...


class SerialTransport:
    """A serial port (``/dev/ttyUSB1``, ``COM3`` …, or a pyserial URL such as ``rfc2217://host:port``)
    at ``baud``, 8N1, through pyserial."""

    def __init__(self, port: str, baud: int, timeout: float = 2.0) -> None:
        try:
            import serial  # pyserial, optional (the [fpga] extra): only a real board needs it
        except ImportError as exc:
            raise LinkError(
                "talking to a board needs pyserial: pip install pyserial "
                "(or the fuseflow-hw[fpga] extra)"
            ) from exc
        self.port = port
        try:
            self._ser = serial.serial_for_url(port, baudrate=baud, timeout=timeout)
        except serial.SerialException as exc:
            raise LinkError(f"cannot open serial port {port!r}: {exc}") from exc
        self._ser.reset_input_buffer()

    async def write(self, data: bytes) -> None:
        self._ser.write(data)
        self._ser.flush()

    async def read(self, n: int) -> bytes:
        """``n`` bytes; the timeout is per silence, not per call, so long replies may take longer."""
        data = bytearray()
        while len(data) < n:
            chunk = self._ser.read(n - len(data))
            if not chunk:
                raise LinkError(
                    f"{self.port}: expected {n} bytes from the board, got {len(data)} before the timeout "
                    "(is the bitstream flashed and the baud rate the one it was built for?)"
                )
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self._ser.close()


class BoardLink:
    """Host-port accesses through the UART bridge."""

    def __init__(self, transport: ByteTransport) -> None:
        self.t = transport
        self.sent_bytes = 0  # bytes of write transfers sent (the load's traffic)
        self.resent = 0  # transfers sent again after a wrong checksum

    retries = 3  # re-sends of a transfer whose checksum came back wrong

    async def write_words(self, addr: int, words: list[int], progress=None) -> None:
        """Write ``words`` from ``addr`` in transfers of up to ``MAX_BURST`` words.  Each is
        checked against the checksum the board returns and re-sent (up to :attr:`retries`
        times) if the board received it wrong.  ``progress(n)``: called with the words of each
        transfer the board confirmed."""
        for start in range(0, len(words), MAX_BURST):
            chunk = [w & 0xFFFFFFFF for w in words[start : start + MAX_BURST]]
            payload = struct.pack(f"<BIH{len(chunk)}I", CMD_WRITE, addr + start, len(chunk), *chunk)
            want = checksum(chunk)
            for attempt in range(self.retries + 1):
                await self.t.write(payload)
                reply = await self.t.read(5)
                self.sent_bytes += len(payload)
                if reply[0] != ACK:
                    raise LinkError(
                        f"write of {len(chunk)} words at {addr + start:#x}: expected ack {ACK:#04x}, "
                        f"got {reply[0]:#04x}"
                    )
                got = struct.unpack("<I", reply[1:])[0]
                if got == want:
                    break
                self.resent += 1
                if attempt == self.retries:
                    raise LinkError(
                        f"write of {len(chunk)} words at {addr + start:#x}: the board's checksum "
                        f"{got:#010x} is not {want:#010x} after {self.retries + 1} attempts (a noisy link? "
                        "try a lower --baud)")
            if progress is not None:
                progress(len(chunk))

    async def read_words(self, addr: int, n: int) -> list[int]:
        out: list[int] = []
        for start in range(0, n, MAX_BURST):
            k = min(MAX_BURST, n - start)
            await self.t.write(struct.pack("<BIH", CMD_READ, addr + start, k))
            out += struct.unpack(f"<{k}I", await self.t.read(4 * k))
        return out

    async def read(self, addr: int) -> int:
        return (await self.read_words(addr, 1))[0]

    async def write(self, addr: int, word: int) -> None:
        await self.write_words(addr, [word])

    async def ident(self) -> int:
        await self.t.write(bytes([CMD_IDENT]))
        return struct.unpack("<I", await self.t.read(4))[0]


@dataclass
class BoardResult:
    outputs: dict[str, TensorData]
    cycles: int  # the hardware cycle counter (start to done)
    polls: int  # CTRL reads until done
    # the nodes whose sticky overflow flag the hardware set (OVERFLOW words, hw.elaborate)
    overflow: list[str] = field(default_factory=list)
    status: int = 0  # the STATUS register: bit 0 overflow, bit 1 writer overrun
    load_bytes: int = 0  # bytes the load of the inputs sent over the link
    resent: int = 0  # load transfers sent again after a wrong checksum


def region_tensor(region: str) -> str:
    """The tensor of memory region ``region`` (``T.vals`` or ``T.<level>.seg|crd``; a tensor
    name may hold dots)."""
    head, _, last = region.rpartition(".")
    if last == "vals":
        return head
    return head.rpartition(".")[0]


def load_words(
    graph: Graph, data: Mapping[str, TensorData], mmap: MemoryMap, skip: frozenset[str] = frozenset()
) -> dict[str, list[int]]:
    """Memory-region contents for the input tensors but those in ``skip`` (as
    :func:`rtl_sim.api.run_graph` loads them)."""
    names = {r.name for r in mmap.regions}
    mem: dict[str, list[int]] = {}
    for t in graph.input_tensors():
        if t in skip:
            continue
        for array, values in data[t].arrays().items():
            name = f"{t}.{array}"
            if name not in names:
                continue  # an array no node reads
            r = mmap.region(name)
            if len(values) > r.depth:
                raise ValueError(
                    f"tensor {t!r} array {array!r} has {len(values)} entries; the hardware holds "
                    f"{r.depth} (build it with a larger max_nnz for {t!r})"
                )
            require_words(values, r.width, signed=array == "vals", where=f"tensor {t!r} array {array!r}")
            mem[name] = [int(v) & ((1 << r.width) - 1) for v in values]
    return mem


def tensor_from_arrays(
    shape: tuple[int, ...], fmt: TensorFormat, arrays: Mapping[str, list[int]]
) -> TensorData:
    """The inverse of :meth:`TensorData.arrays` (used to pass tensors through JSON jobs)."""
    segs: list[np.ndarray | None] = [None] * fmt.order
    crds: list[np.ndarray | None] = [None] * fmt.order
    for lvl, f in enumerate(fmt.levels):
        if f.has_seg:
            segs[lvl] = np.asarray(arrays[f"{lvl}.seg"], dtype=np.int64)
        if f.has_crd:
            crds[lvl] = np.asarray(arrays[f"{lvl}.crd"], dtype=np.int64)
    return TensorData(tuple(shape), fmt, segs, crds, np.asarray(arrays["vals"], dtype=np.int64))


def _signed(w: int, width: int) -> int:
    return w - (1 << width) if w >> (width - 1) & 1 else w


def decode_outputs(
    graph: Graph, arrays: Mapping[str, list[int]], mmap: MemoryMap
) -> dict[str, TensorData]:
    """Output tensors from the words read back (values are two's complement of the region width)."""
    def vals_of(t: str, words: list[int]):
        width = mmap.region(f"{t}.vals").width
        return np.asarray([_signed(w, width) for w in words], dtype=np.int64)

    return outputs_from_arrays(graph, arrays, vals_of)


async def run_on_board(
    link: BoardLink,
    graph: Graph,
    data: Mapping[str, TensorData],
    mmap: MemoryMap,
    ident: int | None = None,
    *,
    max_polls: int = 100_000,
    on_overflow: str = "raise",
    numerics: str = "the datapath's",
    loaded: dict[str, int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    skip: frozenset[str] = frozenset(),
) -> BoardResult:
    """Load the inputs, start, poll until done, read the cycle counter, the STATUS register and
    OVERFLOW words (the nodes the hardware flagged) and the outputs.

    A flagged node (a result wrapped or saturated) raises
    :class:`~fuseflow.ir.overflow.NumericOverflowError` naming it in the ``numerics`` format;
    ``on_overflow="report"`` returns the result with a warning, ``"ignore"`` without.

    ``ident`` (see :func:`fpga.board_top.design_ident`) is checked first when given, so a board
    flashed with another design is refused instead of producing garbage.

    The load is resumable: ``loaded`` (region -> words the board confirmed) is updated as each
    transfer's checksum comes back right, and a call given the same dict after a
    :class:`LinkError` skips what is there.  ``progress(done, total)`` counts the words loaded.
    Input tensors in ``skip`` are not loaded: they are in the board's memory already (a tensor
    an earlier graph of a model wrote into DRAM, :mod:`fpga.model_run`).
    """
    await check_ident(link, ident, f"graph {graph.name!r}")
    load_bytes, resent = await load_inputs(link, graph, data, mmap, loaded=loaded, progress=progress, skip=skip)
    await link.write(REG_CTRL, 1)  # clear + start
    polls = await poll_done(link, REG_CTRL, _CTRL_DONE, max_polls, f"graph {graph.name!r}")
    res = await read_results(link, graph, mmap, on_overflow=on_overflow, numerics=numerics)
    return replace(res, polls=polls, load_bytes=load_bytes, resent=resent)


async def check_ident(link: BoardLink, ident: int | None, what: str) -> None:
    """Refuse a board that runs another design than ``ident`` (built for ``what``)."""
    if ident is not None:
        got = await link.ident()
        if got != ident:
            raise LinkError(
                f"the board runs design {got:#010x}, not {ident:#010x} built for {what} "
                f"(flash the matching bitstream)"
            )


async def load_inputs(
    link: BoardLink,
    graph: Graph,
    data: Mapping[str, TensorData],
    mmap: MemoryMap,
    *,
    loaded: dict[str, int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    skip: frozenset[str] = frozenset(),
) -> tuple[int, int]:
    """Load ``graph``'s inputs but those in ``skip`` (resumable, see :func:`run_on_board`);
    returns the bytes sent and the transfers sent again."""
    # (a tensor in ``skip`` may have no data yet: an earlier graph of a sequence writes it)
    graph.verify(data if all(t in data for t in graph.input_tensors()) else None)
    loaded = {} if loaded is None else loaded
    regions = load_words(graph, data, mmap, skip)
    total = sum(len(w) for w in regions.values())
    done = sum(min(loaded.get(n, 0), len(w)) for n, w in regions.items())
    sent0 = link.sent_bytes
    resent0 = link.resent
    for name, words in regions.items():
        start = loaded.get(name, 0)

        def confirmed(n: int, name: str = name) -> None:
            nonlocal done
            loaded[name] = loaded.get(name, 0) + n
            done += n
            if progress is not None:
                progress(done, total)

        await link.write_words(mmap.region(name).base + start, words[start:], confirmed)
    return link.sent_bytes - sent0, link.resent - resent0


async def poll_done(link: BoardLink, addr: int, mask: int, max_polls: int, what: str) -> int:
    """Poll the register at ``addr`` until a bit of ``mask`` is set; returns the polls."""
    polls = 0
    while True:
        polls += 1
        if await link.read(addr) & mask:
            return polls
        if polls >= max_polls:
            raise LinkError(f"{what} not done after {max_polls} polls of its control register")


async def read_results(
    link: BoardLink,
    graph: Graph,
    mmap: MemoryMap,
    *,
    on_overflow: str = "raise",
    numerics: str = "the datapath's",
) -> BoardResult:
    """After a run of ``graph``: its cycle counter, STATUS, the flagged nodes and the outputs
    (see :func:`run_on_board`; no load, one poll)."""
    cycles = await link.read(REG_CYCLES)
    status = await link.read(REG_STATUS)
    words = await link.read_words(REG_OVF0, mmap.overflow_words) if mmap.overflow_words else []
    flagged = mmap.flagged(words)
    if bool(flagged) != bool(status & STATUS_OVERFLOW):
        raise LinkError(
            f"STATUS reads {status:#x} but the OVERFLOW words flag {flagged or 'no node'}: "
            "the board disagrees with itself"
        )
    arrays: dict[str, list[int]] = {}
    for name in mmap.lengths:
        n = await link.read(mmap.length_addr(name))
        region = mmap.region(name)
        if n > region.depth:
            raise LinkError(
                f"length register of {name} reads {n}, above the region depth {region.depth}: "
                f"its writer overflowed the memory (build with a larger max_nnz)"
            )
        arrays[name] = await link.read_words(region.base, n)
    if status & STATUS_OVERRUN:
        raise LinkError(
            f"STATUS reads {status:#x} (a writer overrun) but no length register exceeds its "
            "region depth: the board disagrees with itself"
        )
    enforce([Overflow(n, 1, None, numerics) for n in flagged], on_overflow, f"graph {graph.name!r} (board)")
    return BoardResult(decode_outputs(graph, arrays, mmap), cycles, 1, flagged, status, 0, 0)
