"""The tests' one way of checking a model run against PyTorch: the project's checker
(``fuseflow.models.bounds.check_model``: each output within the bound derived from the numerics
and the op chain, and, in fixed point, every materialised tensor within the bound from the
values it read)."""

from __future__ import annotations

from fuseflow.models.bounds import check_model


def assert_model_matches(cm, run, ref, numerics: str = "float", data=None) -> list:
    """Every check of ``run`` against ``ref`` passes (the failures and the plan otherwise)."""
    checks = check_model(cm, run, ref, numerics, data)
    bad = [c.text() for c in checks if not c.ok]
    assert not bad, "\n".join(bad) + "\n" + cm.explain()
    return checks
