"""Random PyTorch modules drawn from the frontend's supported-op table (docs/models.md), with
random shapes (1-sized and empty dims included) and sparse inputs in every layout the frontend
takes: torch CSR, CSC, COO (also uncoalesced, with duplicates that sum and cancelling pairs),
BSR, CSR with stored zeros, and dense tensors with a ``formats=`` annotation, at densities 0 %
to 100 %.

A case is the *source* of an ``nn.Module`` (a class ``Fuzz`` whose ``forward`` is straight-line
torch code, one op per line, so torch.export traces it as ordinary code and every report shows
the module as a user would write it), its input specs, the format annotations and a seed for
the data and parameters.  ``gen_case(draw)`` makes one from any :mod:`draws` chooser;
``cases()`` is the hypothesis strategy; :meth:`Case.build` makes the module and its inputs;
:meth:`Case.to_json` / :meth:`Case.from_json` round-trip it for the large run's logs.
"""

from __future__ import annotations

import hashlib
import itertools
import linecache
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from draws import HypDraw
from hypothesis import strategies as st
from torch import nn

__all__ = ["Case", "InputSpec", "cases", "dense_of", "gen_case"]

DIMS = [(0, 1), (1, 2), (2, 2), (3, 3), (4, 3), (5, 2), (6, 2), (8, 1)]
DENSITIES = [(0.0, 2), (0.1, 1), (0.3, 2), (0.5, 3), (0.7, 1), (1.0, 2)]
LAYOUTS = {  # rank -> (layout, weight); "ann:F" is a dense tensor annotated formats={name: F}
    1: [("dense", 3), ("coo", 1), ("ann:compressed", 1)],
    2: [("dense", 3), ("csr", 4), ("csc", 2), ("coo", 2), ("coo_dup", 2), ("bsr", 2), ("csr_zeros", 1),
        ("ann:csr", 2), ("ann:csc", 1), ("ann:dcsr", 1), ("ann:coo", 1)],
    3: [("dense", 3), ("coo", 2), ("coo_dup", 1), ("ann:dcc", 1), ("ann:ddc", 1)],
}


# ----------------------------------------------------------------------------- inputs
@dataclass
class InputSpec:
    name: str
    shape: tuple[int, ...]
    layout: str = "dense"
    density: float = 1.0
    kind: str = "float"  # float | nonzero (|v| in [0.5, 2]) | bool | keep (bool, >= 1 True per row)
    block: tuple[int, int] | None = None  # bsr

    def describe(self) -> str:
        extra = f" blocks {self.block}" if self.block else ""
        return f"{self.name}: {self.kind} {list(self.shape)} {self.layout} density {self.density}{extra}"


def _values(spec: InputSpec, rng: np.random.Generator) -> np.ndarray:
    shape = spec.shape
    if spec.kind in ("bool", "keep"):
        m = rng.random(shape) < spec.density
        if spec.kind == "keep" and len(shape) >= 1 and shape[-1] > 0:
            flat = m.reshape(-1, shape[-1])
            flat[np.arange(flat.shape[0]), rng.integers(0, shape[-1], flat.shape[0])] = True
        return m
    if spec.kind == "nonzero":
        return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)
    a = rng.standard_normal(shape)
    a[rng.random(shape) >= spec.density] = 0.0
    return a


def _coo_dup(a: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
    """An uncoalesced COO tensor whose duplicates sum to ``a``: every entry split in two parts,
    cancelling pairs (+p, -p) at some zero positions, coordinates shuffled."""
    nz = np.argwhere(a != 0)
    v = a[tuple(nz.T)]
    part = v * rng.uniform(-1.0, 2.0, len(v))
    zeros = np.argwhere(a == 0)
    pick = zeros[rng.random(len(zeros)) < 0.2]
    p = rng.standard_normal(len(pick))
    idx = np.concatenate([nz, nz, pick, pick]).reshape(-1, a.ndim)
    vals = np.concatenate([part, v - part, p, -p])
    order = rng.permutation(len(vals))
    return torch.sparse_coo_tensor(torch.tensor(idx[order].T.copy(), dtype=torch.int64),
                                   torch.tensor(vals[order]), a.shape, dtype=torch.float64)


def _csr_zeros(a: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
    """A CSR tensor of ``a`` that also stores explicit zeros at some zero positions."""
    keep = (a != 0) | (rng.random(a.shape) < 0.3)
    crow = np.concatenate([[0], np.cumsum(keep.sum(1))])
    rows, cols = np.nonzero(keep)
    return torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(cols, dtype=torch.int64),
                                   torch.tensor(a[rows, cols]), a.shape, dtype=torch.float64)


_TORCH_LAYOUT: dict[str, Callable] = {
    "csr": lambda t, s, rng: t.to_sparse_csr(),
    "csc": lambda t, s, rng: t.to_sparse_csc(),
    "coo": lambda t, s, rng: t.to_sparse_coo(),
    "bsr": lambda t, s, rng: t.to_sparse_bsr(s.block),
    "coo_dup": lambda t, s, rng: _coo_dup(t.numpy(), rng),
    "csr_zeros": lambda t, s, rng: _csr_zeros(t.numpy(), rng),
}


def make_input(spec: InputSpec, rng: np.random.Generator) -> torch.Tensor:
    a = _values(spec, rng)
    t = torch.tensor(a)
    if spec.layout in _TORCH_LAYOUT:
        return _TORCH_LAYOUT[spec.layout](t, spec, rng)
    return t


def dense_of(t):
    """The dense tensor a (torch sparse or dense) input stores: duplicates summed."""
    if isinstance(t, torch.Tensor) and t.layout != torch.strided:
        return t.to_dense()
    return t


# ----------------------------------------------------------------------------- the case
@dataclass
class Case:
    seed: int
    inputs: list[InputSpec]
    init: list[str]
    body: list[str]
    result: str
    formats: dict[str, str] = field(default_factory=dict)
    ops: list[str] = field(default_factory=list)

    def source(self) -> str:
        sig = ", ".join(i.name for i in self.inputs)
        ind = "\n        "
        return ("class Fuzz(nn.Module):\n    def __init__(self):\n        super().__init__()"
                + "".join(ind + line for line in self.init)
                + f"\n\n    def forward(self, {sig}):" + "".join(ind + line for line in self.body)
                + f"{ind}return {self.result}\n")

    def key(self) -> str:
        return hashlib.sha1(repr(self.to_json()).encode()).hexdigest()[:10]

    def describe(self) -> str:
        ins = "\n".join(f"#   {i.describe()}" for i in self.inputs)
        fm = f"\n# formats={self.formats}" if self.formats else ""
        return f"# seed {self.seed}; ops: {', '.join(self.ops)}\n# inputs:\n{ins}{fm}\n{self.source()}"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Case:
        ins = [InputSpec(**dict(i, shape=tuple(i["shape"]), block=tuple(i["block"]) if i["block"] else None))
               for i in d["inputs"]]
        return cls(**dict(d, inputs=ins))

    def module_class(self):
        src = self.source()
        fname = f"<fuzz {self.key()}>"
        linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
        ns = {"torch": torch, "nn": nn, "F": F}
        exec(compile(src, fname, "exec"), ns)  # noqa: S102 - the generated module
        return ns["Fuzz"]

    def build(self):
        """(module, inputs as given to trace, formats): float64 parameters seeded by ``seed``."""
        cls = self.module_class()
        torch.manual_seed(self.seed)
        m = cls().double().eval()
        rng = np.random.default_rng(self.seed)
        return m, {s.name: make_input(s, rng) for s in self.inputs}, dict(self.formats)

    def probe(self, module, dense: dict) -> dict:
        """Every value the forward computes on the dense inputs (to bound intermediates)."""
        sig = ", ".join(i.name for i in self.inputs)
        src = f"def probe(self, {sig}):\n" + "".join(f"    {line}\n" for line in self.body) + "    return locals()\n"
        ns = {"torch": torch, "nn": nn, "F": F}
        exec(src, ns)  # noqa: S102 - the generated module's body
        with torch.no_grad():
            return ns["probe"](module, **dense)


# ----------------------------------------------------------------------------- the generator
@dataclass
class Val:
    name: str
    shape: tuple[int, ...]


class Gen:
    """The state while a case is drawn: inputs, module lines, values."""

    def __init__(self, d) -> None:
        self.d = d
        self.inputs: list[InputSpec] = []
        self.init: list[str] = []
        self.body: list[str] = []
        self.ops: list[str] = []
        self.vals: list[Val] = []
        self.formats: dict[str, str] = {}
        self.count: dict[str, int] = {}

    def name(self, prefix: str) -> str:
        k = self.count.get(prefix, 0)
        self.count[prefix] = k + 1
        return f"{prefix}{k}"

    def emit(self, op: str, expr: str, shape) -> Val:
        v = Val(f"h{len(self.vals)}", tuple(int(s) for s in shape))
        self.body.append(f"{v.name} = {expr}")
        self.vals.append(v)
        self.ops.append(op)
        return v

    def layout(self, rank: int, sparse_p: float = 1.0) -> str:
        table = LAYOUTS.get(rank, [("dense", 1)])
        if not self.d.boolean(sparse_p):
            return "dense"
        return self.d.weighted(table)

    def input(self, shape, kind: str = "float", layout: str = "dense", prefix: str = "y") -> str:
        name = prefix if prefix == "x" else self.name(prefix)
        shape = tuple(int(s) for s in shape)
        density = self.d.weighted(DENSITIES) if kind != "nonzero" else 1.0
        if kind == "keep":
            density = self.d.choice([0.1, 0.3, 0.6, 1.0])
        spec = InputSpec(name, shape, layout, density, kind)
        if layout == "bsr":
            spec.block = self.block(shape)
        if layout.startswith("ann:"):
            self.formats[name] = layout[4:]
        self.inputs.append(spec)
        return name

    def block(self, shape) -> tuple[int, int]:
        fits = [(a, b) for a in (1, 2, 3) for b in (1, 2, 3)
                if shape[0] % a == 0 and shape[1] % b == 0]
        return self.d.choice(fits)

    def shaped_input(self, shape, kind: str = "float", sparse_p: float = 0.3, prefix: str = "y") -> str:
        layout = self.layout(len(shape), sparse_p) if kind == "float" else "dense"
        if layout == "bsr" and len(shape) != 2:
            layout = "dense"
        return self.input(shape, kind, layout, prefix)


def _size(d, lo: int = 0) -> int:
    return d.weighted([(s, w) for s, w in DIMS if s >= lo])


def _c(d) -> str:
    return d.choice(["2.0", "-0.5", "3.0", "0.25", "1.0", "-1.5"])


# ---- elementwise
UNARY = [
    ("relu", "torch.relu({h})"), ("relu", "F.relu({h})"), ("neg", "-{h}"), ("exp", "torch.exp({h})"),
    ("sigmoid", "torch.sigmoid({h})"), ("tanh", "torch.tanh({h})"), ("gelu", "F.gelu({h})"),
    ("gelu_tanh", 'F.gelu({h}, approximate="tanh")'), ("abs", "{h}.abs()"),
    ("clamp", "torch.clamp({h}, {lo}, {hi})"), ("clamp_min", "{h}.clamp(min={lo})"),
    ("clamp_max", "{h}.clamp(max={hi})"), ("leaky_relu", "F.leaky_relu({h}, {slope})"),
    ("hardtanh", "F.hardtanh({h})"), ("rsqrt", "torch.rsqrt({h} * {h} + {eps})"),
    ("pow", "{h}.pow({e})"), ("pow", "{h} ** {e}"), ("pow_frac", "({h} * {h} + 1.0) ** {ef}"),
    ("sqrt_div", "{h} / torch.sqrt({h} * {h} + 1.0)"), ("rsqrt_raw", "torch.rsqrt({h}.abs() + 0.5)"),
]


def op_unary(g: Gen, v: Val) -> Val:
    op, tpl = g.d.choice(UNARY)
    d = g.d
    expr = tpl.format(h=v.name, lo=d.choice(["-0.5", "0.0", "0.3"]), hi=d.choice(["0.5", "1.0"]),
                      slope=d.choice(["0.01", "0.2"]), eps=d.choice(["1.0", "1e-05"]),
                      e=d.choice(["1", "2", "3", "4"]), ef=d.choice(["0.5", "-0.5"]))
    return g.emit(op, expr, v.shape)


SCALAR = ["{h} + {c}", "{h} - {c}", "{c} - {h}", "{h} * {c}", "{c} * {h}", "{h} / {c}", "1 - {h}",
          "torch.add({h}, {c})", "torch.mul({h}, {c})"]


def op_scalar(g: Gen, v: Val) -> Val:
    tpl = g.d.choice(SCALAR)
    return g.emit("scalar", tpl.format(h=v.name, c=_c(g.d)), v.shape)


def _operand(g: Gen, v: Val, nonzero: bool) -> tuple[str, tuple[int, ...]]:
    """A second operand broadcast-compatible with ``v``: (expression, shape)."""
    s, r = v.shape, len(v.shape)
    kinds = ["same", "row"] + (["col"] if r >= 2 else []) + (["keepdim"] if r >= 1 and s[-1] > 0 else [])
    if not nonzero:
        kinds += ["self", "prev", "same"]
    kind = g.d.choice(kinds) if r >= 1 else "same"
    kind_in = "nonzero" if nonzero else "float"
    if kind == "row":
        return g.shaped_input(s[-1:], kind_in, 0.1), s[-1:]
    if kind == "col":
        return g.shaped_input(s[:-2] + (s[-2], 1), kind_in, 0.0), s[:-2] + (s[-2], 1)
    if kind == "keepdim":
        e = f"(({v.name} * {v.name}).sum(-1, keepdim=True) + 1.0)" if nonzero else f"{v.name}.mean(-1, keepdim=True)"
        return e, s[:-1] + (1,)
    if kind == "self":
        return v.name, s
    prev = [p for p in g.vals if p.shape == s and p.name != v.name]
    if kind == "prev" and prev:
        return g.d.choice(prev).name, s
    return g.shaped_input(s, kind_in, 0.0 if nonzero else 0.4), s


BINARY = {"add": ["{a} + {b}", "torch.add({a}, {b})", "torch.add({a}, {b}, alpha=2.0)"],
          "sub": ["{a} - {b}", "torch.sub({a}, {b}, alpha=0.5)"], "mul": ["{a} * {b}", "torch.mul({a}, {b})"],
          "div": ["{a} / {b}", "torch.div({a}, {b})"], "maximum": ["torch.maximum({a}, {b})"],
          "minimum": ["torch.minimum({a}, {b})"]}


def op_binary(g: Gen, v: Val) -> Val:
    kind = g.d.choice(list(BINARY))
    other, shape = _operand(g, v, kind == "div")
    a, b = v.name, other
    if kind != "div" and g.d.boolean(0.3):
        a, b = b, a
    out = tuple(torch.broadcast_shapes(v.shape, shape))
    return g.emit(kind, g.d.choice(BINARY[kind]).format(a=a, b=b), out)


# ---- reductions
RED_DIM = {"sum": ["{h}.sum({d}, keepdim={k})", "torch.sum({h}, dim={d}, keepdim={k})"],
           "mean": ["{h}.mean({d}, keepdim={k})", "torch.mean({h}, {d}, keepdim={k})"],
           "amax": ["{h}.amax({d}, keepdim={k})"], "amin": ["torch.amin({h}, {d}, keepdim={k})"],
           "max": ["torch.max({h}, {d}, keepdim={k})[0]", "{h}.max(dim={d}, keepdim={k}).values"],
           "min": ["{h}.min({d}, keepdim={k})[0]"],
           "var": ["{h}.var({d}, keepdim={k}, correction={c})", "torch.var({h}, {d}, unbiased={u}, keepdim={k})"],
           "std": ["{h}.std({d}, keepdim={k}, correction={c})"]}
RED_FULL = {"sum": "{h}.sum()", "mean": "{h}.mean()", "amax": "{h}.amax()", "amin": "torch.amin({h})",
            "max": "torch.max({h})", "min": "{h}.min()", "var": "{h}.var(correction={c})",
            "std": "{h}.std(correction={c})"}


def op_reduce(g: Gen, v: Val) -> Val | None:
    r = len(v.shape)
    if r == 0:
        return None
    op = g.d.choice(list(RED_DIM))
    if g.d.boolean(0.2):  # full reduction
        n = math.prod(v.shape)
        op = "sum" if n == 0 else op
        c = g.d.choice(["0", "1"]) if n > 1 else "0"
        return g.emit(f"{op}_all", RED_FULL[op].format(h=v.name, c=c), ())
    d = g.d.integer(0, r - 1)
    if v.shape[d] == 0:
        op = "sum"
    keep = g.d.boolean()
    c = g.d.choice(["0", "1"]) if v.shape[d] > 1 else "0"
    dtxt = str(d - r) if g.d.boolean(0.3) else str(d)
    if op == "sum" and r >= 2 and g.d.boolean(0.2):  # two dims
        d2 = (d + 1) % r
        dtxt = f"({min(d, d2)}, {max(d, d2)})"
        shape = tuple((1 if a in (d, d2) else s) for a, s in enumerate(v.shape) if keep or a not in (d, d2))
        return g.emit("sum2", RED_DIM["sum"][0].format(h=v.name, d=dtxt, k=keep), shape)
    shape = tuple((1 if a == d else s) for a, s in enumerate(v.shape) if keep or a != d)
    tpl = g.d.choice(RED_DIM[op])
    return g.emit(op, tpl.format(h=v.name, d=dtxt, k=keep, c=c, u=c == "1"), shape)


# ---- row functions
def op_softmax(g: Gen, v: Val) -> Val | None:
    r = len(v.shape)
    if r == 0:
        return None
    d = g.d.integer(0, r - 1)
    dtxt = str(d - r) if g.d.boolean(0.5) else str(d)
    tpl = g.d.choice(["torch.softmax({h}, dim={d})", "F.softmax({h}, dim={d})", "{h}.softmax({d})"])
    return g.emit(f"softmax{'_last' if d == r - 1 else ''}", tpl.format(h=v.name, d=dtxt), v.shape)


def op_layernorm(g: Gen, v: Val) -> Val | None:
    if len(v.shape) == 0 or v.shape[-1] == 0:
        return None
    n = v.shape[-1]
    name = g.name("ln")
    eps = g.d.choice(["1e-05", "0.001"])
    affine, bias = g.d.boolean(0.6), g.d.boolean(0.6)
    if g.d.boolean(0.6):
        g.init.append(f"self.{name} = nn.LayerNorm({n}, eps={eps}, elementwise_affine={affine}, bias={bias})")
        if affine:
            g.init.append(f"nn.init.normal_(self.{name}.weight)")
            if bias:
                g.init.append(f"nn.init.normal_(self.{name}.bias)")
        return g.emit("layernorm", f"self.{name}({v.name})", v.shape)
    w = b = "None"
    if affine:
        g.init.append(f"self.{name}_w = nn.Parameter(torch.randn({n}))")
        w = f"self.{name}_w"
    if bias:
        g.init.append(f"self.{name}_b = nn.Parameter(torch.randn({n}))")
        b = f"self.{name}_b"
    return g.emit("F.layer_norm", f"F.layer_norm({v.name}, ({n},), {w}, {b}, {eps})", v.shape)


# ---- products
def op_linear(g: Gen, v: Val) -> Val | None:
    if len(v.shape) == 0:
        return None
    out = g.d.choice([1, 2, 3, 5])
    bias = g.d.boolean(0.6)
    name = g.name("lin")
    g.init.append(f"self.{name} = nn.Linear({v.shape[-1]}, {out}, bias={bias})")
    if g.d.boolean(0.15):  # a sparse-annotated weight
        g.formats[f"{name}.weight"] = g.d.choice(["csc", "csr"])
    return g.emit("linear", f"self.{name}({v.name})", v.shape[:-1] + (out,))


def _matmul2(g: Gen, v: Val) -> Val:
    a, b = v.shape
    k = g.d.choice([1, 2, 3, 4])
    form = g.d.choice(["h@w", "w@h", "w@h", "hhT", "ij,ij->i", "ij,ik->jk", "sparse.mm"])
    h = v.name
    if form == "h@w":
        w = g.shaped_input((b, k), sparse_p=0.3, prefix="w")
        tpl = g.d.choice(["{h} @ {w}", "torch.mm({h}, {w})", "torch.matmul({h}, {w})",
                          'torch.einsum("ij,jk->ik", {h}, {w})'])
        return g.emit("matmul", tpl.format(h=h, w=w), (a, k))
    if form in ("w@h", "sparse.mm"):
        k = a if g.d.boolean() else k
        w = g.shaped_input((k, a), sparse_p=0.8 if form == "w@h" else 1.0, prefix="w")
        tpl = "torch.sparse.mm({w}, {h})" if form == "sparse.mm" else g.d.choice(["{w} @ {h}", "torch.mm({w}, {h})"])
        return g.emit(form, tpl.format(h=h, w=w), (k, b))
    if form == "hhT":
        return g.emit("matmul_hhT", g.d.choice(["{h} @ {h}.t()", 'torch.einsum("ij,kj->ik", {h}, {h})']).format(h=h),
                      (a, a))
    if form == "ij,ij->i":
        y = g.shaped_input((a, b), sparse_p=0.3)
        return g.emit("einsum_rowdot", f'torch.einsum("ij,ij->i", {h}, {y})', (a,))
    w = g.shaped_input((a, k), sparse_p=0.3, prefix="w")
    return g.emit("einsum_tn", f'torch.einsum("ij,ik->jk", {h}, {w})', (b, k))


def op_matmul(g: Gen, v: Val) -> Val | None:
    r = len(v.shape)
    k = g.d.choice([1, 2, 3])
    if r == 2:
        return _matmul2(g, v)
    if r == 1:
        w = g.shaped_input((v.shape[0], k), sparse_p=0.3, prefix="w")
        return g.emit("matvec", f"{v.name} @ {w}", (k,))
    if r == 3:
        bsz, a, b = v.shape
        if g.d.boolean():
            w = g.shaped_input((bsz, b, k), sparse_p=0.0, prefix="w")
            return g.emit("bmm", g.d.choice(["torch.bmm({h}, {w})", "{h} @ {w}"]).format(h=v.name, w=w), (bsz, a, k))
        w = g.shaped_input((b, k), sparse_p=0.3, prefix="w")
        return g.emit("matmul3x2", g.d.choice(["{h} @ {w}", 'torch.einsum("bij,jk->bik", {h}, {w})']).format(
            h=v.name, w=w), (bsz, a, k))
    return None


# ---- views
def _transpose(g: Gen, v: Val) -> Val | None:
    r = len(v.shape)
    if r < 2:
        return None
    if r == 2:
        tpl = g.d.choice(["{h}.t()", "{h}.T", "{h}.transpose(0, 1)", "torch.transpose({h}, -1, -2)"])
        return g.emit("transpose", tpl.format(h=v.name), v.shape[::-1])
    perm = list(g.d.choice(list(itertools.permutations(range(r)))))
    return g.emit("permute", f"{v.name}.permute({', '.join(map(str, perm))})", tuple(v.shape[p] for p in perm))


def _unsqueeze(g: Gen, v: Val) -> Val | None:
    r = len(v.shape)
    if r >= 3:
        return None
    d = g.d.integer(0, r)
    return g.emit("unsqueeze", f"{v.name}.unsqueeze({d})", v.shape[:d] + (1,) + v.shape[d:])


def _reshape(g: Gen, v: Val) -> Val | None:
    s, r = v.shape, len(v.shape)
    n = math.prod(s)
    if r >= 2 and g.d.boolean():
        return g.emit("flatten", g.d.choice(["{h}.reshape({n})", "{h}.flatten()"]).format(h=v.name, n=n), (n,))
    if r == 2:
        return g.emit("reshape", f"{v.name}.reshape({s[1]}, {s[0]})", (s[1], s[0]))
    splits = [(p, n // p) for p in (2, 3) if n % p == 0 and n > 0]
    if r == 1 and splits:
        p, q = g.d.choice(splits)
        return g.emit("reshape", f"{v.name}.reshape({p}, {q})", (p, q))
    if r == 3:
        return g.emit("reshape", f"{v.name}.reshape({s[0] * s[1]}, {s[2]})", (s[0] * s[1], s[2]))
    return None


def _slice(g: Gen, v: Val) -> Val | None:
    r = len(v.shape)
    if r == 0:
        return None
    d = g.d.integer(0, r - 1)
    n = v.shape[d]
    a = g.d.integer(0, n)
    b = g.d.integer(a, n)
    if d == 0 and g.d.boolean(0.3) and n >= 2:
        return g.emit("slice_step", f"{v.name}[::2]", ((n + 1) // 2,) + v.shape[1:])
    tpl = {0: "{h}[{a}:{b}]", 1: "{h}[:, {a}:{b}]"}.get(d, "{h}.narrow({d}, {a}, {ln})")
    if g.d.boolean(0.3):
        tpl = "{h}.narrow({d}, {a}, {ln})"
    shape = v.shape[:d] + (b - a,) + v.shape[d + 1:]
    return g.emit("slice", tpl.format(h=v.name, a=a, b=b, d=d, ln=b - a), shape)


def _select(g: Gen, v: Val) -> Val | None:
    dims = [d for d, s in enumerate(v.shape) if s > 0]
    if not dims:
        return None
    d = g.d.choice(dims)
    k = g.d.integer(0, v.shape[d] - 1)
    if g.d.boolean(0.3):
        k -= v.shape[d]
    tpl = {0: "{h}[{k}]", 1: "{h}[:, {k}]"}.get(d, "{h}.select({d}, {k})") if g.d.boolean() else "{h}.select({d}, {k})"
    return g.emit("select", tpl.format(h=v.name, d=d, k=k), v.shape[:d] + v.shape[d + 1:])


def _partner(g: Gen, v: Val, shape) -> str:
    """Something of ``shape`` to concatenate / stack with ``v``."""
    prev = [p for p in g.vals if p.shape == shape]
    pick = g.d.choice(["self", "expr", "input", "prev"])
    if pick == "self" and shape == v.shape:
        return v.name
    if pick == "expr" and shape == v.shape:
        return f"{v.name} * 2.0"
    if pick == "prev" and prev:
        return g.d.choice(prev).name
    return g.shaped_input(shape, sparse_p=0.2)


def _cat(g: Gen, v: Val) -> Val | None:
    r = len(v.shape)
    if r == 0:
        return None
    d = g.d.integer(0, r - 1)
    other = v.shape[:d] + (g.d.choice([v.shape[d], 1, 2]),) + v.shape[d + 1:]
    o = _partner(g, v, other)
    pair = [v.name, o] if g.d.boolean(0.7) else [o, v.name]
    shape = v.shape[:d] + (v.shape[d] + other[d],) + v.shape[d + 1:]
    return g.emit("cat", f"torch.cat([{pair[0]}, {pair[1]}], dim={d})", shape)


def _stack(g: Gen, v: Val) -> Val | None:
    r = len(v.shape)
    if r >= 3:
        return None
    d = g.d.integer(0, r)
    o = _partner(g, v, v.shape)
    return g.emit("stack", f"torch.stack([{v.name}, {o}], dim={d})", v.shape[:d] + (2,) + v.shape[d:])


def _split(g: Gen, v: Val) -> Val | None:
    dims = [d for d, s in enumerate(v.shape) if s > 0]
    if not dims:
        return None
    d = g.d.choice(dims)
    n = v.shape[d]
    form = g.d.choice(["chunk", "split", "unbind"])
    if form == "unbind":
        k = g.d.integer(0, n - 1)
        return g.emit("unbind", f"{v.name}.unbind({d})[{k}]", v.shape[:d] + v.shape[d + 1:])
    size = g.d.integer(1, n)
    parts = [min(size, n - a) for a in range(0, n, size)]
    k = g.d.integer(0, len(parts) - 1)
    expr = f"torch.split({v.name}, {size}, dim={d})[{k}]"
    if form == "chunk":
        chunks = g.d.integer(1, 3)
        size = -(-n // chunks)
        parts = [min(size, n - a) for a in range(0, n, size)]
        k = g.d.integer(0, len(parts) - 1)
        expr = f"{v.name}.chunk({chunks}, dim={d})[{k}]"
    return g.emit(form, expr, v.shape[:d] + (parts[k],) + v.shape[d + 1:])


VIEWS = [_transpose, _transpose, _unsqueeze, _reshape, _slice, _select, _cat, _stack, _split]


def op_view(g: Gen, v: Val) -> Val | None:
    return g.d.choice(VIEWS)(g, v)


# ---- masks
def op_masked_softmax(g: Gen, v: Val) -> Val | None:
    if len(v.shape) < 2 or v.shape[-1] == 0:
        return None
    m = g.input(v.shape[-2:], "keep", "dense", prefix="m")
    g.formats[m] = "csr"
    tpl = g.d.choice(['torch.softmax({h}.masked_fill(~{m}, float("-inf")), dim=-1)',
                      'F.softmax(torch.where({m}, {h}, float("-inf")), dim=-1)'])
    return g.emit("masked_softmax", tpl.format(h=v.name, m=m), v.shape)


def op_where(g: Gen, v: Val) -> Val | None:
    if len(v.shape) == 0:
        return None
    shape = v.shape if g.d.boolean(0.7) else v.shape[-1:]
    m = g.input(shape, "bool", "dense", prefix="m")
    if len(shape) == 2 and g.d.boolean(0.3):
        g.formats[m] = "csr"
    form = g.d.choice(["where_c", "where_t", "fill", "fill_not"])
    if form == "where_t":
        o = g.shaped_input(v.shape, sparse_p=0.2)
        return g.emit("where", f"torch.where({m}, {v.name}, {o})", v.shape)
    c = g.d.choice(["0.0", "1.5", "-2.0"])
    expr = {"where_c": f"torch.where({m}, {v.name}, {c})", "fill": f"{v.name}.masked_fill({m}, {c})",
            "fill_not": f"{v.name}.masked_fill(~{m}, {c})"}[form]
    return g.emit(form, expr, v.shape)


OPS = [(op_unary, 6), (op_scalar, 3), (op_binary, 5), (op_reduce, 4), (op_softmax, 3), (op_layernorm, 3),
       (op_linear, 3), (op_matmul, 3), (op_view, 4), (op_masked_softmax, 2), (op_where, 2)]


def _primary(g: Gen) -> Val:
    rank = g.d.weighted([(2, 6), (1, 1), (3, 2)])
    shape = tuple(_size(g.d) for _ in range(rank))
    layout = g.d.weighted(LAYOUTS[rank])
    g.input(shape, "float", layout, prefix="x")
    return Val("x", shape)


def gen_case(d, seed: int | None = None, max_ops: int = 6) -> Case:
    """One case from the chooser ``d`` (:mod:`draws`)."""
    g = Gen(d)
    v = _primary(g)
    n_ops = d.integer(1, max_ops)
    for _ in range(n_ops):
        nxt = None
        for _try in range(4):
            fn = d.weighted(OPS)
            nxt = fn(g, v)
            if nxt is not None:
                break
        v = nxt if nxt is not None else op_unary(g, v)
        if math.prod(v.shape) > 400:  # keep the simulations small
            break
    seed = seed if seed is not None else d.integer(0, 2**31 - 1)
    return Case(seed, g.inputs, g.init, g.body, v.name, g.formats, g.ops)


@st.composite
def cases(draw, max_ops: int = 6):
    return gen_case(HypDraw(draw), max_ops=max_ops)
