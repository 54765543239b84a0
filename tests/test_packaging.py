"""The installed distribution and its import names (docs/packaging.md): no other distribution
provides one of the top-level packages, each imports from this repository, ``--version`` is the
metadata's version, and every package ships ``py.typed``."""

from __future__ import annotations

import importlib
import importlib.metadata
import tomllib
from pathlib import Path

import pytest

from fuseflow_cli.cli import main

ROOT = Path(__file__).resolve().parent.parent
DIST = "fuseflow-hw"
PACKAGES = ("fuseflow", "sw_sim", "hw", "rtl_sim", "fpga", "fuseflow_cli")


def _pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _installed_version() -> str:
    try:
        return importlib.metadata.version(DIST)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{DIST} is not installed (run from a source tree)")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_packages_are_the_installed_ones():
    include = _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(p.rstrip("*") for p in include) == sorted(PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_no_other_distribution_provides_the_name(name):
    _installed_version()
    owners = {_norm(d) for d in importlib.metadata.packages_distributions().get(name, [])}
    others = owners - {_norm(DIST)}
    assert not others, f"top-level module {name!r} is also provided by {sorted(others)}"


@pytest.mark.parametrize("name", PACKAGES)
def test_name_resolves_to_this_repository(name):
    mod = importlib.import_module(name)
    assert Path(mod.__file__).resolve().parent == ROOT / name


def test_version_flag_is_the_metadata_version(capsys):
    version = _installed_version()
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"{DIST} {version}"


@pytest.mark.parametrize("name", PACKAGES)
def test_package_ships_py_typed(name):
    assert (ROOT / name / "py.typed").is_file()
    assert "py.typed" in _pyproject()["tool"]["setuptools"]["package-data"][name]
