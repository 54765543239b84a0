"""What the cost rules write to while a graph is estimated: the estimate, the off-chip read
ports and the words each array moves (:class:`Ctx`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..ir.memory import MemoryModel, Placement, word_bytes
from ..ir.samml import Graph
from .stats import Estimate, Stat, TensorStats

__all__ = ["ANY_PLACEMENT", "Ctx", "Read"]

ANY_PLACEMENT = Placement(strict=False)  # nothing on chip; names not checked


@dataclass
class Read:
    """One off-chip read port of a graph, as the memory terms of the cycle bound see it."""

    array: tuple[str, str, int | None]  # (tensor, seg | crd | vals, level)
    words: float
    distinct: float  # words at distinct positions (a repeated reference reads one word per fibre)
    runs: float  # runs that may miss the port's two lines
    seq: bool  # ascending positions (the next-line prefetch streams them)
    passes: float  # of ascending positions: how often they start over
    fill: float  # of ascending positions: the share of the positions passed that are read
    run: float  # words read one after another
    size: float  # the array's words
    word_bytes: int


@dataclass
class Ctx:
    graph: Graph
    tensors: Mapping[str, TensorStats]
    model: MemoryModel
    placement: Placement
    cw: int
    vw: int
    rates: Mapping[str, float]
    est: Estimate
    written: dict[str, dict[int, Stat]] = field(default_factory=dict)  # tensor -> level -> crd stat
    reads: list[Read] = field(default_factory=list)  # off-chip read ports
    writes: dict[tuple[str, str, int | None], float] = field(default_factory=dict)  # off-chip words written

    def read_port(self, tensor: str, array: str, level: int | None, words: float, runs: float,
                  ref: Stat, passes: float, run: float) -> None:
        """An off-chip read port, for the memory terms of the cycle bound: its words, its runs
        (a run = ``run`` consecutive words; each new run may miss the port's two lines), and of
        the position stream ``ref`` whether it ascends, its ``passes`` over the array, the share
        of the positions it reads and whether it repeats each position (one distinct word per
        fibre)."""
        if not self.placement.offchip(self.model, tensor):
            return
        lv = self.tensors[tensor].levels
        size = (lv[level].parents + 1 if array == "seg" else lv[level].nnz) if level is not None else lv[-1].nnz
        wb = word_bytes(self.vw if array == "vals" else self.cw)
        distinct = words * (ref.n[-2] / ref.data) if ref.rep and ref.data and len(ref.n) > 1 else words
        self.reads.append(Read((tensor, array, level), words, distinct, runs, ref.seq, passes, ref.fill,
                                max(run, 1.0), size, wb))

    def words(self, tensor: str, array: str, level: int | None, words: float, write: bool) -> None:
        key = f"{tensor}.{array}" if level is None else f"{tensor}.{array}{level}"
        a = self.est.arrays.setdefault(key, {"offchip": self.placement.offchip(self.model, tensor),
                                             "words_read": 0.0, "words_written": 0.0,
                                             "bytes_read": 0.0, "bytes_written": 0.0})
        wb = word_bytes(self.vw if array == "vals" else self.cw)
        if write and a["offchip"]:
            self.writes[(tensor, array, level)] = self.writes.get((tensor, array, level), 0.0) + words
        a["words_written" if write else "words_read"] += words
        a["bytes_written" if write else "bytes_read"] += words * wb

    def flop(self, node, count: float) -> None:
        op = node.all_params().get("op", node.kind.value)
        op = getattr(op, "value", str(op))
        self.est.flops[op] = self.est.flops.get(op, 0.0) + count
