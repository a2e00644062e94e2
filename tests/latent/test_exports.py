"""A package's public names come from its submodules' own `__all__` (latent/exports.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from latent.exports import declared_names, lazy_exports


def test_probes_exports_exactly_its_submodules_declared_names():
    import probes

    here = Path(probes.__file__).parent
    subs = ["activations", "behaviour", "config", "elicit", "stats", "data", "directions", "experiments"]
    subs += ["organisms", "steering"]
    declared = {n for s in subs for n in declared_names(here / f"{s}.py")}
    assert set(probes.__all__) == declared
    homes = {
        "auroc": "directions",
        "ProbeConfig": "config",
        "run_e1": "experiments",
        "instrument_valid": "stats",
    }
    for name, sub in homes.items():
        assert getattr(probes, name) is getattr(importlib.import_module(f"probes.{sub}"), name)


def test_a_name_declared_twice_is_refused_naming_both(tmp_path):
    (tmp_path / "a.py").write_text('__all__ = ["x", "y"]\n')
    (tmp_path / "b.py").write_text('__all__ = ["y"]\n')
    with pytest.raises(ImportError, match=r"'y' is declared in both a and b"):
        lazy_exports("pkg", str(tmp_path / "__init__.py"), ["a", "b"])


def test_a_submodule_without_a_literal_all_is_refused(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(ImportError, match="no literal __all__"):
        lazy_exports("pkg", str(tmp_path / "__init__.py"), ["a"])
