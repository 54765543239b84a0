"""The memory terms of the cycle bound: runs of an off-chip read port, its stalls under the
memory model (line misses, the next-line prefetch, row conflicts at the rate the bank model
gives), and the bus cycles lost to read <-> write turnarounds and bank switches."""

from __future__ import annotations

import math

import numpy as np

from ..ir.memory import MemoryModel, word_bytes
from .context import Ctx, Read
from .stats import Stat

__all__ = ["bus_gaps", "conflicts", "passes_of", "port_stall", "runs_of"]


def runs_of(c: Ctx, ref: Stat, live: float, width: int) -> float:
    """Runs of a port read at the positions of ``ref`` (a run = words read one after another;
    each run may miss the port's two lines).  Random positions: ``live / run``.  Ascending
    positions: blocks of ``run`` consecutive words, one pass over them per outer fibre; a pass
    is one run (next-line prefetch streams it) when the blocks are adjacent (``fill`` = 1), and
    otherwise each block whose gap to the last one is more than a line starts a run of its own:
    the gap is ``run (1 - fill) / fill`` words on average."""
    if not ref.seq:
        return live / max(ref.run, 1.0)
    passes = passes_of(ref)
    if ref.fill >= 1.0 or not live or not passes:
        return passes
    per_line = max(1, c.model.burst_bytes // word_bytes(width))
    run = max(ref.run, 1.0)
    blocks = live / passes / run
    near = min(1.0, per_line * ref.fill / (run * (1.0 - ref.fill)))
    return passes * (1.0 + max(blocks - 1.0, 0.0) * (1.0 - near))


def passes_of(s: Stat) -> float:
    """How often an ascending stream starts over: once per fibre of its parent level, or once
    per fibre when it ``restarts``."""
    if s.restarts:
        return s.n[-2] if len(s.n) > 1 else 1.0
    return s.n[-3] if len(s.n) > 2 else 1.0


def port_stall(m: MemoryModel, r: Read, busy: float, conflict: float) -> float:
    """Cycles an off-chip read port holds its node up.  A port holds one request at a time: a
    run that starts outside the two lines it holds waits a whole access and transfer; on an
    ascending read the next-line prefetch is asked for on entering a line and arrives an
    access, a transfer and a grant cycle later, so when a line's words pass faster than that
    (at the graph's pace: ``busy`` cycles over the port's words, at least one word a cycle)
    each streamed line waits the difference.  ``conflict`` is the port's row-conflict rate."""
    access = _access(m, conflict)
    misses = _misses(m, r)
    wait = misses * (access + m.xfer_cycles)
    if r.seq and r.words > 0:
        lines = _lines(m, r)
        if lines > misses:
            pace = max(1.0, busy / r.words)
            wait += (lines - misses) * max(0.0, access + m.xfer_cycles + 1 - r.words / lines * pace)
    return wait


def _misses(m: MemoryModel, r: Read) -> float:
    """Runs of a read port that start outside the two lines it holds."""
    return r.runs * (1.0 - min(1.0, 2.0 / max(1.0, r.size * r.word_bytes / m.burst_bytes)))


def _access(m: MemoryModel, conflict: float) -> float:
    """Expected cycles from a request's grant to its data, before the transfer: a row hit, or
    with probability ``conflict`` a precharge and activation too (the closed policy always
    activates)."""
    if m.policy != "open":
        return m.latency + m.t_rcd + m.t_cl
    return m.latency + m.t_cl + conflict * (m.t_rp + m.t_rcd)


def _lines(m: MemoryModel, r: Read) -> float:
    """Lines a read port enters: an array of at most two lines once; ascending positions the
    lines their distinct words fill (runs shorter than a line share it with the words
    ``fill`` says lie beside them), at most the array's lines and a prefetch per pass; random
    positions a line and a prefetch per run that misses the two lines the port holds."""
    per_line = m.burst_bytes / r.word_bytes
    array = max(1.0, r.size / per_line)
    if r.words <= 0:
        return 0.0
    if array <= 2.0:
        return float(math.ceil(array))
    if r.seq:
        return min(r.distinct / min(per_line, max(r.run, per_line * r.fill)), max(r.passes, 1.0) * (array + 1.0))
    return r.runs * (1.0 - 2.0 / array) * (r.run / per_line + 1.0)


def _arrays(c: Ctx) -> dict[tuple, list]:
    """The off-chip arrays of a graph as the bank model sees them: array -> [lines read, lines
    written, read in ascending order, size in lines].  The lines read are those its read ports
    enter (``_lines``; ports of one array read the same rows), the lines written its writer's
    words over a line's."""
    m = c.model
    arrays: dict[tuple, list] = {}
    for r in c.reads:
        a = arrays.setdefault(r.array, [0.0, 0.0, True, r.size * r.word_bytes / m.burst_bytes])
        a[0] += _lines(m, r)
        a[2] = a[2] and r.seq
    for key, words in c.writes.items():
        lines = words * word_bytes(c.vw if key[1] == "vals" else c.cw) / m.burst_bytes
        a = arrays.setdefault(key, [0.0, 0.0, True, lines])
        a[1] += lines
    return arrays


def _spreads(m: MemoryModel, arrays: dict[tuple, list]) -> dict[tuple, np.ndarray]:
    """Per array, the share of its lines in each bank: its rows go round the banks from the bank
    its number sets (as ``fuseflow.ir.memory.MemPort.bank_row``), its lines spread evenly over
    its rows."""
    ids = {k: i for i, k in enumerate(sorted(arrays, key=lambda k: (k[0], k[1], -1 if k[2] is None else k[2])))}
    spreads = {}
    for k, (*_, size) in arrays.items():
        chunks = min(max(1, math.ceil(size / m.lines_per_row)), 4 * m.banks)
        spreads[k] = np.bincount((np.arange(chunks) + ids[k]) % m.banks, minlength=m.banks) / chunks
    return spreads


def conflicts(c: Ctx) -> dict[tuple, float]:
    """Row-conflict rate per off-chip array (open-row policy).  An array's rows go round the
    banks from the bank its number sets (as ``fuseflow.ir.memory.MemPort.bank_row``), and its
    lines (its read ports' and its writer's; ports of one array read the same rows) spread
    evenly over its rows.  An array read in ascending order enters a row and stays in it for
    its next lines, so a line conflicts only when another array's line reached the bank in
    between: the others move ``load - own`` of the bank's lines per line of its own, a Poisson
    count.  An array read at random positions hits when its bank's last line was its own (its
    share of the bank's lines) and in the same row (one in its rows of that bank)."""
    m = c.model
    if m.policy != "open":
        return {}
    per_row = m.lines_per_row
    arrays = _arrays(c)
    if len(arrays) < 2:
        return {}
    spreads = _spreads(m, arrays)
    load = np.zeros(m.banks)
    for k, (rd, wr, _, _) in arrays.items():
        load += (rd + wr) * spreads[k]
    out = {}
    for k, (rd, wr, seq, size) in arrays.items():
        w = spreads[k]
        lines = rd + wr
        if not lines:
            continue
        if seq:
            # consecutive lines share a row: a conflict needs another array's line in the bank
            # between two of its own (the others move ``load - own`` lines per ``lines`` of its)
            others = (load - lines * w) / lines
            out[k] = float(np.sum(w * -np.expm1(-others)))
        else:
            same = 1.0 / max(1.0, math.ceil(size / per_row) / m.banks)
            share = np.divide(lines * w, load, out=np.zeros(m.banks), where=load > 0)
            out[k] = float(np.sum(w * (1.0 - share * same)))
    return out


def bus_gaps(c: Ctx) -> float:
    """Expected bus cycles lost between consecutive transfers of a graph: ``t_turn`` per
    direction change (read <-> write), ``t_switch`` per bank change, as the controller adds
    them to the bus gap when transfers follow back to back.  The transfers are the lines the
    bank model counts (``_arrays``: with the prefetches and the lines read again, closer to the
    transfers than the bytes moved), taken in random order (the ports' requests interleave):
    the next transfer is one of array ``k`` with its share ``s_k`` of the lines, whatever the
    last one was.  So with ``p`` the share of written lines a transfer changes direction with
    probability ``2 p (1 - p)``, and changes bank unless both are in one bank: another array's
    line by the overlap of the two arrays' spreads over the banks, its own next line (``s_k``
    squared) by the spread's overlap with itself at random positions, and in ascending order
    only when it crosses into the next row (one line in ``lines_per_row``; the rows go round
    the banks)."""
    m = c.model
    if not (m.t_turn or m.t_switch):
        return 0.0
    arrays = _arrays(c)
    total = sum(rd + wr for rd, wr, _, _ in arrays.values())
    if total <= 1.0:
        return 0.0
    spreads = _spreads(m, arrays)
    p = sum(wr for _, wr, _, _ in arrays.values()) / total
    q = np.zeros(m.banks)  # share of the lines in each bank
    own = 0.0  # correction for consecutive lines of one array
    for k, (rd, wr, seq, _) in arrays.items():
        s = (rd + wr) / total
        w = spreads[k]
        q += s * w
        if seq:
            stay = 1.0 if np.count_nonzero(w) < 2 else 1.0 - 1.0 / m.lines_per_row
        else:
            stay = float(np.dot(w, w))
        own += s * s * (stay - float(np.dot(w, w)))
    turn = 2.0 * p * (1.0 - p)
    switch = min(1.0, max(0.0, 1.0 - float(np.dot(q, q)) - own))
    return (total - 1.0) * (m.t_turn * turn + m.t_switch * switch)
