"""The vocabulary of primitive declarations: stream kinds, ALU / reduce / mask enums, typed
parameters and the :class:`PrimitiveSpec` record that each primitive family file declares.

A declaration says everything the rest of the toolkit needs to know about a primitive kind
without simulating it: its ports and their stream kinds, its parameters (a frozen dataclass
whose field types and defaults are the parameter schema), how it uses the tensor it names, its
latency and initiation interval, and its value rules.  The verifier, JSON load/save, DOT
labels, the CLI's primitive listing and the docs table are derived from these records
(:mod:`fuseflow.ir.primitives`, :mod:`fuseflow.ir.samml`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LANES_DOC",
    "MAX_VECTOR_LANES",
    "UNARY_ALU_OPS",
    "AluOp",
    "MaskPred",
    "ParamError",
    "Ports",
    "PrimitiveSpec",
    "ReduceOp",
    "ScalarPort",
    "StreamKind",
    "StreamType",
    "TensorUse",
    "alu_latency",
    "doc",
    "lanes_problems",
    "stream_lanes_problems",
    "val_lanes",
]


class StreamKind(enum.Enum):
    CRD = "crd"
    REF = "ref"
    VAL = "val"
    REPSIG = "repsig"


MAX_VECTOR_LANES = 64
LANES_DOC = "lanes of its value streams: 1 (scalars) or a power of two up to 64 (vectors of that many values)"


@dataclass(frozen=True)
class StreamType:
    """The type of a stream: its kind and, for a value stream, its lanes (values per token:
    1 for scalars, ``W`` for vectors of ``W`` values)."""

    kind: StreamKind
    lanes: int = 1

    def __str__(self) -> str:
        return self.kind.value if self.lanes == 1 else f"{self.kind.value}x{self.lanes}"


def lanes_problems(lanes: int, what: str = "lanes") -> list[str]:
    """``lanes`` is 1 or a power of two up to :data:`MAX_VECTOR_LANES`."""
    if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= MAX_VECTOR_LANES \
            or lanes & (lanes - 1):
        return [f"{what}={lanes!r} must be a power of two from 1 to {MAX_VECTOR_LANES}"]
    return []


def stream_lanes_problems(stream: StreamKind, lanes: int) -> list[str]:
    """:func:`lanes_problems`, and more than one lane only on a value stream."""
    bad = lanes_problems(lanes)
    if not bad and lanes > 1 and stream is not StreamKind.VAL:
        bad.append(f"lanes={lanes} needs stream=val (only value streams carry vectors), not {stream.value}")
    return bad


def val_lanes(ports: Mapping[str, StreamKind], lanes: int) -> dict[str, int]:
    """``lanes`` for every value port of ``ports`` (the default lane rule of a declaration)."""
    return {p: lanes for p, k in ports.items() if k is StreamKind.VAL}


class ScalarPort(enum.Enum):
    """Which operand of a vector ALU carries one value per token, broadcast to every lane."""

    NONE = "none"
    A = "a"
    B = "b"


class AluOp(enum.Enum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    MAX = "max"
    MIN = "min"
    DIV = "div"
    # unary (port ``a`` only); ``add_scalar`` / ``mul_scalar`` use the node's ``scalar``
    RELU = "relu"
    NEG = "neg"
    ADD_SCALAR = "add_scalar"
    MUL_SCALAR = "mul_scalar"
    EXP = "exp"
    RSQRT = "rsqrt"
    SIGMOID = "sigmoid"
    GELU = "gelu"


UNARY_ALU_OPS = frozenset({AluOp.RELU, AluOp.NEG, AluOp.ADD_SCALAR, AluOp.MUL_SCALAR, AluOp.EXP,
                           AluOp.RSQRT, AluOp.SIGMOID, AluOp.GELU})


def alu_latency(op: AluOp) -> int:
    """Pipeline stages of the binary ALU (its latency): 2 (operand and result registers), 4
    for ``mul`` (operands -> partial products -> summed product -> rounded / saturated result),
    so that a 32-bit multiply built from 18x18 DSP blocks is not one long path."""
    return 4 if op is AluOp.MUL else 2


class MaskPred(enum.Enum):
    """Coordinate-mask predicates: which (outer i, inner j) entries are *kept*."""

    CAUSAL = "causal"  # j <= i
    BAND = "band"  # i - before <= j <= i + after
    BLOCK = "block"  # pattern[i // block][j // block] != 0


class ReduceOp(enum.Enum):
    ADD = "add"
    MAX = "max"


class TensorUse(enum.Enum):
    """How a primitive uses the tensor its ``tensor`` parameter names (and so which memory
    arrays it holds: a level's ``seg``/``crd`` when that level is compressed, or ``vals``)."""

    READS_LEVEL = "reads a level"  # scanner: the host writes the level's arrays
    WRITES_LEVEL = "writes a level"  # level writer: the host reads them back
    READS_VALS = "reads the values"
    WRITES_VALS = "writes the values"

    @property
    def writes(self) -> bool:
        return self in (TensorUse.WRITES_LEVEL, TensorUse.WRITES_VALS)

    @property
    def level(self) -> bool:
        return self in (TensorUse.READS_LEVEL, TensorUse.WRITES_LEVEL)


class ParamError(ValueError):
    """Parameters that do not fit a primitive's declaration; ``problems`` lists each one."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


Ports = dict[str, StreamKind]


def doc(text: str, default: Any = dataclasses.MISSING) -> Any:
    """A parameter field with a one-line description (shown in the docs table and CLI)."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"doc": text})
    return dataclasses.field(default=default, metadata={"doc": text})


# ----------------------------------------------------------------------------- typed values
def _type_name(t: Any) -> str:
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return "|".join(m.value for m in t)
    if typing.get_origin(t) is tuple:
        inner = typing.get_args(t)[0]
        return f"list of {_type_name(inner)}"
    return getattr(t, "__name__", str(t))


def _coerce(value: Any, t: Any) -> Any:
    """``value`` as type ``t`` (enums from their text, tuples from lists); TypeError otherwise.
    Numbers are not converted (an int where a float is declared stays an int), so a graph
    saved after loading is byte-identical to its file."""
    if isinstance(t, type) and issubclass(t, enum.Enum):
        if isinstance(value, t):
            return value
        if isinstance(value, str):
            try:
                return t(value)
            except ValueError:
                pass
        raise TypeError(f"is not one of {[m.value for m in t]}")
    if typing.get_origin(t) is tuple:
        if not isinstance(value, list | tuple):
            raise TypeError(f"must be a list, got {value!r}")
        inner = typing.get_args(t)[0]
        return tuple(_coerce(v, inner) for v in value)
    if t is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"must be a number, got {value!r}")
        return value
    if t is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"must be an integer, got {value!r}")
    if t is bool and not isinstance(value, bool):
        raise TypeError(f"must be true or false, got {value!r}")
    if t is str and not isinstance(value, str):
        raise TypeError(f"must be text, got {value!r}")
    return value


@dataclass(frozen=True)
class NoParams:
    """A primitive without parameters."""


PortsFn = Callable[[Any], Ports]
LanesFn = Callable[[Any], tuple[Mapping[str, int], Mapping[str, int]]]


@dataclass(frozen=True)
class PrimitiveSpec:
    """The declaration of one primitive kind.

    ``params``: a frozen dataclass; its fields (types, defaults, :func:`doc` text) are the
    parameter schema, and its optional ``check()`` method returns value problems (messages).
    ``inputs`` / ``outputs``: the ports as a function of the typed parameters.  ``latency``:
    cycles from popping an input token to pushing the first output it causes (0 = the same
    cycle); an int or a function of the typed parameters.  Every output then takes one more
    cycle through its output FIFO before the consumer sees it.  ``ii``: initiation interval in
    steady state.  ``tensor``: how the node uses the tensor its ``tensor`` parameter names.
    ``source``: starts a graph (the root); ``sink``: a writer, whose completion ends a run.
    ``feedback``: input ports that close a loop (see the field); ``graph_check``: rules that
    depend on the graph around the node.  ``lanes``: the lanes of each port (see the field).
    """

    name: str
    family: str
    params: type
    inputs: PortsFn
    outputs: PortsFn
    summary: str
    latency: int | Callable[[Any], int] = 0
    ii: int = 1
    tensor: TensorUse | None = None
    source: bool = False
    # input ports (when present) that close a feedback loop: hints sent back from downstream,
    # such as a scanner's skip requests.  Edges into them are left out of the graph's
    # topological order and of FIFO sizing; the node pops their tokens in the cycle they
    # arrive, so they never hold their producer back.
    feedback: tuple[str, ...] = ()
    # rules that depend on the graph around the node (the format of the level it names, what
    # drives its inputs): a function of the graph and the node, returning problems; the
    # verifier calls it once the node's own parameters and tensor are valid
    graph_check: Callable[[Any, Any], list[str]] | None = None
    # the nesting level of each output stream (how many index loops enclose it: the root's
    # reference is at 0, a scanner's output one below its input) as a function of the typed
    # parameters and the input ports' levels; None: every output at the deepest input's level
    nesting: Callable[[Any, Mapping[str, int]], dict[str, int]] | None = None
    # the lanes of the ports, (inputs, outputs) by port name, as a function of the typed
    # parameters; ports not named carry one lane.  None: a kind with a ``lanes`` parameter has
    # that many on every value port (:func:`val_lanes`), any other kind one on every port
    lanes: LanesFn | None = None
    # how a latency that is a function of the parameters reads in the tables
    latency_doc: str = "by op"
    # the NodeKind member, set when the registry builds the enum from all declarations
    kind: Any = dataclasses.field(default=None, compare=False, repr=False)

    def out_levels(self, params: Any, levels: Mapping[str, int]) -> dict[str, int]:
        """The nesting level of each output port given the input ports' (see ``nesting``)."""
        if self.nesting is not None:
            return self.nesting(params, levels)
        deepest = max(levels.values(), default=0)
        return {port: deepest for port in self.outputs(params)}

    @property
    def sink(self) -> bool:
        return self.tensor is not None and self.tensor.writes

    # ------------------------------------------------------------------ schema
    def fields(self) -> tuple[dataclasses.Field, ...]:
        return dataclasses.fields(self.params)

    def hints(self) -> dict[str, Any]:
        return _hints(self.params)

    @property
    def defaults(self) -> dict[str, Any]:
        """Optional parameters and their defaults."""
        return {f.name: f.default for f in self.fields() if f.default is not dataclasses.MISSING}

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields() if f.default is dataclasses.MISSING)

    def coerce(self, raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Known parameters of ``raw`` converted to their declared types, and the problems
        (unknown names, wrong types).  Missing required parameters are not problems here."""
        hints = self.hints()
        out: dict[str, Any] = {}
        problems: list[str] = []
        for key, value in raw.items():
            if key not in hints:
                names = ", ".join(hints) or "no parameters"
                problems.append(f"unknown parameter {key!r} (takes {names})")
                continue
            try:
                out[key] = _coerce(value, hints[key])
            except TypeError as exc:
                t = hints[key]
                if isinstance(t, type) and issubclass(t, enum.Enum):
                    problems.append(f"{key} {_json(value)!r} {exc}")
                else:
                    problems.append(f"parameter {key!r} {exc}")
        return out, problems

    def typed(self, raw: Mapping[str, Any]) -> Any:
        """The parameters as the declared dataclass; :class:`ParamError` lists every problem
        (unknown, ill-typed, missing, or failing the declaration's value rules)."""
        values, problems = self.coerce(raw)
        problems += [f"missing parameter {k!r}" for k in self.required if k not in values]
        if problems:
            raise ParamError(problems)
        p = self.params(**values)
        check = getattr(p, "check", None)
        if check is not None and (bad := check()):
            raise ParamError(list(bad))
        return p

    def view(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with the coerced known parameters of ``raw`` (extra keys, such as
        the memory contents of a single-primitive run, are kept as they are)."""
        values, _ = self.coerce({k: v for k, v in raw.items() if k in self.hints()})
        return {**self.defaults, **raw, **values}

    def ports(self, raw: Mapping[str, Any]) -> tuple[Ports, Ports]:
        """Input and output ports for the parameters ``raw`` (defaults filled in).  Memoised per
        parameter values: graphs ask for the ports of every node many times (the verifier, the
        estimate, the simulators' set-up), and resolving them coerces every parameter."""
        return self._memoised(_PORTS, raw, self._ports)

    def _ports(self, raw: Mapping[str, Any]) -> tuple[Ports, Ports]:
        p = _Attrs(self.view(raw))
        return self.inputs(p), self.outputs(p)

    def port_types(self, raw: Mapping[str, Any]) -> tuple[dict[str, StreamType], dict[str, StreamType]]:
        """Input and output ports for the parameters ``raw`` as stream types (kind and lanes)."""
        return self._memoised(_TYPES, raw, self._port_types)

    def _memoised(self, memo: dict, raw: Mapping[str, Any], compute: Callable[[Mapping[str, Any]], tuple]) -> tuple:
        """``compute(raw)`` (a pair of port dictionaries), kept in ``memo`` per declaration and
        parameter values (when those are hashable); copies of the dictionaries out."""
        key = _frozen(raw)
        if key is None:
            return compute(raw)
        hit = memo.get((id(self), key))
        if hit is None:
            hit = memo[(id(self), key)] = compute(raw)
        return dict(hit[0]), dict(hit[1])

    def _port_types(self, raw: Mapping[str, Any]) -> tuple[dict[str, StreamType], dict[str, StreamType]]:
        p = _Attrs(self.view(raw))
        ins, outs = self.inputs(p), self.outputs(p)
        if self.lanes is not None:
            lin, lout = self.lanes(p)
        elif "lanes" in self.hints():
            lin, lout = val_lanes(ins, p.lanes), val_lanes(outs, p.lanes)
        else:
            lin, lout = {}, {}
        return ({q: StreamType(k, lin.get(q, 1)) for q, k in ins.items()},
                {q: StreamType(k, lout.get(q, 1)) for q, k in outs.items()})

    def node_latency(self, raw: Mapping[str, Any]) -> int:
        if not callable(self.latency):
            return self.latency
        key = _frozen(raw)
        if key is None:
            return self.latency(_Attrs(self.view(raw)))
        hit = _LATENCY.get((id(self), key))
        if hit is None:
            hit = _LATENCY[(id(self), key)] = self.latency(_Attrs(self.view(raw)))
        return hit

    # ------------------------------------------------------------------ documentation
    def param_type(self, name: str) -> str:
        """The declared type of parameter ``name`` as text (``int``, ``add|max``, ...)."""
        return _type_name(self.hints()[name])

    def param_text(self) -> str:
        hints = self.hints()
        parts = []
        for f in self.fields():
            t = _type_name(hints[f.name])
            parts.append(f"{f.name}: {t}" if f.default is dataclasses.MISSING
                         else f"{f.name}: {t} = {_shown(f.default)}")
        return ", ".join(parts) or "-"


def _json(v: Any) -> Any:
    return v.value if isinstance(v, enum.Enum) else v


def _shown(v: Any) -> str:
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, tuple):
        return "[]" if not v else str(list(v))
    return str(v).lower() if isinstance(v, bool) else str(v)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


class _Attrs:
    """Attribute access over a parameter mapping (port and latency functions take the
    parameters as attributes, whether they come typed or as a single-primitive run's dict)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update(values)


def stream_kind(value: Any, default: StreamKind) -> StreamKind:
    if value is None:
        return default
    return StreamKind(value) if isinstance(value, str) else value


# memoised port maps, stream types and latencies per (declaration, parameter values)
_PORTS: dict[tuple[int, tuple], tuple[Ports, Ports]] = {}
_TYPES: dict[tuple[int, tuple], tuple[dict, dict]] = {}
_LATENCY: dict[tuple[int, tuple], int] = {}


def _freeze(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def _frozen(raw: Mapping[str, Any]) -> tuple | None:
    """A hashable key of parameter values (None when one is not hashable, e.g. an array)."""
    try:
        key = tuple(sorted((k, _freeze(v)) for k, v in raw.items()))
        hash(key)
    except TypeError:
        return None
    return key
