"""Coordinate masks (causal, band, block pattern) for attention."""

from __future__ import annotations

from dataclasses import dataclass

from .base import MaskPred, PrimitiveSpec, StreamKind, doc

C, R = StreamKind.CRD, StreamKind.REF


@dataclass(frozen=True)
class MaskParams:
    pred: MaskPred = doc("which (outer i, inner j) entries are kept")
    before: int = doc("band: entries with j >= i - before are kept", 0)
    after: int = doc("band: entries with j <= i + after are kept", 0)
    block: int = doc("block: block size (a power of two)", 1)
    pattern: tuple[tuple[int, ...], ...] = doc("block: 0/1 matrix of kept blocks", ())

    def check(self) -> list[str]:
        if self.pred is MaskPred.BAND and (self.before < 0 or self.after < 0):
            return [f"before={self.before} and after={self.after} must be >= 0"]
        if self.pred is not MaskPred.BLOCK:
            return []
        out = []
        if self.block < 1 or self.block & (self.block - 1):
            out.append(f"block={self.block} must be a power of two")
        pat = self.pattern
        if not pat or len({len(r) for r in pat}) != 1 or not pat[0]:
            out.append(f"pattern must be a non-empty rectangular 0/1 matrix, got {[list(r) for r in pat]!r}")
        elif any(x not in (0, 1) for r in pat for x in r):
            out.append("pattern entries must be 0 or 1")
        return out


DECLARATIONS = (
    PrimitiveSpec("crd_mask", "mask", MaskParams, lambda p: {"outer": C, "inner": C, "ref": R},
                  lambda p: {"crd": C, "ref": R},
                  "drops inner entries (crd + ref) whose (outer, inner) fails the predicate",
                  nesting=lambda p, lv: {"crd": lv["inner"], "ref": lv["inner"]}),
)
