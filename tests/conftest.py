"""Shared fixtures: tiny random models built once per session (no network), and the test tiers.

Tiers: the default run is the fast tier; `python -m pytest -m real` runs the real tier (off by default
through pyproject's addopts). Everything under tests/real/ is marked `real` here, by folder, so a new
real-checkpoint file joins the tier on its own; other real-tier tests carry `pytest.mark.real` in their file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REAL_DIR = Path(__file__).parent / "real"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(16)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """One tiny model per supported architecture, saved and reloaded through `load_model`."""
    from latent.testing import ARCHS, tiny_model

    return {arch: tiny_model(arch, tmp_path_factory.mktemp(f"tiny-{arch}")) for arch in ARCHS}


@pytest.fixture(scope="session")
def llama(tiny_models):
    return tiny_models["llama"]


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by `-m`
def pytest_collection_modifyitems(config, items):
    for item in items:
        if REAL_DIR in item.path.parents:
            item.add_marker(pytest.mark.real)
