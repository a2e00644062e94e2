"""Model names that cannot load fail in seconds, before any download retry, and suggest the likely name."""

from __future__ import annotations

import time

import pytest

from latent import loading
from latent.loading import resolve_model_path


def test_a_builtin_name_without_its_prefix_suggests_the_prefix():
    """`arith-mini` is refused at once, with no hub request: did you mean builtin:arith-mini?"""
    start = time.perf_counter()
    with pytest.raises(FileNotFoundError, match="Did you mean builtin:arith-mini"):
        resolve_model_path("arith-mini")
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("name", ["arith-mimi", "someone/arith-mini-typo"])
def test_an_unreachable_hub_fails_after_one_request_with_a_suggestion(name, monkeypatch):
    """Offline, a hub id costs one metadata request (no download retries) and names the close built-in."""
    from huggingface_hub import HfApi, constants

    calls = []

    def offline(self, repo_id, **kw):
        calls.append((repo_id, kw.get("timeout")))
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the suite runs offline; here the hub is tried
    monkeypatch.setattr(HfApi, "model_info", offline)
    with pytest.raises(FileNotFoundError, match="cannot reach the Hugging Face hub") as err:
        resolve_model_path(name)
    assert "Did you mean builtin:arith-mini?" in str(err.value)
    assert calls == [(name, loading.HUB_PROBE_TIMEOUT_S)]


def test_hub_offline_mode_fails_without_a_request(monkeypatch):
    """With HF_HUB_OFFLINE set, an uncached hub id is refused without touching the network."""
    from huggingface_hub import HfApi, constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(HfApi, "model_info", lambda *a, **k: pytest.fail("a request was made"))
    with pytest.raises(FileNotFoundError, match="HF_HUB_OFFLINE"):
        resolve_model_path("someone/not-cached")


def test_a_missing_repository_is_named(monkeypatch):
    """A hub that answers "no such repository" gives that answer, not a network error."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import RepositoryNotFoundError

    httpx = pytest.importorskip("httpx2", reason="the hub client's HTTP library builds the 404 response")

    def missing(self, repo_id, **kw):
        raise RepositoryNotFoundError(
            "404", response=httpx.Response(404, request=httpx.Request("GET", "https://x"))
        )

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(HfApi, "model_info", missing)
    with pytest.raises(FileNotFoundError, match="no model 'someone/nosuch' on the Hugging Face hub"):
        resolve_model_path("someone/nosuch")


def test_float16_on_a_cpu_is_warned_with_the_reason(caplog):
    """`dtype="float16"` on a CPU loads, with a warning that says why it is slow and what to use."""
    import logging

    import torch

    from latent import load_model

    with caplog.at_level(logging.WARNING, logger="latent.loading"):
        model = load_model("builtin:arith-mini", dtype="fp16", device="cpu")
    assert next(model.model.parameters()).dtype == torch.float16
    warned = [r.getMessage() for r in caplog.records if "float16 on a CPU" in r.getMessage()]
    assert len(warned) == 1 and "slower" in warned[0] and "float32" in warned[0]


def test_float32_on_a_cpu_is_not_warned(caplog):
    """The CPU default gives no such warning."""
    import logging

    from latent import load_model

    with caplog.at_level(logging.WARNING, logger="latent.loading"):
        load_model("builtin:arith-mini", device="cpu")
    assert not [r for r in caplog.records if "float16" in r.getMessage()]
