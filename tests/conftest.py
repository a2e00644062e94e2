"""Shared fixtures: tiny random models built once per session (no network)."""

from __future__ import annotations

import os

import pytest
import torch

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
