"""The build cache (sw_sim.native.cache_root, rtl_sim.toolchain.cached_build): where it is and
that a build runs once under its lock."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from rtl_sim import toolchain
from sw_sim import native


def test_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSEFLOW_CACHE", str(tmp_path / "c"))
    assert native.cache_root() == tmp_path / "c"
    assert toolchain.cache_root() == tmp_path / "c" and (tmp_path / "c").is_dir()


def test_existing_legacy_cache_is_kept(monkeypatch, tmp_path):
    monkeypatch.delenv("FUSEFLOW_CACHE", raising=False)
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    monkeypatch.setattr(native, "LEGACY_CACHE", legacy)
    assert native.cache_root() == legacy


def test_platform_cache_without_legacy(monkeypatch, tmp_path):
    monkeypatch.delenv("FUSEFLOW_CACHE", raising=False)
    monkeypatch.setattr(native, "LEGACY_CACHE", tmp_path / "absent")
    assert native.cache_root() == Path(platformdirs.user_cache_dir("fuseflow-hw", appauthor=False))


@pytest.mark.skipif(sys.platform != "linux", reason="the earlier default is Linux's convention")
def test_platform_cache_is_the_earlier_default_on_linux(monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert Path(platformdirs.user_cache_dir("fuseflow-hw", appauthor=False)) == native.LEGACY_CACHE


def test_cached_build_runs_once(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSEFLOW_CACHE", str(tmp_path))
    calls = []

    def build(d: Path) -> dict:
        calls.append(d)
        (d / "out").write_text("x")
        return {"n": len(calls)}

    a = toolchain.cached_build("kind", "key", build)
    b = toolchain.cached_build("kind", "key", build)
    assert a == b and len(calls) == 1
    assert (a / "built.json").read_text().strip() == '{"n": 1}'


@pytest.mark.parametrize("damage", ["built.json", "meta.json"])
def test_a_damaged_cache_entry_is_built_again(monkeypatch, tmp_path, capsys, damage):
    """A truncated record in a build directory is a cache miss (built again, said once on
    stderr), never a crash in whatever reads it next."""
    monkeypatch.setenv("FUSEFLOW_CACHE", str(tmp_path / "c"))
    builds = []

    def build(d: Path) -> dict:
        builds.append(d)
        (d / "meta.json").write_text('{"memory_map": {}}\n')
        return {"seconds": 0.0}

    d = toolchain.cached_build("test-kind", "k", build)
    assert toolchain.cached_build("test-kind", "k", build) == d and len(builds) == 1
    (d / damage).write_text('{"memory_map": ')  # cut short
    assert toolchain.cached_build("test-kind", "k", build) == d and len(builds) == 2
    assert "damaged" in capsys.readouterr().err
    assert toolchain.cached_build("test-kind", "k", build) == d and len(builds) == 2
