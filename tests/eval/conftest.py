"""Fixtures of the evaluation tests: one tiny random Llama checkpoint on disk, shared by every module."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    """A tiny random Llama saved once per session; a path, as `latentworks eval --model` takes it."""
    from latent.testing import tiny_model

    d = tmp_path_factory.mktemp("tiny-eval")
    tiny_model("llama", d)
    return str(d)


@pytest.fixture(scope="session")
def tiny_eval(model_dir):
    """`tiny_eval(out, limit=, methods=, max_new_tokens=, **changes)`: the `EvalConfig` of a small arith
    run on the tiny model (batch 2, one latent step, no progress bar); `changes` may set any other field,
    `batch_size`, or another `model`."""
    from agents.config import RunConfig
    from eval.runner import EvalConfig

    def make(
        out, *, limit, methods, max_new_tokens, batch_size=2, model: str | None = None, **changes
    ) -> EvalConfig:
        run = RunConfig(batch_size=batch_size, latent_steps=1, max_new_tokens=max_new_tokens)
        return EvalConfig(
            model=model or model_dir, out=str(out), task="arith", limit=limit, methods=methods, run=run,
            progress=False, **changes,
        )  # fmt: skip

    return make
