"""Fixtures for the probes tests: one tiny Llama per session, one torch thread while these tests run."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def probe_model(tmp_path_factory):
    """Tiny random Llama (2 layers, hidden 64) saved and reloaded through `load_model`; returns (model, path)."""
    from latent.testing import tiny_model

    path = tmp_path_factory.mktemp("probes-tiny-llama")
    return tiny_model("llama", path), str(path)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Busy shared CPUs: two threads per process oversubscribe and run ~10x slower than one.
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
