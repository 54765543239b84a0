"""Waveforms of RTL runs: the format a wave file's name asks for, VCD to FST, and a GTKWave
save file that opens it with the host port and every node's streams grouped.

``rtl --waves run.vcd`` writes VCD, ``--waves run.fst`` FST, with every runner: each simulator
dumps VCD (Verilator's own FST writer needs the lz4 headers, which no PyPI package provides), and
:func:`vcd_to_fst` re-encodes it with GTKWave's FST library (the ``pylibfst`` package: its
compiled ``fstapi`` with the LZ4 / FastLZ / zlib coders built in), value change for value change.
Beside the file, ``run.gtkw`` lists, in GTKWave's save-file format (written with pyvcd's
:mod:`vcd.gtkw`, which amaranth already depends on):

* the clock, the host port (address, write data / enable, read data), ``done`` and ``running``;
* one group per graph node (in the graph's topological order): each input stream's
  ``valid`` / ``ready`` / ``payload`` and each output stream's ``valid`` / ``payload`` as the
  node's own ports carry them.

The scope of those signals differs per simulator (the native harness wraps the top in
``fuseflow_native``; cocotb's Verilator build has the top itself; amaranth.sim names the
elaboratable ``top``); :data:`SCOPES` holds them.
"""

from __future__ import annotations

from pathlib import Path

from fuseflow.ir.samml import Graph
from hw.elaborate import HOST_DW, HwConfig
from hw.registry import stream_width

__all__ = ["FORMATS", "SCOPES", "signal_groups", "vcd_to_fst", "wave_format", "write_gtkw"]

FORMATS = ("vcd", "fst")

# hierarchical name of the graph top in each runner's dump, and the separator of its scopes
SCOPES = {"native": "TOP.fuseflow_native.dut", "cocotb": "TOP.fuseflow_top", "amaranth": "bench.top"}


def wave_format(wave_file: str | Path | None) -> str | None:
    """``"vcd"`` or ``"fst"`` from the file's suffix (``None`` without a file); an error for any
    other suffix or a missing directory, naming the file."""
    if wave_file is None:
        return None
    fmt = Path(wave_file).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"wave file {str(wave_file)!r}: name it .vcd or .fst (the suffix picks the format)")
    if not Path(wave_file).parent.is_dir():
        raise ValueError(f"wave file {str(wave_file)!r}: directory {str(Path(wave_file).parent)!r} does not exist")
    return fmt


def vcd_to_fst(vcd: str | Path, fst: str | Path) -> None:
    """Re-encode the VCD file ``vcd`` as the FST file ``fst``: the same scopes, variables
    (type, width, identifier sharing), timescale and value changes.  (A reader of its own:
    the simulators' dumps hold references such as ``$signal`` that pyvcd's tokenizer refuses.)"""
    from pylibfst import ffi, lib  # GTKWave's FST library: loaded only to write FST

    scope_types = {"module": lib.FST_ST_VCD_MODULE, "begin": lib.FST_ST_VCD_BEGIN, "task": lib.FST_ST_VCD_TASK,
                   "function": lib.FST_ST_VCD_FUNCTION, "fork": lib.FST_ST_VCD_FORK}
    var_types = {"wire": lib.FST_VT_VCD_WIRE, "reg": lib.FST_VT_VCD_REG, "integer": lib.FST_VT_VCD_INTEGER,
                 "parameter": lib.FST_VT_VCD_PARAMETER, "real": lib.FST_VT_VCD_REAL, "event": lib.FST_VT_VCD_EVENT}
    ctx = lib.fstWriterCreate(str(fst).encode(), 1)
    if ctx == ffi.NULL:
        raise OSError(f"cannot write FST file {str(fst)!r}")
    handles: dict[str, tuple[int, int]] = {}  # VCD identifier -> (FST handle, width)
    try:
        lib.fstWriterSetPackType(ctx, lib.FST_WR_PT_LZ4)
        with open(vcd) as f:
            words = _header_words(f)
            for cmd, args in words:
                if cmd == "$timescale":
                    lib.fstWriterSetTimescaleFromString(ctx, "".join(args).encode())
                elif cmd == "$scope":
                    lib.fstWriterSetScope(ctx, scope_types.get(args[0], lib.FST_ST_VCD_MODULE), args[1].encode(),
                                          ffi.NULL)
                elif cmd == "$upscope":
                    lib.fstWriterSetUpscope(ctx)
                elif cmd == "$var":
                    kind, size, ident, name = args[0], int(args[1]), args[2], " ".join(args[3:])
                    alias = handles[ident][0] if ident in handles else 0
                    h = lib.fstWriterCreateVar(ctx, var_types.get(kind, lib.FST_VT_VCD_WIRE), lib.FST_VD_IMPLICIT,
                                               size, name.encode(), alias)
                    handles.setdefault(ident, (h, size))
            for line in f:
                line = line.strip()
                if not line or line[0] == "$":
                    continue  # $dumpvars / $end / $comment ...: the values that follow are changes
                c = line[0]
                if c == "#":
                    lib.fstWriterEmitTimeChange(ctx, int(line[1:]))
                elif c in "bB":
                    bits, ident = line[1:].split()
                    h, width = handles[ident]
                    lib.fstWriterEmitValueChange(ctx, h, bits.rjust(width, "x" if bits[0] in "xX" else "0").encode())
                elif c in "01xzXZ":
                    lib.fstWriterEmitValueChange(ctx, handles[line[1:]][0], c.lower().encode())
    finally:
        lib.fstWriterClose(ctx)


def _header_words(f) -> list[tuple[str, list[str]]]:
    """The declaration commands of a VCD header (``$cmd args... $end``) up to
    ``$enddefinitions``, leaving ``f`` at the first line after it."""
    out: list[tuple[str, list[str]]] = []
    cur: list[str] = []
    for line in f:
        for w in line.split():
            if w == "$end":
                if cur:
                    out.append((cur[0], cur[1:]))
                    if cur[0] == "$enddefinitions":
                        return out
                cur = []
            else:
                cur.append(w)
    raise ValueError("VCD file without $enddefinitions")


def signal_groups(graph: Graph, cfg: HwConfig, addr_width: int) -> list[tuple[str, list[tuple[str, int]]]]:
    """(group, [(signal, width)]): the host port, then each node's stream ports (relative to
    the graph top; a node's signals under ``core.n_<node>``)."""
    host = [("clk", 1), ("host_addr", addr_width), ("host_we", 1), ("host_wdata", HOST_DW),
            ("host_rdata", HOST_DW), ("done", 1), ("running", 1)]
    ports: dict[str, list[tuple[str, int]]] = {name: [] for name in graph.topo_order()}
    for e in graph.edges:
        t = graph.edge_type(e)
        w = stream_width(t.kind, cfg, t.lanes) + 1
        ports[e.dst.node] += [(f"i_{e.dst.port}__valid", 1), (f"i_{e.dst.port}__ready", 1),
                              (f"i_{e.dst.port}__payload", w)]
        ports[e.src.node] += [(f"o_{e.src.port}__valid", 1), (f"o_{e.src.port}__payload", w)]
    groups = [("host port", host)]
    for name, sigs in ports.items():
        groups.append((name, [(f"core.n_{name}.{s}", w) for s, w in sorted(set(sigs), key=sigs.index)]))
    return groups


def write_gtkw(graph: Graph, wave_file: str | Path, runner: str, cfg: HwConfig, addr_width: int) -> Path:
    """Write ``wave_file`` with the suffix ``.gtkw``: a GTKWave save file that loads
    ``wave_file`` and shows the host port and each node's streams (see the module docstring).
    Returns its path."""
    from vcd.gtkw import GTKWSave  # pyvcd: amaranth's dependency, loaded only for a save file

    wave_file = Path(wave_file)
    scope = SCOPES[runner]
    ranged = runner != "amaranth"  # Verilator's dumps name a vector with its bit range
    out = wave_file.with_suffix(".gtkw")
    with out.open("w") as f:
        save = GTKWSave(f)
        save.comment(f"fuseflow-hw: graph {graph.name!r}, {runner} runner")
        save.dumpfile(str(wave_file.resolve()))
        save.zoom_markers(-8.0)
        for i, (group, sigs) in enumerate(signal_groups(graph, cfg, addr_width)):
            with save.group(group, closed=i > 0):
                for sig, w in sigs:
                    save.trace(f"{scope}.{sig}" + (f"[{w - 1}:0]" if ranged and w > 1 else ""))
    return out
