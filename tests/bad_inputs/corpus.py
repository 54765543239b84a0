"""The bad-input corpus: malformed or out-of-range inputs across every entry point -- the CLI's
options, graph files, tensor data files, schedules, sweep files, Einsum programs and the Python
API -- each with the message fragment a clear error must contain.

A case is run by :func:`run_case` (in-process, with a time limit) and classified as
``clear`` (the expected error, naming what was wrong), ``traceback`` (a Python traceback or the
"unexpected error" fallback reached the user), ``hang`` (no answer within the limit),
``silent`` (accepted) or ``wrong`` (an error, but not the expected message).
``tests/bad_inputs/test_corpus.py`` requires every case to be clear;
``tools/bad_inputs_report.py`` prints the counts.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import pickle
import signal
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fuseflow.kernels import example

TIME_LIMIT_S = 30


@dataclass(frozen=True)
class Case:
    """``argv`` (a CLI run; ``{d}`` is the case's scratch directory) or ``call`` (an API call
    taking that directory), ``says``: fragments the error message must contain; ``files``:
    file name -> writer of the file into the scratch directory."""

    id: str
    says: tuple[str, ...]
    argv: tuple[str, ...] = ()
    call: Callable[[Path], Any] | None = None
    files: dict[str, Callable[[Path], None]] = field(default_factory=dict)
    entry: str = "cli"


CASES: list[Case] = []


def cli(id_: str, argv: list[str] | str, *says: str, files: dict | None = None, entry: str = "cli") -> None:
    args = tuple(argv.split()) if isinstance(argv, str) else tuple(argv)
    CASES.append(Case(id_, tuple(says), argv=args, files=files or {}, entry=entry))


def api(id_: str, call: Callable[[Path], Any], *says: str, files: dict | None = None) -> None:
    CASES.append(Case(id_, tuple(says), call=call, files=files or {}, entry="api"))


def bad_file_cases(table: dict, file: str, runs: dict[str, list[str]], *, names=None,
                   base: dict | None = None, entry: str = "cli") -> None:
    """For each case of ``table`` (name -> (the writer of ``file``, or None: the file is missing;
    what the error says)), in ``names`` if given, one CLI case per run (id prefix -> argv) with
    ``file`` and the files of ``base`` written."""
    for name in table if names is None else names:
        writer, says = table[name]
        files = dict(base or {}) | ({file: writer} if writer else {})
        for prefix, argv in runs.items():
            cli(f"{prefix}:{name}", argv, says, files=files, entry=entry)


# --------------------------------------------------------------------------- file writers
def text(content: str) -> Callable[[Path], None]:
    return lambda p: p.write_text(content)


def raw(content: bytes) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(content)


def npz(**arrays) -> Callable[[Path], None]:
    def write(p: Path) -> None:
        with open(p, "wb") as f:
            np.savez(f, **arrays)
    return write


def _spmv_graph() -> dict:
    g, _, _, _ = example("spmv", 8, seed=0, density=0.5)
    return g.to_json()


GOOD = _spmv_graph()


def graph_json(mutate: Callable[[dict], Any]) -> Callable[[Path], None]:
    def write(p: Path) -> None:
        d = copy.deepcopy(GOOD)
        mutate(d)
        p.write_text(json.dumps(d))
    return write


def _spmv_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    _, data, _, _ = example("spmv", 8, seed=seed, density=0.5)
    return {"B": data["B"].to_dense().astype(np.int64), "c": data["c"].to_dense().astype(np.int64)}


def spmv_npz(**change) -> Callable[[Path], None]:
    arrays = _spmv_arrays()
    for k, v in change.items():
        if v is None:
            arrays.pop(k)
        else:
            arrays[k] = v
    return npz(**arrays)


# --------------------------------------------------------------------------- running a case
class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


@dataclass
class Outcome:
    verdict: str  # clear | traceback | hang | silent | wrong
    message: str


def _run_cli(case: Case, d: Path) -> tuple[int | None, str]:
    from fuseflow_cli.cli import main  # deferred: the corpus is importable without the CLI

    argv = [a.replace("{d}", str(d)) for a in case.argv]
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue() + out.getvalue()


def run_case(case: Case, d: Path, limit: int = TIME_LIMIT_S) -> Outcome:
    """Write the case's files into ``d``, run it and classify what the user would see."""
    for name, write in case.files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)  # a build directory's reports
        write(d / name)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    try:
        if case.call is not None:
            try:
                case.call(d)
            except (ValueError, TypeError, KeyError, LookupError, OSError) as exc:
                code, text_ = 2, f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, ValueError | OSError) or isinstance(exc, KeyError):
                    return Outcome("traceback", text_)  # not an error meant for a user
            else:
                code, text_ = 0, ""
        else:
            code, text_ = _run_cli(case, d)
    except _Timeout:
        return Outcome("hang", f"no answer within {limit} s")
    except Exception as exc:  # noqa: BLE001 - a crash the CLI's handler did not catch
        return Outcome("traceback", "".join(traceback.format_exception_only(exc)).strip())
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if "Traceback" in text_ or "unexpected error" in text_:
        return Outcome("traceback", text_)
    if code in (0, None):
        return Outcome("silent", text_)
    missing = [s for s in case.says if s.replace("{d}", str(d)) not in text_]
    if missing:
        return Outcome("wrong", f"missing {missing!r} in: {text_}")
    return Outcome("clear", text_)


# =========================================================================== the cases
# ---- numeric options of every command --------------------------------------------------
_NUMERIC = {
    # command base argv, option, [(value, fragment)]
    "sim": (["sim", "--kernel", "spmv"], {
        "--size": ["0", "-3", "x", "70000", "1.5"],
        "--density": ["0", "-0.1", "1.5", "nan", "inf", "x"],
        "--seed": ["-1", "x", "1.5"],
    }),
    "sim-model": (["sim", "--model", "gcn"], {
        "--hidden": ["0", "-1", "x"], "--features": ["0", "x"], "--nodes": ["0", "-5"],
    }),
    "rtl": (["rtl", "--kernel", "spmv", "--size", "8"], {
        "--size": ["0", "x"], "--vw": ["1", "65", "x"], "--max-cycles": ["0", "-1", "x"],
        "--density": ["2", "nan"], "--seed": ["-4"],
    }),
    "build": (["build", "--kernel", "spmv", "-o", "{d}/out"], {
        "--fifo-depth": ["0", "1", "1000000000", "-2", "x"], "--vw": ["0", "99"],
        "--size": ["0", "100000"],
    }),
    "synth": (["synth", "--kernel", "spmv", "-o", "{d}/out"], {
        "--clock-mhz": ["0", "-12", "nan", "x"], "--baud": ["0", "-9600", "x"], "--size": ["0"],
        "--ram-fifo-depth": ["0", "x"],
    }),
    "estimate": (["estimate", "--kernel", "spmv"], {
        "--rate": ["-0.5", "2", "nan", "x"], "--size": ["0"], "--density": ["0"],
    }),
    "rank": (["rank", "--model", "gcn"], {
        "--simulate": ["-1", "x"], "--top": ["0", "-1", "x"], "--per-group": ["0", "x"],
    }),
    "run": (["run", "--kernel", "spmv", "--sim"], {
        "--timeout": ["0", "-1", "nan", "x"], "--baud": ["0", "x"], "--density": ["3"],
    }),
    "sweep": (["sweep", "{d}/none.toml", "-o", "{d}/out"], {"--jobs": ["0", "-2", "x"]}),
}
for _name, (_base, _opts) in _NUMERIC.items():
    for _opt, _values in _opts.items():
        for _v in _values:
            cli(f"option:{_name}:{_opt}={_v}", [*_base, _opt, _v], _opt)

# ---- wave files: the suffix picks VCD or FST; the directory must exist ---------------------
for _sim in (["--sim", "amaranth"], []):
    _tag = "amaranth" if _sim else "native"
    cli(f"waves:rtl:{_tag}:suffix", ["rtl", "--kernel", "spmv", "--size", "8", *_sim, "--waves", "{d}/w.txt"],
        "w.txt", "name it .vcd or .fst")
    cli(f"waves:rtl:{_tag}:no-suffix", ["rtl", "--kernel", "spmv", "--size", "8", *_sim, "--waves", "{d}/w"],
        "name it .vcd or .fst")
    cli(f"waves:rtl:{_tag}:directory", ["rtl", "--kernel", "spmv", "--size", "8", *_sim, "--waves",
                                        "{d}/missing/w.fst"], "missing", "does not exist")
cli("choice:correlate:--runner", ["correlate", "--suite", "spine", "-o", "{d}/out", "--runner", "verilog"],
    "--runner", "verilog")

# ---- choices and names ------------------------------------------------------------------
for _cmd in ("sim", "rtl", "build", "estimate"):
    _extra = ["-o", "{d}/out"] if _cmd == "build" else []
    cli(f"choice:{_cmd}:--kernel", [_cmd, "--kernel", "spmx", *_extra], "--kernel", "spmx")
    _says = "unknown option --memory" if _cmd == "build" else "hbm9"
    cli(f"choice:{_cmd}:--memory", [_cmd, "--kernel", "spmv", "--memory", "hbm9", *_extra], _says)
    _says = "unknown option --memory" if _cmd == "build" else "'Q'"
    cli(f"choice:{_cmd}:--onchip", [_cmd, "--kernel", "spmv", "--memory", "hbm2", "--onchip", "Q", *_extra], _says)
    cli(f"choice:{_cmd}:no-graph", [_cmd, *_extra], "GRAPH")
for _cmd in ("sim", "build", "estimate", "rank", "synth"):
    _extra = ["-o", "{d}/out"] if _cmd == "build" else (["-o", "{d}/out", "--board", "icestick"] if _cmd == "synth" else [])
    cli(f"choice:{_cmd}:--model", [_cmd, "--model", "bert", *_extra], "--model", "bert")
    cli(f"choice:{_cmd}:--fusion", [_cmd, "--model", "gcn", "--fusion", "half", *_extra], "--fusion", "half")
    cli(f"choice:{_cmd}:--dataset", [_cmd, "--model", "gcn", "--dataset", "imagenet", *_extra], "imagenet")
cli("choice:sim:--numerics", "sim --model gcn --numerics q99.99", "q99.99")
cli("choice:sim:--numerics-int", "sim --model gcn --numerics int32", "--numerics int32")
cli("choice:sim:--numerics-word", "sim --model gcn --numerics half", "half")
cli("choice:build:--numerics-float", ["build", "--kernel", "spmv", "-o", "{d}/o", "--numerics", "float"], "float")
cli("choice:rtl:--runner", "rtl --kernel spmv --runner iverilog", "--runner", "iverilog")
cli("choice:rtl:--sim", "rtl --kernel spmv --sim iverilog", "--sim", "iverilog")
cli("choice:rtl:--sim-runner", "rtl --kernel spmv --sim amaranth --runner cocotb", "--runner cocotb", "--sim amaranth")
cli("choice:rtl:--cw", "rtl --kernel spmv --cw wide", "--cw 'wide'")
cli("choice:rtl:--cw-narrow", "rtl --kernel spmv --size 8 --cw 3", "--cw 3")
cli("choice:synth:--board", ["synth", "--kernel", "spmv", "-o", "{d}/o", "--board", "de10"], "unknown board 'de10'")
cli("choice:flash:--board", "flash --board de10 {d}/none", "unknown board 'de10'")
cli("graph:node-name-space", ["sim", "{d}/g.json"], "node name 'scan B'", "spaces",
    files={"g.json": graph_json(lambda d: d["nodes"].append({"name": "scan B", "kind": "root", "params": {}}))},
    entry="graph")
cli("inputs:pickle-not-torch", ["sim", "--model", "examples/pyg_models.py:gcn", "--inputs", "{d}/x.pt"],
    "x.pt: not a readable torch.save file", "other than tensors",
    files={"x.pt": lambda p: p.write_bytes(pickle.dumps({"x": object}))})
cli("inputs:truncated-pt", ["sim", "--model", "examples/pyg_models.py:gcn", "--inputs", "{d}/x.pt"],
    "not a torch.save archive", files={"x.pt": raw(b"PK\x03\x04cut")})
cli("inputs:string-arrays", ["sim", "--model", "examples/pyg_models.py:gcn", "--inputs", "{d}/x.npz"],
    "array 'x' holds <U1 values", files={"x.npz": npz(x=np.array(["a", "b"]))})
cli("flash:report-damaged", ["flash", "--board", "icebreaker", "{d}/b"], "synth_report.json' is not valid JSON",
    files={"b/synth_report.json": text('{"board": ')})
cli("flash:report-keys", ["flash", "--board", "icebreaker", "{d}/b"], "has no board / bitstream",
    files={"b/synth_report.json": text("{}")})
cli("choice:correlate:--suite", ["correlate", "--suite", "everything", "-o", "{d}/o"], "invalid choice: 'everything'", "'spine'")
cli("choice:compile:--fusion", "compile {d}/none.py --fusion half", "--fusion", "half")
cli("choice:unknown-command", "simulate --kernel spmv", "simulate")
cli("choice:unknown-option", "sim --kernel spmv --speed 3", "--speed")
cli("choice:sim:--sat-value", "sim --kernel spmv --saturate yes", "not both")

# ---- options that do not apply are refused, not ignored --------------------------------
for _cmd in ("sim", "build"):
    _extra = ["-o", "{d}/out"] if _cmd == "build" else []
    cli(f"ignored:{_cmd}:--hidden-with-kernel", [_cmd, "--kernel", "spmv", "--hidden", "8", *_extra], "--hidden")
    cli(f"ignored:{_cmd}:--dataset-with-kernel", [_cmd, "--kernel", "spmv", "--dataset", "cora", *_extra], "--dataset")
    cli(f"ignored:{_cmd}:graph-and-kernel", [_cmd, "{d}/g.json", "--kernel", "spmv", *_extra], "not both",
        files={"g.json": graph_json(lambda d: None)})
cli("ignored:sim:--fusion-with-kernel", "sim --kernel spmv --fusion full", "--fusion")
cli("ignored:sim:--numerics-unknown", "sim --kernel spmv --numerics int8", "--numerics int8")
cli("ignored:rtl:--vw-with-fixed-point", "rtl --kernel spmv --numerics q8.8 --vw 32", "--vw 32 and --numerics q8.8")
cli("ignored:sim:--explain-with-kernel", "sim --kernel spmv --explain", "--explain")
cli("ignored:build:max-nnz-unknown-tensor", ["build", "--kernel", "spmv", "-o", "{d}/o", "--max-nnz", "Q=8"], "'Q'")
cli("ignored:build:max-nnz-form", ["build", "--kernel", "spmv", "-o", "{d}/o", "--max-nnz", "B8"], "B8")
cli("ignored:build:max-nnz-zero", ["build", "--kernel", "spmv", "-o", "{d}/o", "--max-nnz", "B=0"], "B=0")
cli("ignored:build:max-nnz-word", ["build", "--kernel", "spmv", "-o", "{d}/o", "--max-nnz", "B=lots"], "B=lots")
cli("ignored:build:max-nnz-dense-tensor", ["build", "--kernel", "spmv", "-o", "{d}/o", "--max-nnz", "c=8"], "is dense")
cli("ignored:sim:--skip-nothing", "sim --kernel spmv --skip", "skip")
cli("ignored:sim:--schedule-fusion", "sim --kernel spmv --schedule full", "--schedule full")
cli("ignored:correlate:--list-unknown-suite", "correlate --list --suite nope -o x", "nope")
for _cmd in ("sim", "rtl", "build", "estimate", "synth"):
    _extra = {"build": ["-o", "{d}/out"], "synth": ["--board", "ulx3s-85f", "-o", "{d}/out"]}.get(_cmd, [])
    cli(f"kernel:{_cmd}:--block-pow2", [_cmd, "--kernel", "bspmm", "--block", "6", *_extra], "block size 6")
    cli(f"kernel:{_cmd}:--lanes-divisor", [_cmd, "--kernel", "bspmm", "--block", "4", "--lanes", "8", *_extra],
        "lanes=8 must be a power of two that divides the block size 4")
    cli(f"kernel:{_cmd}:--block-other-kernel", [_cmd, "--kernel", "spmv", "--block", "4", *_extra],
        "kernel 'spmv' takes no option block")
cli("kernel:sim:--block-zero", "sim --kernel bspmm --block 0", "--block")
cli("kernel:sim:--lanes-huge", "sim --kernel bspmm --lanes 128", "--lanes")
cli("kernel:sim:--block-with-graph", ["sim", "{d}/g.json", "--block", "4"], "--block",
    files={"g.json": graph_json(lambda d: None)})
cli("kernel:sim:vector-offchip", "sim --kernel bspmm --block 16 --memory sdram", "16-lane vectors", "--onchip")

# ---- --par and schedules ------------------------------------------------------------------
for _v, _says in [("i", "--par 'i'"), ("i=0", "--par i = 0"), ("i=1000", "--par i = 1000"), ("=2", "=2"), ("i=x", "i=x"),
                  ("zz=2", "zz"), ("i=2,j=2", "i=2,j=2")]:
    cli(f"par:sim:{_v}", ["sim", "--kernel", "spmv", "--par", _v], _says)
cli("par:rtl:unknown-index", "rtl --kernel spmv --par q=2", "q")
cli("par:build:zero", ["build", "--kernel", "spmv", "-o", "{d}/o", "--par", "i=0"], "--par i = 0")
_SCHEDULES = {
    "missing": (None, "no such file"),
    "bad-toml": (text("par = [\n"), "s.toml"),
    "unknown-key": (text('speed = "fast"\n'), "speed"),
    "par-type": (text('par = "i=2"\n'), "par"),
    "par-zero": (text('[par]\ni = 0\n'), "i"),
    "par-word": (text('[par]\ni = "two"\n'), "two"),
    "fusion-word": (text('fusion = "half"\n'), "half"),
    "orders-type": (text('orders = 5\n'), "orders"),
    "binary": (raw(b"\x00\xff\x00\xfe"), "s.toml"),
    "memory-unknown": (text('memory = "hbm9"\n'), "hbm9"),
    "onchip-type": (text('onchip = 5\n'), "onchip"),
    "locate-type": (text('locate = "yes"\n'), "locate"),
}
bad_file_cases(_SCHEDULES, "s.toml", {"schedule:sim": ["sim", "--kernel", "spmv", "--schedule", "{d}/s.toml"],
                                       "schedule:sim-model": ["sim", "--model", "gcn", "--schedule", "{d}/s.toml"]})
cli("schedule:json-bad", ["sim", "--kernel", "spmv", "--schedule", "{d}/s.json"], "s.json", files={"s.json": text("{par:")})
cli("schedule:json-list", ["sim", "--kernel", "spmv", "--schedule", "{d}/s.json"], "s.json", files={"s.json": text("[1]")})
cli("schedule:extension", ["sim", "--kernel", "spmv", "--schedule", "{d}/s.yaml"], "s.yaml", files={"s.yaml": text("par: 1")})
cli("schedule:preset", "sim --model gcn --schedule fastest", "fastest")
# issue 36: nothing accepted and ignored
cli("i36:schedule-json-duplicate", ["sim", "--kernel", "spmv", "--schedule", "{d}/s.json"], "s.json", "'i' is given twice",
    files={"s.json": text('{"par": {"i": 2, "i": 4}}')})
cli("i36:par-duplicate", "sim --kernel spmv --par i=2 --par i=4", "--par i=4", "given twice")
cli("i36:memory-field-duplicate", "sim --kernel spmv --memory hbm2:bytes_per_cycle=16,bytes_per_cycle=8",
    "bytes_per_cycle", "given twice")
cli("i36:rate-duplicate", "estimate --kernel spmspm_inner --size 8 --rate k=0.5 --rate k=0.3", "--rate k=0.3", "given twice")
cli("i36:schedule-skip-kernel", ["sim", "--kernel", "spmv", "--schedule", "{d}/s.toml"], "skip, lanes",
    files={"s.toml": text("skip = true\nlanes = 4\n")})
cli("i36:par-unknown-graph", "sim --kernel spmv --par foo:i=2", "--par foo:i=2", "no graph 'foo'", "'spmv'")
# --par auto: a power-of-two lane budget within the lane maximum, never next to explicit factors
for _v, _says in [("auto=3", ("--par auto=3", "power of two")), ("auto=0", ("--par auto=0", "at least 1")),
                  ("auto=128", ("--par auto=128", "at most 64")), ("auto=x", ("--par 'auto=x'", "auto=LANES"))]:
    cli(f"par-auto:sim:{_v}", ["sim", "--kernel", "spmv", "--par", _v], *_says)
cli("par-auto:with-explicit", "sim --kernel spmv --par auto --par i=2", "--par auto", "--par i=2", "either auto")
cli("par-auto:twice", "sim --kernel spmv --par auto=4 --par auto=8", "--par auto=4", "--par auto=8", "once")
cli("par-auto:rtl:not-power", "rtl --kernel spmv --par auto=6", "--par auto=6", "power of two")
cli("par-auto:model:not-power", "sim --model gcn --par auto=12", "--par auto=12", "power of two")
cli("par-auto:schedule-not-power", ["sim", "--kernel", "spmv", "--schedule", "{d}/s.toml"], "s.toml", "auto=3",
    "power of two", files={"s.toml": text("[par]\nauto = 3\n")})
cli("par-auto:schedule-and-explicit", ["sim", "--kernel", "spmv", "--schedule", "{d}/s.toml", "--par", "i=2"],
    "auto=4", "i=2", "either auto", files={"s.toml": text("[par]\nauto = 4\n")})
cli("par-auto:schedule-model", ["sim", "--model", "gcn", "--schedule", "{d}/s.toml"], "s.toml", "auto=4",
    "--par auto on the command line", files={"s.toml": text("[par]\nauto = 4\n")})
cli("i36:estimate-numerics", "estimate --kernel spmv --size 8 --numerics q16.16", "--numerics q16.16")
cli("i36:rank-numerics", "rank --model gcn --numerics q16.16", "--numerics q16.16")
cli("i36:rate-no-intersection", "estimate --kernel spmv --size 8 --rate i=0.5", "--rate i=0.5", "no intersection")
cli("i36:rate-unknown-index", "estimate --kernel spmspm_inner --size 8 --rate q=0.5", "--rate q=0.5")
cli("i36:estimate-hidden", "estimate --kernel spmv --size 8 --hidden 4", "--hidden")
cli("i36:onchip-empty", ["sim", "--kernel", "spmv", "--memory", "hbm2", "--onchip", ""], "--onchip ''")
cli("i36:onchip-path", ["sim", "--kernel", "spmv", "--memory", "hbm2", "--onchip", "../x"], "--onchip '../x'")
cli("i36:schedule-onchip-path", ["sim", "--kernel", "spmv", "--schedule", "{d}/s.toml"], "s.toml", "onchip",
    files={"s.toml": text('onchip = ["../x"]\n')})
cli("i36:max-nnz-path", ["build", "--kernel", "spmv", "--size", "8", "-o", "{d}/o", "--max-nnz", "/etc=4"], "/etc")
cli("i36:model-file-exits", ["sim", "--model", "{d}/m.py:M"], "m.py", "sys.exit(0)",
    files={"m.py": text("import sys\nsys.exit(0)\n")})
cli("i36:model-factory-exits", ["sim", "--model", "{d}/m.py:M"], "m.py:M", "sys.exit(0)",
    files={"m.py": text("import sys\ndef M():\n    sys.exit(0)\n")})
cli("i36:model-dataset-complex", ["sim", "--model", "gcn", "--dataset", "{d}/x.mtx"], "x.mtx", "complex",
    files={"x.mtx": text("%%MatrixMarket matrix coordinate complex general\n8 8 2\n1 2 1 2\n2 3 1 0\n")},
    entry="data")
cli("i36:mtx-skew-diagonal", ["sim", "--kernel", "spmv", "--data", "{d}/x.mtx"], "x.mtx", "diagonal entry (1, 1)",
    files={"x.mtx": text("%%MatrixMarket matrix coordinate integer skew-symmetric\n4 4 2\n1 1 3\n2 1 4\n")},
    entry="data")
cli("i36:waves-directory", ["rtl", "--kernel", "spmv", "--size", "8", "--waves", "{d}/w.vcd"], "--waves", "w.vcd",
    "a directory", files={"w.vcd/keep": text("")})
cli("i36:out-is-file", ["build", "--kernel", "spmv", "--size", "8", "-o", "{d}/o"], "-o", "a file",
    files={"o": text("")})
cli("i36:synth-clock-huge", ["synth", "--kernel", "spmv", "--size", "8", "--board", "icebreaker", "-o", "{d}/o",
                             "--clock-mhz", "5000"], "--clock-mhz 5000")
cli("i36:synth-max-nnz-ram", ["synth", "--kernel", "spmv", "--size", "8", "--board", "icebreaker", "-o", "{d}/o",
                              "--max-nnz", "B=100000000"], "--max-nnz B=100000000", "icebreaker")
cli("i36:synth-cw", ["synth", "--kernel", "spmv", "--size", "8", "--board", "icebreaker", "-o", "{d}/o",
                     "--cw", "64"], "--cw 64")
cli("i36:run-board-fractional", ["run", "--board", "icebreaker", "--sim", "{d}/g.json", "--data", "{d}/x.npz"],
    "input 'c'", "entry [0]", "q16.16", files={"g.json": graph_json(lambda d: None),
                                               "x.npz": spmv_npz(c=np.full(8, 1.5))}, entry="data")
cli("i36:max-nnz-duplicate", ["build", "--kernel", "spmv", "--size", "8", "-o", "{d}/o", "--max-nnz", "B=4", "--max-nnz", "B=8"], "--max-nnz B=8", "given twice")

# ---- graph files --------------------------------------------------------------------------
_NODE0 = 1  # a scanner in the spmv graph


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """Set ``d[a][b]...`` (``path`` like ``nodes.1.params.level``) to ``value``."""
    def mutate(d: dict) -> None:
        *head, last = path.split(".")
        cur: Any = d
        for k in head:
            cur = cur[int(k)] if isinstance(cur, list) else cur[k]
        if isinstance(cur, list):
            cur[int(last)] = value
        else:
            cur[last] = value
    return mutate


def _drop(path: str) -> Callable[[dict], None]:
    def mutate(d: dict) -> None:
        *head, last = path.split(".")
        cur: Any = d
        for k in head:
            cur = cur[int(k)] if isinstance(cur, list) else cur[k]
        del cur[int(last) if isinstance(cur, list) else last]
    return mutate


def _edge_to(src: str, dst: str) -> Callable[[dict], None]:
    return lambda d: d["edges"].append({"src": src, "dst": dst})


_GRAPHS: dict[str, tuple[Callable[[Path], None], str]] = {
    "missing-file": (None, "does not exist"),
    "empty-file": (text(""), "not valid JSON"),
    "not-json": (text("{nodes: []"), "not valid JSON"),
    "binary": (raw(b"\x89PNG\r\n\x1a\n\x00\x00"), "g.json"),
    "top-list": (text("[]"), "must be object"),
    "top-number": (text("5"), "must be object"),
    "top-null": (text("null"), "must be object"),
    "no-nodes": (graph_json(_drop("nodes")), "'nodes' is a required property"),
    "unknown-top-field": (graph_json(_set("colour", "red")), "colour"),
    "name-number": (graph_json(_set("name", 5)), "name = 5"),
    "name-empty": (graph_json(_set("name", "")), "name"),
    "fifo-depth-string": (graph_json(_set("fifo_depth", "two")), "fifo_depth = 'two'"),
    "fifo-depth-zero": (graph_json(_set("fifo_depth", 0)), "fifo_depth = 0"),
    "fifo-depth-huge": (graph_json(_set("fifo_depth", 10**9)), "at most 65536"),
    "fifo-depth-float": (graph_json(_set("fifo_depth", 2.5)), "fifo_depth = 2.5"),
    "fifo-depth-bool": (graph_json(_set("fifo_depth", True)), "fifo_depth"),
    "tensors-number": (graph_json(_set("tensors", 5)), "tensors = 5"),
    "tensors-list": (graph_json(_set("tensors", [])), "tensors = []"),
    "shape-string": (graph_json(_set("tensors.B.shape", "8x8")), "tensors.B.shape"),
    "shape-negative": (graph_json(_set("tensors.B.shape", [8, -8])), "tensors.B.shape[1] = -8"),
    "shape-zero": (graph_json(_set("tensors.B.shape", [0, 8])), "tensors.B.shape[0] = 0"),
    "shape-float": (graph_json(_set("tensors.B.shape", [8, 8.5])), "tensors.B.shape[1] = 8.5"),
    "shape-huge": (graph_json(_set("tensors.B.shape", [8, 2**40])), "tensors.B.shape[1]"),
    "shape-rank": (graph_json(_set("tensors.B.shape", [8])), "'B'"),
    "shape-missing": (graph_json(_drop("tensors.B.shape")), "'shape' is a required property"),
    "format-missing": (graph_json(_drop("tensors.B.format")), "'format' is a required property"),
    "format-level": (graph_json(_set("tensors.B.format.levels", ["dense", "sparse"])), "'sparse'"),
    "format-type": (graph_json(_set("tensors.B.format", "csr")), "tensors.B.format = 'csr'"),
    "format-singleton-first": (graph_json(_set("tensors.B.format.levels", ["singleton", "compressed"])),
                               "tensors.B.format: level 0 is singleton, but it is the first level"),
    "format-dense-singleton": (graph_json(_set("tensors.B.format.levels", ["dense", "singleton"])),
                               "level 1 is singleton, but level 0 above it is dense"),
    "mode-order-bad": (graph_json(_set("tensors.B.format.mode_order", [0, 0])), "tensors.B.format"),
    "mode-order-range": (graph_json(_set("tensors.B.format.mode_order", [0, 9])), "mode_order[1] = 9"),
    "role-bad": (graph_json(_set("tensors.B.role", "scratch")), "'scratch'"),
    "tensor-extra": (graph_json(_set("tensors.B.density", 0.5)), "density"),
    "dense-too-big": (graph_json(lambda d: d["tensors"].__setitem__(
        "B", {"shape": [2**15, 2**15], "format": {"levels": ["dense", "dense"], "mode_order": [0, 1]},
              "role": "input"})),
        "over the limit of 268435456"),
    "nodes-object": (graph_json(_set("nodes", {})), "nodes = {}"),
    "node-string": (graph_json(_set("nodes.0", "root")), "nodes[0] = 'root'"),
    "node-kind-unknown": (graph_json(_set("nodes.0.kind", "fpu")), "'fpu'"),
    "node-kind-missing": (graph_json(_drop("nodes.0.kind")), "'kind' is a required property"),
    "node-name-missing": (graph_json(_drop("nodes.0.name")), "'name' is a required property"),
    "node-name-dot": (graph_json(_set("nodes.0.name", "a.b")), "must not contain '.'"),
    "node-name-number": (graph_json(_set("nodes.0.name", 3)), "nodes[0].name = 3"),
    "node-duplicate": (graph_json(lambda d: d["nodes"].append(copy.deepcopy(d["nodes"][0]))), "already exists"),
    "params-list": (graph_json(_set("nodes.1.params", [1])), "nodes[1].params = [1]"),
    "param-unknown": (graph_json(_set("nodes.1.params.speed", 3)), "unknown parameter 'speed'"),
    "param-level-string": (graph_json(_set("nodes.1.params.level", "one")), "level"),
    "param-level-range": (graph_json(_set("nodes.1.params.level", 7)), "level"),
    "param-tensor-unknown": (graph_json(_set("nodes.1.params.tensor", "Q")), "'Q'"),
    "param-object": (graph_json(_set("nodes.1.params.level", {"a": 1})), "nodes[1].params.level"),
    "param-op-unknown": (graph_json(lambda d: [n["params"].__setitem__("op", "pow") for n in d["nodes"]
                                                if n["kind"] == "alu"]), "'pow'"),
    "param-reduce-op": (graph_json(lambda d: [n["params"].__setitem__("op", "mean") for n in d["nodes"]
                                               if n["kind"] == "reduce"]), "'mean'"),
    "param-dim-negative": (graph_json(lambda d: [n["params"].__setitem__("dim", -4) for n in d["nodes"]
                                                  if n["kind"] == "locate"]), "dim"),
    "param-missing": (graph_json(_drop("nodes.1.params.tensor")), "missing parameter 'tensor'"),
    "edges-object": (graph_json(_set("edges", {})), "edges = {}"),
    "edge-string": (graph_json(_set("edges.0", "a->b")), "edges[0] = 'a->b'"),
    "edge-no-dot": (graph_json(_set("edges.0.src", "root_B")), "must read 'node.port'"),
    "edge-src-missing": (graph_json(_drop("edges.0.src")), "'src' is a required property"),
    "edge-unknown-node": (graph_json(_set("edges.0.src", "ghost.ref")), "'ghost'"),
    "edge-unknown-port": (graph_json(_set("edges.0.src", "root_B.crd")), "no output port 'crd'"),
    "edge-depth-zero": (graph_json(_set("edges.0.depth", 0)), "edges[0].depth = 0"),
    "edge-depth-huge": (graph_json(_set("edges.0.depth", 10**9)), "at most 65536"),
    "edge-depth-string": (graph_json(_set("edges.0.depth", "deep")), "edges[0].depth = 'deep'"),
    "edge-extra": (graph_json(_set("edges.0.latency", 3)), "latency"),
    "edge-dangling": (graph_json(_drop("edges.0")), "dangling"),
    "edge-driven-twice": (graph_json(lambda d: d["edges"].append(dict(d["edges"][0]))), "driven twice"),
    "edge-kind-mismatch": (graph_json(lambda d: [e.__setitem__("src", "vals_B.val") for e in d["edges"][:1]]),
                           "edges"),
    "edge-loop": (graph_json(lambda d: _loop(d)), "loop"),
    "discard-type": (graph_json(_set("discard", "x.y")), "discard = 'x.y'"),
    "discard-unknown": (graph_json(_set("discard", ["ghost.out"])), "ghost"),
    "indices-type": (graph_json(_set("indices", [1])), "indices = [1]"),
    "format-version": (graph_json(_set("format_version", 2)), "format_version = 2"),
    "no-output": (graph_json(lambda d: [t.__setitem__("role", "input") for t in d["tensors"].values()]), "y"),
    "lanes-not-pow2": (graph_json(lambda d: [n["params"].__setitem__("lanes", 3) for n in d["nodes"]
                                              if n["kind"] == "alu"]), "lanes=3 must be a power of two"),
    "lanes-string": (graph_json(lambda d: [n["params"].__setitem__("lanes", "four") for n in d["nodes"]
                                            if n["kind"] == "alu"]), "'lanes'"),
    "lanes-mismatch": (graph_json(lambda d: [n["params"].__setitem__("lanes", 4) for n in d["nodes"]
                                              if n["kind"] == "alu"]), "lanes differ"),
    "scalar-port-bad": (graph_json(lambda d: [n["params"].__setitem__("scalar_port", "c") for n in d["nodes"]
                                               if n["kind"] == "alu"]), "'c'"),
    "block-not-object": (graph_json(_set("tensors.B.block", 4)), "tensors.B.block = 4"),
    "block-size-bad": (graph_json(_set("tensors.B.block", {"outer": {"levels": ["dense", "compressed"],
                                                                     "mode_order": [0, 1]},
                                                           "block": [1, 3], "shape": [8, 8]})),
                       "block size 3 of mode 1"),
    "block-shape-mismatch": (graph_json(_set("tensors.B.block", {"outer": {"levels": ["dense", "compressed"],
                                                                           "mode_order": [0, 1]},
                                                                 "block": [1, 4], "shape": [8, 8]})),
                             "blocked as"),
}


def _loop(d: dict) -> None:
    """Feed the reducer's output back into the multiplier (a forward edge closing a loop)."""
    for e in d["edges"]:
        if e["dst"] == "mul.b":
            e["src"], e["dst"] = "reduce.val", "mul.b"
    for e in d["edges"]:
        if e["src"] == "reduce.val" and e["dst"] != "mul.b":
            e["src"] = "vals_c.val"


bad_file_cases(_GRAPHS, "g.json", {"graph:sim": ["sim", "{d}/g.json"]}, entry="graph")
bad_file_cases(_GRAPHS, "g.json", {"graph:build": ["build", "{d}/g.json", "-o", "{d}/out"],
                                   "graph:rtl": ["rtl", "{d}/g.json"],
                                   "graph:estimate": ["estimate", "{d}/g.json"],
                                   "graph:synth": ["synth", "{d}/g.json", "-o", "{d}/out", "--board", "icestick"]},
               names=("missing-file", "not-json", "top-list", "shape-negative", "node-kind-unknown", "edge-loop",
                      "fifo-depth-huge", "edge-depth-huge", "dense-too-big", "param-unknown", "edge-unknown-port",
                      "edge-string", "params-list"), entry="graph")
cli("graph:sim:directory", ["sim", "{d}"], "directory", entry="graph")


def _all_shapes(n: int) -> Callable[[dict], None]:
    def mutate(d: dict) -> None:
        for t in d["tensors"].values():
            t["shape"] = [n] * len(t["shape"])
    return mutate


# a sparse tensor of 2^40 positions passes the graph's dense cap (its dense level has 2^20), but
# random operands are drawn dense: refused before anything is allocated (a MemoryError before)
for _cmd in ("sim", "rtl", "estimate"):
    cli(f"graph:{_cmd}:random-operand-huge", [_cmd, "{d}/g.json"], "tensor 'B' has shape 1048576x1048576",
        "--data", files={"g.json": graph_json(_all_shapes(1 << 20))}, entry="graph")


def _deadlocking_graph(p: Path) -> None:
    """SpMM CSR with one-entry FIFOs: the scanner and the accumulator wait on each other."""
    g, _, _, _ = example("spmm_csr", 8, seed=0, density=0.5)
    d = g.to_json()
    d["fifo_depth"] = 1
    for e in d["edges"]:
        e.pop("depth", None)
    p.write_text(json.dumps(d))


for _argv in (["sim"], ["rtl"], ["run", "--sim", "--board", "icestick"]):
    cli(f"deadlock:{_argv[0]}", [*_argv, "{d}/g.json"], "deadlock", "full",
        files={"g.json": _deadlocking_graph}, entry="graph")

# ---- data files ---------------------------------------------------------------------------
_G = {"g.json": graph_json(lambda d: None)}
_DATA = {
    "missing": (None, "no such file"),
    "garbage": (raw(b"not a zip file at all"), "not a readable .npz"),
    "empty": (raw(b""), "x.npz"),
    "no-tensor": (spmv_npz(c=None), "'c'"),
    "wrong-shape": (spmv_npz(B=np.ones((4, 4), dtype=np.int64)), "(4, 4)"),
    "wrong-rank": (spmv_npz(c=np.ones((8, 2), dtype=np.int64)), "'c'"),
    "huge-value": (spmv_npz(c=np.full(8, 2**40, dtype=np.int64)), "does not fit the int32 datapath"),
    "fraction": (spmv_npz(c=np.full(8, 0.5)), "is not a whole number"),
    "nan": (spmv_npz(c=np.full(8, np.nan)), "NaN"),
    "inf": (spmv_npz(c=np.full(8, np.inf)), "inf"),
    "strings": (spmv_npz(c=np.array(["a"] * 8)), "'c'"),
    "object": (spmv_npz(c=np.array([None] * 8, dtype=object)), "x.npz"),
    "complex": (spmv_npz(c=np.full(8, 1 + 2j)), "'c'"),
    "scalar": (spmv_npz(c=np.int64(3)), "'c'"),
}
bad_file_cases(_DATA, "x.npz", {"data:sim": ["sim", "{d}/g.json", "--data", "{d}/x.npz"]}, base=_G, entry="data")
bad_file_cases(_DATA, "x.npz", {"data:rtl": ["rtl", "{d}/g.json", "--data", "{d}/x.npz"]}, base=_G, entry="data",
               names=("missing", "garbage", "no-tensor", "wrong-shape", "huge-value", "fraction", "nan"))
_MTX_HEAD = "%%MatrixMarket matrix coordinate integer general\n"
_MTX = {
    "truncated": (text(_MTX_HEAD + "8 8 5\n1 1 3\n2 2 4\n"), "x.mtx"),
    "bad-header": (text("%%MatrixMarket tensor coordinate integer general\n8 8 1\n1 1 1\n"), "x.mtx"),
    "no-header": (text("8 8 1\n1 1 1\n"), "x.mtx"),
    "empty": (text(""), "x.mtx"),
    "out-of-range": (text(_MTX_HEAD + "8 8 1\n9 1 3\n"), "x.mtx"),
    "zero-index": (text(_MTX_HEAD + "8 8 1\n0 1 3\n"), "x.mtx"),
    "fractions": (text("%%MatrixMarket matrix coordinate real general\n8 8 1\n1 1 0.5\n"), "0.5"),
    "complex": (text("%%MatrixMarket matrix coordinate complex general\n8 8 1\n1 1 1 2\n"), "x.mtx"),
    "garbage": (raw(b"\x00\x01\x02"), "x.mtx"),
    "words": (text(_MTX_HEAD + "8 8 1\na b c\n"), "x.mtx"),
    "huge-value": (text(_MTX_HEAD + "8 8 1\n1 1 1099511627776\n"), "1099511627776"),
}
_MTX["huge-dims"] = (text(_MTX_HEAD + "1000000000 1000000000 1\n1 1 1\n"), "at most 16,777,216 rows")
_MTX["huge-entries"] = (text(_MTX_HEAD + "1000000 1000000 1000000000000\n1 1 1\n"), "more than half")
_MTX_RUNS = ("truncated", "bad-header", "out-of-range", "fractions", "garbage", "huge-dims")
bad_file_cases(_MTX, "x.mtx", {"mtx:sim-kernel": ["sim", "--kernel", "spmv", "--data", "{d}/x.mtx"]}, entry="data")
bad_file_cases(_MTX, "x.mtx", {"mtx:rtl-kernel": ["rtl", "--kernel", "spmv", "--data", "{d}/x.mtx"]},
               names=_MTX_RUNS, entry="data")
bad_file_cases(_MTX, "x.mtx", {"mtx:sim-graph": ["sim", "{d}/g.json", "--data", "{d}/x.mtx"]}, names=_MTX_RUNS,
               base=_G, entry="data")
cli("mtx:kernel-wrong-extension", ["sim", "--kernel", "spmv", "--data", "{d}/x.csv"], "x.csv",
    files={"x.csv": text("1,2\n")}, entry="data")
cli("mtx:graph-wrong-size", ["sim", "{d}/g.json", "--data", "{d}/x.mtx"], "4x4",
    files={"x.mtx": text(_MTX_HEAD + "4 4 1\n1 1 3\n"), **_G}, entry="data")

cli("npz:kernel-indptr-decreasing", ["sim", "--kernel", "spmv", "--data", "{d}/x.npz"], "indptr must be",
    files={"x.npz": npz(data=np.array([1.0, 2.0]), indices=np.array([0, 1]), indptr=np.array([0, 2, 1]),
                        format=np.array("csr"), shape=np.array([2, 2]))}, entry="data")
cli("npz:kernel-huge-shape", ["sim", "--kernel", "spmv", "--data", "{d}/x.npz"], "at most 16,777,216",
    files={"x.npz": npz(data=np.array([1.0]), indices=np.array([0]), indptr=np.array([0, 1]),
                        format=np.array("csr"), shape=np.array([1 << 40, 1 << 40]))}, entry="data")
cli("graph:nested-too-deep", ["sim", "{d}/deep.json"], "nested too deeply",
    files={"deep.json": text("[" * 100000 + "]" * 100000)}, entry="graph")
cli("schedule:nested-too-deep", ["sim", "--kernel", "spmv", "--size", "8", "--schedule", "{d}/deep.json"],
    "nested too deeply", files={"deep.json": text('{"par": ' + "[" * 100000 + "]" * 100000 + "}")})
cli("cli:rtl-cw-64", ["rtl", "--kernel", "spmv", "--size", "8", "--cw", "64"], "--cw 64: at most 63 bits")
cli("cli:memory-empty", ["sim", "--kernel", "spmv", "--size", "8", "--memory", ""], "--memory '': empty")
cli("cli:sweep-jobs-huge", ["sweep", "examples/sweeps/fusion.toml", "-o", "{d}/o", "-j", "100000"],
    "-j 100000: at most")
cli("cli:correlate-jobs-huge", ["correlate", "-o", "{d}/o", "-j", "100000"], "-j 100000: at most")
cli("cli:sweep-scheduler-scheme", ["sweep", "examples/sweeps/fusion.toml", "-o", "{d}/o", "--scheduler",
                                   "foo://x:1"], "unknown address scheme 'foo'")
cli("cli:kernel-operand-shape", ["sim", "--kernel", "spmv", "--data", "{d}/x.mtx", "--operand", "c={d}/c.npy"],
    "operand c (the dense vector) has shape 3", files={"x.mtx": text(_MTX_HEAD + "8 8 1\n1 1 1\n"),
                                                        "c.npy": lambda p: np.save(p, np.ones(3))})
cli("cli:kernel-operand-graph", ["sim", "{d}/g.json", "--operand", "c={d}/c.npy"], "applies to kernels only",
    files={**_G, "c.npy": lambda p: np.save(p, np.ones(8))})
cli("cli:run-build-report-damaged", ["run", "--board", "icebreaker", "--sim", "--build", "{d}/b"],
    "synth_report.json' is not valid JSON", files={"b/graph.json": graph_json(lambda d: None),
                                                   "b/design.json": text("{}"), "b/synth_report.json": text("{")})
cli("cli:run-build-report-keys", ["run", "--board", "icebreaker", "--sim", "--build", "{d}/b"],
    "synth_report.json has no board", files={"b/graph.json": graph_json(lambda d: None),
                                             "b/design.json": text("{}"), "b/synth_report.json": text("{}")})
cli("cli:fusion-on-kernel", ["sim", "--kernel", "spmv", "--size", "8", "--fusion", "auto"], "--fusion")
cli("graph:reference-undeclared", ["sim", "{d}/g.json"], "undeclared tensor",
    files={"g.json": graph_json(lambda d: d.update(reference={
        "tensors": {}, "statements": [{"out": "y", "indices": ["i"], "rhs": {"access": "Q", "indices": ["i"]}}],
        "outputs": ["y"]}))}, entry="graph")

# ---- sweep files --------------------------------------------------------------------------
_SWEEPS = {
    "missing": (None, "none.toml"),
    "bad-toml": (text("[[grid]\nmodel = 1"), "none.toml"),
    "no-grid": (text('name = "x"\n'), "grid"),
    "grid-type": (text('grid = 5\n'), "grid"),
    "unknown-key": (text('[[grid]]\nkernel = "spmv"\nspeed = [1]\n'), "speed"),
    "unknown-kernel": (text('[[grid]]\nkernel = "spmx"\n'), "spmx"),
    "unknown-model": (text('[[grid]]\nmodel = "bert"\n'), "bert"),
    "bad-size": (text('[[grid]]\nkernel = "spmv"\nsize = [0]\n'), "size"),
    "bad-density": (text('[[grid]]\nkernel = "spmv"\ndensity = [2.0]\n'), "density"),
    "bad-memory": (text('[[grid]]\nkernel = "spmv"\nmemory = ["hbm9"]\n'), "hbm9"),
    "bad-fusion": (text('[[grid]]\nmodel = "gcn"\nfusion = ["half"]\n'), "half"),
    "empty-list": (text('[[grid]]\nkernel = []\n'), "kernel"),
    "kernel-and-model": (text('[[grid]]\nkernel = "spmv"\nmodel = "gcn"\n'), "kernel"),
    "defaults-type": (text('defaults = 3\n[[grid]]\nkernel = "spmv"\n'), "defaults"),
    "binary": (raw(b"\xff\xfe\x00"), "none.toml"),
    "par-list": (text('[[grid]]\nkernel = "spmv"\npar = [[1, 2]]\n'), "par"),
    "par-not-a-number": (text('[[grid]]\nkernel = "spmv"\npar = [{i = "x"}]\n'), "index i = 'x'"),
    "par-no-factor": (text('[[grid]]\nkernel = "spmv"\npar = ["i=2,j"]\n'), "index j has no factor"),
    "par-too-many": (text('[[grid]]\nkernel = "spmv"\npar = ["i=100"]\n'), "from 1 to 64"),
}
_SWEEP_RUN = ["sweep", "{d}/none.toml", "-o", "{d}/out"]
bad_file_cases(_SWEEPS, "none.toml", {"sweep": _SWEEP_RUN}, entry="sweep")
bad_file_cases(_SWEEPS, "none.toml", {"sweep-list": [*_SWEEP_RUN, "--list"]},
               names=("missing", "bad-toml", "unknown-key", "unknown-kernel"), entry="sweep")

# ---- Einsum programs (compile) -------------------------------------------------------------
def _program(*body: str) -> Callable[[Path], None]:
    """A PROGRAM.py whose ``program()`` builds ``Program('x')`` with the statements ``body``."""
    return text("from fuseflow.compiler import Program, einsum\ndef program():\n    p = Program('x')\n"
                + "".join(f"    {line}\n" for line in body) + "    return p\n")


_A = "A = p.tensor('A', (4, 4), 'csr')"
_PROGRAMS = {
    "missing": (None, "p.py"),
    "syntax": (text("def program(:\n"), "p.py"),
    "no-program": (text("x = 1\n"), "program()"),
    "raises": (text("def program():\n    raise RuntimeError('boom')\n"), "boom"),
    "returns-int": (text("def program():\n    return 5\n"), "Program"),
    "import-error": (text("import not_a_module\n"), "not_a_module"),
    "bad-einsum": (_program(_A, "p.output(p.let('T', einsum('ij->ik', A)))"), "einsum"),
    "shape-mismatch": (_program(_A, "X = p.tensor('X', (5, 2), 'dense')",
                                "p.output(p.let('T', einsum('ik,kj->ij', A, X)))"), "k"),
    "unknown-format": (_program("A = p.tensor('A', (4, 4), 'bsr9')"), "bsr9"),
    "no-output": (_program("p.tensor('A', (4, 4), 'csr')"), "no statements"),
    "bad-order": (_program(_A, "X = p.tensor('X', (4, 2), 'dense')",
                           "p.output(p.let('T', einsum('ik,kj->ij', A, X), order='iq'))"), "iq"),
    "negative-shape": (_program("A = p.tensor('A', (4, -4), 'csr')"), "-4"),
    "duplicate-tensor": (_program("p.tensor('A', (4, 4), 'csr')", "p.tensor('A', (4, 4), 'csr')"), "'A'"),
}
bad_file_cases(_PROGRAMS, "p.py", {"program:compile": ["compile", "{d}/p.py", "-o", "{d}/out"]}, entry="program")
cli("program:compile:order-option", ["compile", "examples/programs/spmm.py", "-o", "{d}/o", "--order", "T"],
    "--order", entry="program")
cli("program:compile:dump-unknown", ["compile", "examples/programs/spmm.py", "-o", "{d}/o", "--dump-after", "nope"],
    "nope", entry="program")
cli("program:compile:fused-order", ["compile", "examples/programs/spmm.py", "-o", "{d}/o", "--fused-order", "x"],
    "--fused-order", entry="program")


# ---- the Python API ------------------------------------------------------------------------
def _api_cases() -> None:
    from fuseflow.ir.memory import MemoryModel, parse_memory
    from fuseflow.ir.numerics import Numerics
    from fuseflow.ir.samml import Graph, NodeKind
    from fuseflow.ir.tensor import CSR, TensorData, TensorFormat
    from hw.config import HwConfig
    from sw_sim import run_graph, simulate_primitive

    for text_ in ("int3", "int99", "q1.0", "q8", "qx.y", "double", "q16.64", ""):
        api(f"api:Numerics.parse:{text_ or 'empty'}", lambda d, t=text_: Numerics.parse(t), "numerics")
    for kw, says in [({"latency": -1}, "latency"), ({"bytes_per_cycle": 0}, "bytes_per_cycle"),
                     ({"burst_bytes": 3}, "burst"), ({"banks": 0}, "banks"), ({"policy": "lazy"}, "lazy")]:
        api(f"api:MemoryModel:{next(iter(kw))}", lambda d, kw=kw: MemoryModel(name="x", **kw), says)
    api("api:parse_memory:unknown", lambda d: parse_memory("hbm9"), "hbm9")
    api("api:HwConfig:float", lambda d: HwConfig(numerics=Numerics.parse("float")), "float")
    api("api:HwConfig:width", lambda d: HwConfig(vw=16, numerics=Numerics.parse("q16.16")), "vw=16")
    api("api:HwConfig:onchip", lambda d: HwConfig(onchip="B"), "onchip")
    api("api:Graph:dot-name", lambda d: Graph("g").add(NodeKind.ROOT, "a.b"), "a.b")
    api("api:Graph:unknown-param", lambda d: Graph("g").add(NodeKind.REDUCE, "r", op="add", x=1), "'x'")
    api("api:Graph:bad-op", lambda d: Graph("g").add(NodeKind.ALU, "a", op="pow"), "'pow'")
    api("api:Graph:connect-no-dot", lambda d: Graph("g").connect("a", "b.c"), "node.port")
    api("api:Graph:tensor-shape", lambda d: Graph("g").tensor("A", (4,), CSR), "'A'")
    api("api:TensorFormat:level", lambda d: TensorFormat(("dense", "blocked")), "blocked")
    api("api:TensorData.from_dense:rank", lambda d: TensorData.from_dense(np.ones(4), CSR), "order 1")
    for name, mutate, says in [
        ("crd-range", lambda s, c, v: (s, np.r_[c[:-1], 99], v), "outside the dimension"),
        ("seg-end", lambda s, c, v: (np.r_[s[:-1], s[-1] + 1], c, v), "seg ends at"),
        ("seg-start", lambda s, c, v: (np.r_[1, s[1:]], c, v), "seg[0] is not 0"),
        ("vals-short", lambda s, c, v: (s, c, v[:-1]), "vals has"),
        ("vals-nan", lambda s, c, v: (s, c, np.r_[v[:-1].astype(float), np.nan]), "NaN"),
        ("vals-big", lambda s, c, v: (s, c, np.r_[v[:-1], 2**40]), "does not fit"),
        ("crd-unsorted", lambda s, c, v: (s, c[::-1].copy(), v), "does not increase"),
    ]:
        api(f"api:run_graph:{name}", lambda d, m=mutate: run_graph(*_broken_spmv(m), numerics="int32"), says)
    for kw, says in [({"op": "pow"}, "'pow'"), ({"op": "add", "speed": 1}, "'speed'")]:
        api(f"api:simulate_primitive:alu:{next(iter(kw.values()))}",
            lambda d, kw=kw: simulate_primitive("alu", {"a": "1, S0, D", "b": "1, S0, D"}, **kw), says)
    api("api:simulate_primitive:reduce-op", lambda d: simulate_primitive("reduce", {"val": "1, S0, D"}, op="mean"),
        "'mean'")
    api("api:simulate_primitive:after-done", lambda d: simulate_primitive("reduce", {"val": "1, S0, D, 4"}, op="add"),
        "after D")
    api("api:simulate_primitive:scalar-range",
        lambda d: simulate_primitive("alu", {"a": "1, S0, D"}, op="mul_scalar", scalar=300.0, numerics="q8.8"),
        "node 'alu'", "scalar 300.0 lies outside the q8.8 range")
    api("api:simulate_primitive:no-done", lambda d: simulate_primitive("reduce", {"val": "1, S0"}, op="add"), "no D")
    api("api:simulate_primitive:port", lambda d: simulate_primitive("reduce", {"in": "1, S0, D"}, op="add"), "'in'")
    api("api:simulate_primitive:kind", lambda d: simulate_primitive("fpu", {"a": "D"}), "fpu")
    api("api:simulate_primitive:token", lambda d: simulate_primitive("reduce", {"val": "1, S9x, D"}, op="add"), "S9x")
    api("api:load_graph:missing", lambda d: _load_graph(d / "none.json"), "does not exist")
    from fuseflow.ir.tensor import BlockFormat, bcsr
    api("api:BlockFormat:size", lambda d: BlockFormat(CSR, (4, 6)), "block size 6 of mode 1")
    api("api:BlockFormat:lanes", lambda d: bcsr(4, lanes=8), "lanes=8")
    api("api:from_blocks:shape", lambda d: TensorData.from_blocks(np.ones((6, 8)), bcsr(4), name="W"),
        "tensor 'W': dimension 0 of size 6")
    api("api:from_block_mask:mask", lambda d: TensorData.from_block_mask(np.ones((3, 3), bool), np.ones((8, 8)),
                                                                         bcsr(4), name="M"), "block mask of shape")
    api("api:simulate_primitive:vector-lanes", lambda d: simulate_primitive(
        "lane_reduce", {"val": "(1|2|3), S0, D"}, op="add", lanes=4), "not a value of 4 lanes")
    api("api:simulate_primitive:vector-token", lambda d: simulate_primitive(
        "alu", {"a": "(1|x), D", "b": "1, D"}, op="add", lanes=2), "(1|x)")


def _load_graph(path: Path):
    from fuseflow.ir.graph_file import load_graph
    return load_graph(path)


def _broken_spmv(mutate):
    from fuseflow.ir.tensor import TensorData
    g, data, _, _ = example("spmv", 8, seed=1, density=0.4)
    b = data["B"]
    seg, crd, vals = mutate(b.seg[1].copy(), b.crd[1].copy(), np.asarray(b.vals).copy())
    data["B"] = TensorData(b.shape, b.fmt, [None, seg], [None, crd], vals)
    return g, data


_api_cases()
