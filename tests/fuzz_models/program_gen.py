"""Random float Einsum programs over the program-level ops with documented semantics
(docs/compiler.md): einsum products and sums, ``+ - * /``, ``maximum`` / ``minimum``, the unary
functions (relu, neg, exp, sigmoid, gelu, rsqrt), scalar factors and shifts, max / min
reductions, the row functions ``softmax`` (over the coordinates the iteration visits: a masked
softmax) and ``layernorm`` (over the whole fibre, implicit zeros included), with operands in
dense, CSR, DCSR, CSC and COO formats at densities 0 to 1.

The numpy reference here is written from the documentation, not by calling
``fuseflow.compiler.reference`` (the two could share a bug): dense numpy for the values, and a
*visited* mask per tensor for softmax (docs: stored entries of sparse inputs, intersections for
products, unions for sums, a reduction every coordinate some term reaches, densified iteration —
every coordinate — under functions with ``f(0) != 0`` and in max / min reductions).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np
from draws import HypDraw, RngDraw
from harness import Record, check, classify, max_err
from hypothesis import strategies as st

import fuseflow.compiler as fc
from fuseflow.compiler import Program, compile_program, einsum, run_program
from sw_sim import run_graph

__all__ = ["ProgCase", "gen_program", "programs", "reference", "run_program_case", "run_program_seed"]

FORMATS = [("dense", 3), ("csr", 3), ("dcsr", 1), ("csc", 1), ("coo", 1)]
DENS = [0.0, 0.3, 0.6, 1.0]
SIZES = [1, 2, 3, 4]


@dataclass
class ProgCase:
    seed: int
    sizes: dict[str, int]
    inputs: list[list]  # [name, indices, format, density, kind]
    stmts: list[list]  # [name, indices, op, args, param]
    regions: int = 1  # the statements split into this many consecutive regions
    outputs: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"seed": self.seed, "sizes": self.sizes, "inputs": self.inputs, "stmts": self.stmts,
                "regions": self.regions, "outputs": self.outputs}

    def describe(self) -> str:
        ins = "; ".join(f"{n}[{ix}] {f} d={d} {k}" for n, ix, f, d, k in self.inputs)
        st_ = "\n".join(f"  {n}[{ix}] = {op}({', '.join(a)}{'' if p is None else f', {p}'})"
                        for n, ix, op, a, p in self.stmts)
        return f"program seed {self.seed} sizes {self.sizes}\n  inputs: {ins}\n{st_}\n  outputs {self.outputs}"


# ----------------------------------------------------------------------------- generation
class _PG:
    def __init__(self, d) -> None:
        self.d = d
        self.inputs: list[list] = []
        self.stmts: list[list] = []

    def inp(self, idx: str, kind: str = "float", dense: bool = False) -> str:
        name = f"{'ABCDEFGHIJ'[len(self.inputs)]}"
        fmt = "dense" if dense or kind == "nonzero" else self.d.weighted(FORMATS)
        if len(idx) == 1 and fmt != "dense":
            fmt = "compressed"
        if len(idx) != 2 and fmt in ("csr", "dcsr", "csc", "coo"):
            fmt = "dense"
        dens = 1.0 if kind == "nonzero" else self.d.choice(DENS)
        self.inputs.append([name, idx, fmt, dens, kind])
        return name

    def let(self, idx: str, op: str, args: list[str], param=None) -> tuple[str, str]:
        name = f"T{len(self.stmts)}"
        self.stmts.append([name, idx, op, args, param])
        return name, idx


def _first(g: _PG) -> tuple[str, str]:
    form = g.d.choice(["input", "matmul", "hadamard", "sum", "transpose", "mask_scores"])
    if form == "matmul":
        return g.let("ij", "einsum", [g.inp("ik"), g.inp("kj")], "ik,kj->ij")
    if form == "hadamard":
        return g.let("ij", "einsum", [g.inp("ij"), g.inp("ij")], "ij,ij->ij")
    if form == "sum":
        return g.let("ij", "add", [g.inp("ij"), g.inp("ij")])
    if form == "transpose":
        return g.let("ij", "einsum", [g.inp("ji")], "ji->ij")
    if form == "mask_scores":  # S = M ⊙ (Q·Kᵀ): the masked attention scores
        m = g.inp("ij", "mask")
        return g.let("ij", "einsum", [m, g.inp("ik", dense=True), g.inp("jk", dense=True)], "ij,ik,jk->ij")
    return g.let("ij", "einsum", [g.inp("ij")], "ij->ij")


UNARY = ["relu", "neg", "exp", "sigmoid", "gelu"]


def _next(g: _PG, t: str, idx: str) -> tuple[str, str]:
    op = g.d.weighted([("unary", 4), ("rsqrt1", 1), ("scale", 2), ("shift", 2), ("rsub", 1), ("binary", 3),
                       ("div", 2), ("reduce_max", 2), ("reduce_sum", 1), ("softmax", 3), ("layernorm", 2),
                       ("contract", 2), ("matmul", 1), ("reduce_all", 1)])
    c = g.d.choice([2.0, -0.5, 1.5])
    if op == "unary":
        return g.let(idx, g.d.choice(UNARY), [t])
    if op in ("scale", "shift", "rsub", "rsqrt1"):
        return g.let(idx, op, [t], c)
    if op == "binary":
        other = g.inp(idx if g.d.boolean(0.7) else idx[-1])
        return g.let(idx, g.d.choice(["add", "sub", "mul", "maximum", "minimum"]), [t, other])
    if op == "div":
        return g.let(idx, "div", [t, g.inp(idx if g.d.boolean() else idx[-1], "nonzero")])
    if op in ("reduce_max", "reduce_sum"):
        if len(idx) < 2:
            return g.let(idx, "relu", [t])
        how = "add" if op == "reduce_sum" else g.d.choice(["max", "min"])
        keep = g.d.choice(list(idx))
        return g.let(keep, "reduce", [t], [f"{idx}->{keep}", how])
    if op == "reduce_all":  # a 0-d result
        return g.let("", "reduce", [t], [f"{idx}->", g.d.choice(["add", "max"])])
    if op == "contract" and len(idx) == 2:  # a row (or column) picked / weighted by a vector
        c = g.d.choice(list(idx))
        rest = idx.replace(c, "")
        return g.let(rest, "einsum", [t, g.inp(c)], f"{idx},{c}->{rest}")
    if op == "matmul" and len(idx) == 2 and "k" not in idx:
        return g.let(idx[0] + "k", "einsum", [t, g.inp(idx[1] + "k")], f"{idx},{idx[1]}k->{idx[0]}k")
    if op == "softmax":
        return g.let(idx, "softmax", [t])
    return g.let(idx, "layernorm", [t], g.d.choice([1e-5, 1e-3]))


def gen_program(d, seed: int | None = None) -> ProgCase:
    g = _PG(d)
    sizes = {c: d.choice(SIZES) for c in "ijk"}
    t, idx = _first(g)
    for _ in range(d.integer(0, 3)):
        if not idx:
            break
        t, idx = _next(g, t, idx)
    outputs = [t]
    if len(g.stmts) >= 3 and d.boolean(0.3):
        outputs.insert(0, g.stmts[len(g.stmts) // 2][0])
    seed = seed if seed is not None else d.integer(0, 2**31 - 1)
    return ProgCase(seed, sizes, g.inputs, g.stmts, d.choice([1, 2]), outputs)


@st.composite
def programs(draw):
    return gen_program(HypDraw(draw))


# ----------------------------------------------------------------------------- data
def make_data(pc: ProgCase) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(pc.seed)
    data = {}
    for name, idx, _fmt, dens, kind in pc.inputs:
        shape = tuple(pc.sizes[c] for c in idx)
        if kind == "nonzero":
            a = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)
        elif kind == "mask":
            a = (rng.random(shape) < max(dens, 0.3)).astype(np.float64)
        else:
            a = rng.standard_normal(shape)
            a[rng.random(shape) >= dens] = 0.0
        data[name] = a
    return data


# ----------------------------------------------------------------------------- build
def _expr(op: str, a: list, param):
    if op in (*UNARY, "softmax"):  # the program-level function of that name
        return getattr(fc, op)(a[0])
    two = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
           "div": lambda x, y: x / y, "maximum": fc.maximum, "minimum": fc.minimum}
    if op in two:
        return two[op](a[0], a[1])
    if op == "einsum":
        return einsum(param, *a)
    if op == "reduce":
        return einsum(param[0], a[0], reduce=param[1])
    if op == "layernorm":
        return fc.layernorm(a[0], param)
    return {"scale": lambda: a[0] * param, "shift": lambda: a[0] + param, "rsub": lambda: param - a[0],
            "rsqrt1": lambda: fc.rsqrt(a[0] * a[0] + 1.0)}[op]()


def build(pc: ProgCase) -> Program:
    p = Program(f"fz{pc.seed}")
    h = {}
    for name, idx, fmt, _dens, _kind in pc.inputs:
        shape = tuple(pc.sizes[c] for c in idx)
        h[name] = p.tensor(name, shape, fmt)
    lets = []
    for name, _idx, op, args, param in pc.stmts:
        h[name] = p.let(name, _expr(op, [h[a] for a in args], param))
        lets.append(h[name])
    cut = max(1, len(lets) // pc.regions)
    for k in range(0, len(lets), cut):
        p.region(*lets[k:k + cut])
    p.output(*[h[o] for o in pc.outputs])
    return p


# ----------------------------------------------------------------------------- reference
def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf, otypes=[float])(x / math.sqrt(2.0)))


NUMPY = {"relu": lambda x: np.maximum(x, 0.0), "neg": np.negative, "exp": np.exp,
         "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "gelu": _gelu}
ZERO_PRESERVING = {"relu", "neg", "gelu", "scale"}


def _softmax(x: np.ndarray, vis: np.ndarray) -> np.ndarray:
    """Along the last axis over the visited coordinates (others -inf: 0 after softmax)."""
    z = np.where(vis, x, -np.inf)
    mx = np.max(z, axis=-1, keepdims=True) if z.shape[-1] else z
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.where(vis, np.exp(z - mx), 0.0)
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def _layernorm(x: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def _step(op: str, vals: list, viss: list, idxs: list[str], out: str, param):
    """(value, visited) of one statement from its operands' (numpy, docs/compiler.md)."""
    if op == "einsum":
        spec = param
        v = np.einsum(spec, *vals)
        vis = np.einsum(spec, *[m.astype(np.float64) for m in viss]) > 0
        return v, vis
    if op == "reduce":
        axis = tuple(k for k, c in enumerate(idxs[0]) if c not in param[0].split("->")[1])
        f = {"max": np.max, "min": np.min, "add": np.sum}[param[1]]
        v = f(vals[0], axis=axis)
        vis = np.ones(v.shape, bool) if param[1] != "add" else viss[0].any(axis=axis)
        return v, vis
    if op in ("add", "sub", "maximum", "minimum", "mul", "div"):
        f = {"add": np.add, "sub": np.subtract, "maximum": np.maximum, "minimum": np.minimum,
             "mul": np.multiply, "div": np.true_divide}[op]
        v = f(vals[0], vals[1])
        vis = (viss[0] | viss[1]) if op in ("add", "sub", "maximum", "minimum") else (viss[0] & viss[1])
        return v, np.broadcast_to(vis, v.shape)
    if op == "softmax":
        return _softmax(vals[0], viss[0]), viss[0]
    if op == "layernorm":
        return _layernorm(vals[0], param), np.ones(vals[0].shape, bool)
    v = NUMPY[op](vals[0]) if op in NUMPY else {"scale": lambda x: x * param, "shift": lambda x: x + param,
                                               "rsub": lambda x: param - x,
                                               "rsqrt1": lambda x: 1.0 / np.sqrt(x * x + 1.0)}[op](vals[0])
    vis = viss[0] if op in ZERO_PRESERVING else np.ones(v.shape, bool)
    return v, vis


def reference(pc: ProgCase, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output's dense value, by the documented semantics."""
    env = dict(data)
    vis = {n: (np.ones(data[n].shape, bool) if fmt == "dense" else data[n] != 0)
           for n, _ix, fmt, _d, _k in pc.inputs}
    idx = {n: ix for n, ix, *_ in pc.inputs}
    for name, out, op, args, param in pc.stmts:
        env[name], vis[name] = _step(op, [env[a] for a in args], [vis[a] for a in args],
                                     [idx[a] for a in args], out, param)
        idx[name] = out
    return {o: env[o] for o in pc.outputs}


# ----------------------------------------------------------------------------- running
def _schedules(pc: ProgCase, rnd: random.Random) -> list[dict]:
    out = [{"fusion": f} for f in ("unfused", "partial", "full")]
    extra = {"fusion": rnd.choice(["unfused", "partial", "full"]), "factored": rnd.random() < 0.7,
             "locate": rnd.random() < 0.8, "skip": rnd.random() < 0.4}
    sized = [c for c in "ij" if pc.sizes[c] >= 2]
    if sized and rnd.random() < 0.6:
        c = rnd.choice(sized)
        extra["par"] = {c: 2}
    used = sorted({c for st_ in pc.stmts for c in st_[1]} | {c for i in pc.inputs for c in i[1]})
    even = [c for c in used if pc.sizes[c] % 2 == 0]
    if rnd.random() < 0.2 and even:
        c = rnd.choice(even)
        extra["block"] = {_block_key(pc, c): 2}
        if extra.get("par") == {c: 2} and pc.sizes[c] // 2 < 2:
            # par 2 over a dimension of one block: no schedule a user writes (refused by par)
            del extra["par"]
    return out + [extra]


def _block_key(pc: ProgCase, c: str) -> str:
    """``c``, or ``T:c`` (the first statement T with it) when the letter names different
    dimensions in different statements (the block pass asks for the scoped form then)."""
    from fuseflow.compiler.passes.block import dimension_of

    try:
        dimension_of(build(pc), c)
    except Exception:  # noqa: BLE001 - ambiguous (or unknown): the scoped form
        first = next((st_[0] for st_ in pc.stmts if c in st_[1] or any(c in i[1] for i in pc.inputs
                                                                           if i[0] in st_[3])), None)
        return f"{first}:{c}" if first else c
    return c


def _one(pc: ProgCase, data, want, sched: dict) -> Record:
    label = " ".join(f"{k}={v}" for k, v in sched.items())
    stage = "compile"
    try:
        compiled = compile_program(build(pc), **sched)
        stage = "run"
        res = run_program(compiled, data, simulate=run_graph, numerics="float", max_cycles=2_000_000)
        got = {o: res.dense(o) for o in pc.outputs}
    except Exception as exc:  # noqa: BLE001 - every exception is a verdict
        verdict, why = classify(exc)
        return Record(label, verdict, why, stage=stage)
    for o in pc.outputs:
        why = check(o, got[o], want[o])
        if why is not None:
            return Record(label, "mismatch", why, max_err(got[o], want[o]), "check")
    return Record(label, "ok", "", 0.0, "check")


def run_program_case(pc: ProgCase) -> list[Record]:
    data = make_data(pc)
    with np.errstate(all="ignore"):
        want = reference(pc, data)
    if any(not np.all(np.isfinite(w)) for w in want.values()):
        return [Record("-", "invalid", "reference not finite", stage="reference")]
    return [_one(pc, data, want, s) for s in _schedules(pc, random.Random(pc.seed))]


def run_program_seed(seed: int) -> dict:
    """One seeded program for ``run_large.py``: its JSON line (without kind / seed / seconds)."""
    from dataclasses import asdict

    pc = gen_program(RngDraw(seed), seed=seed)
    return {"case": pc.to_json(), "records": [asdict(r) for r in run_program_case(pc)]}
