"""Users' own PyTorch models for the command line: ``--model path/to/file.py:NAME`` with
``--inputs inputs.npz|pt`` and ``--formats A=csr,…`` (imports torch; the CLI imports this module
only for such a model).

``NAME`` is an ``nn.Module`` class (built with no arguments) or a factory function returning a
module, ``(module, inputs)`` or ``(module, inputs, formats)``.  Inputs: an ``.npz`` of arrays
named after ``forward``'s parameters (float arrays take the module's floating dtype, boolean
arrays stay boolean) or a ``.pt`` dict of tensors (torch sparse tensors allowed); given
``--inputs`` replace a factory's.  ``--formats`` annotations go over the module's own
``sparse_formats``.
"""

from __future__ import annotations

import importlib.util
import inspect
import pickle
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .frontend import check_input_names
from .ir import FrontendError
from .zoo import ModelCase

__all__ = ["UserCase", "load_user_model", "parse_formats", "reference_float64"]


@dataclass
class UserCase(ModelCase):
    """A user's model; its reference runs PyTorch on dense copies of sparse inputs (torch lacks
    sparse kernels for many ops; the model's meaning does not depend on the layout)."""

    def reference(self) -> np.ndarray:
        """PyTorch's result in float64 (:func:`reference_float64`)."""
        try:
            return reference_float64(self.module, self.inputs)
        except Exception as exc:  # noqa: BLE001 - the user's forward may raise anything
            raise FrontendError(f"{self.name}: PyTorch itself fails on these inputs: {type(exc).__name__}: "
                                f"{str(exc).splitlines()[0]}") from None


def _double(t):
    return t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def reference_float64(module: torch.nn.Module, inputs: dict) -> np.ndarray:
    """``module(**inputs)`` with every sparse input made dense, in float64: the parameters,
    buffers and floating inputs converted to double precision (sparse layouts kept), so a check
    measures the toolkit's error and not float32's.  A forward that only runs in its own
    precision (a constant made with an explicit dtype) runs as written."""
    dense = {k: v.to_dense() if isinstance(v, torch.Tensor) and v.layout != torch.strided else v
             for k, v in inputs.items()}
    state = {k: _double(v) for k, v in (*module.named_parameters(), *module.named_buffers())}
    try:
        with torch.no_grad():
            out = torch.func.functional_call(module, state, (), {k: _double(v) for k, v in dense.items()})
    except Exception:  # noqa: BLE001 - a forward written for one dtype: run it as written
        with torch.no_grad():
            out = module(**dense)
    out = out[0] if isinstance(out, (tuple, list)) else out
    return out.detach().to(torch.float64).numpy()


def parse_formats(text: str | None) -> dict[str, str]:
    """``A=csr,mask=csr,fc1.weight=csc`` as a dict (an error names a malformed entry)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, fmt = item.partition("=")
        if not eq or not name.strip() or not fmt.strip():
            raise FrontendError(f"--formats {text}: {item!r} is not NAME=FORMAT (e.g. adj=csr)")
        out[name.strip()] = fmt.strip()
    return out


def _load_file(path: Path):
    if not path.is_file():
        raise FrontendError(f"--model {path}: no such file")
    spec = importlib.util.spec_from_file_location(f"fuseflow_user_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and pickling look the module up by name
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    except SystemExit as exc:  # sys.exit() at import would end the run silently
        sys.modules.pop(spec.name, None)
        raise FrontendError(f"--model {path}: importing it called sys.exit({exc.code!r}); a model file "
                            "must define the model, not exit") from None
    except Exception as exc:  # noqa: BLE001 - the user's file may raise anything
        sys.modules.pop(spec.name, None)
        raise FrontendError(f"--model {path}: importing it failed: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(str(path.parent))
    return mod


def _npz_inputs(path: Path, floating: torch.dtype) -> dict[str, torch.Tensor]:
    """The arrays of an ``.npz`` as tensors (floating ones in the module's dtype); an array of
    strings, objects or complex numbers, or a file that is not an ``.npz``, is an error naming it."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise FrontendError(f"--inputs {path}: not a readable .npz of arrays: {exc}") from None
    out = {}
    for k, a in arrays.items():
        if a.dtype.kind not in "biuf":
            raise FrontendError(f"--inputs {path}: array {k!r} holds {a.dtype} values; inputs are real numbers "
                                "or booleans")
        t = torch.from_numpy(np.ascontiguousarray(a))
        out[k] = t if a.dtype == bool or not np.issubdtype(a.dtype, np.floating) else t.to(floating)
    return out


def _load_inputs(path: Path, module: torch.nn.Module) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise FrontendError(f"--inputs {path}: no such file")
    floating = next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)
    if path.suffix == ".npz":
        return _npz_inputs(path, floating)
    if path.suffix in (".pt", ".pth"):
        try:
            obj = torch.load(path, weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError) as exc:
            why = ("it holds Python objects other than tensors, which weights-only loading refuses"
                   if isinstance(exc, pickle.UnpicklingError) else
                   "not a torch.save archive (damaged, truncated or another format)" if "zip archive" in str(exc)
                   else (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160])
            raise FrontendError(f"--inputs {path}: not a readable torch.save file of tensors: {why}; save a "
                                "dict of tensors with torch.save({'x': x, ...})") from None
        if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
            raise FrontendError(f"--inputs {path}: expected a dict of tensors (torch.save({{'x': x, ...}}))")
        return {k: v.to(floating) if v.is_floating_point() else v for k, v in obj.items()}
    raise FrontendError(f"--inputs {path}: use an .npz of arrays or a .pt dict of tensors")


def load_user_model(spec: str, inputs: str | None = None, formats: str | None = None) -> UserCase:
    """``path.py:NAME`` (see the module docstring) as a case with its inputs and formats."""
    path_text, colon, name = spec.rpartition(":")
    if not colon or not path_text.endswith(".py") or not name:
        raise FrontendError(f"--model {spec}: give a zoo model (gcn, graphsage, sae, gpt) or "
                            "path/to/file.py:ClassOrFactory")
    path = Path(path_text)
    mod = _load_file(path)
    obj = getattr(mod, name, None)
    if obj is None:
        found = sorted(k for k, v in vars(mod).items() if inspect.isclass(v) and issubclass(v, torch.nn.Module)
                       and v.__module__ == mod.__name__)
        raise FrontendError(f"--model {spec}: {path.name} defines no {name!r} (modules there: "
                            f"{', '.join(found) or 'none'})")
    made = _build(obj, spec)
    module, ins, fmts = made
    if inputs is not None:
        ins = _load_inputs(Path(inputs), module)
        check_input_names(module, ins, f"--inputs {inputs}")
    if not ins:
        raise FrontendError(f"--model {spec}: no inputs: give --inputs inputs.npz|pt (or return them "
                            "from a factory)")
    fmts = {**fmts, **parse_formats(formats)}
    module.eval()
    return UserCase(name, module, ins, fmts, f"{name} from {path} ({len(ins)} inputs: "
                    f"{', '.join(f'{k} {tuple(v.shape)}' for k, v in ins.items())})")


def _build(obj, spec: str):
    try:
        made = obj()
    except SystemExit as exc:  # sys.exit() in the factory would end the run silently
        raise FrontendError(f"--model {spec}: building it called sys.exit({exc.code!r}); "
                            "return the model instead") from None
    except Exception as exc:  # noqa: BLE001 - the user's constructor may raise anything
        raise FrontendError(f"--model {spec}: building it failed: {type(exc).__name__}: {exc}") from None
    if isinstance(made, torch.nn.Module):
        return made, {}, {}
    if isinstance(made, tuple) and made and isinstance(made[0], torch.nn.Module) and len(made) in (2, 3):
        return made[0], dict(made[1]), dict(made[2]) if len(made) == 3 else {}
    raise FrontendError(f"--model {spec}: {getattr(obj, '__name__', obj)}() returned {type(made).__name__}, "
                        "not a module, (module, inputs) or (module, inputs, formats)")
