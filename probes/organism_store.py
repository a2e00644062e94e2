"""Keep the organism study's finished parts on disk so a stopped or extended run loses nothing.

Each organism's folder `<out>/organisms/<kind>/` holds `adapter/` and `lora.json` (the training recipe and
log) once its LoRA is trained, and `measured.json` once its behaviour, probes and steering are measured.
With `--resume` the study reuses a part only when the settings it was made with equal the current ones;
a LoRA trained for fewer epochs than asked is extended from its saved adapter (the optimizer state is not
saved, so an extended run is close to, not identical with, one trained that long from the start).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from probes.config import ProbeConfig
from probes.report import to_jsonable

__all__ = ["load_lora", "load_measured", "recipe", "save_lora", "save_measured", "setting"]

# The settings each saved part depends on (lora_epochs is compared separately: fewer epochs can be extended).
_RECIPE = (
    "model",
    "seed",
    "template",
    "train_requests",
    "train_sycophancy",
    "lora_r",
    "lora_lr",
    "lora_embeddings",
)
_MEASURE = (
    "n",
    "seed",
    "template",
    "heldout_assertions",
    "layers",
    "steer_n",
    "steer_layers",
    "max_new_tokens",
    "af_max_new_tokens",
    "n_boot",
    "batch_size",
)


def recipe(cfg: ProbeConfig) -> dict:
    """The settings a trained organism depends on, except its length in epochs."""
    c = asdict(cfg)
    return {k: c[k] for k in _RECIPE}


def setting(cfg: ProbeConfig) -> dict:
    """The settings an organism's measurement depends on (besides its adapter)."""
    c = asdict(cfg)
    return {k: c[k] for k in _MEASURE}


def _mismatch(saved: dict, now: dict) -> list[str]:
    return [f"{k}: saved {saved.get(k)!r}, now {v!r}" for k, v in now.items() if saved.get(k) != v]


def save_lora(folder: Path, cfg: ProbeConfig, info: dict) -> None:
    """Record how `folder/adapter` was trained (`info` from `train_lora`, possibly several segments)."""
    (folder / "lora.json").write_text(json.dumps(dict(recipe=recipe(cfg), info=to_jsonable(info)), indent=1))


def load_lora(folder: Path, cfg: ProbeConfig) -> dict | None:
    """The saved training log of `folder/adapter`, or None when there is none.

    Raises when the saved adapter was trained with other settings, or for more epochs than `cfg` asks
    (it cannot be shortened): reusing it would mix two studies. Use another `--out` or drop `--resume`.
    """
    path = folder / "lora.json"
    if not path.is_file() or not (folder / "adapter" / "adapter_config.json").is_file():
        return None
    saved = json.loads(path.read_text())
    bad = _mismatch(saved["recipe"], recipe(cfg))
    if saved["info"]["epochs"] > cfg.lora_epochs:
        bad.append(f"lora_epochs: saved {saved['info']['epochs']}, now {cfg.lora_epochs} (cannot shorten)")
    if bad:
        raise ValueError(
            f"--resume: the adapter in {folder} was trained with other settings ({'; '.join(bad)}); "
            "pass another --out or run without --resume."
        )
    return saved["info"]


def save_measured(folder: Path, cfg: ProbeConfig, lora: dict, measured: dict) -> None:
    """Write one organism's finished measurement with the settings and adapter it came from."""
    doc = dict(setting=setting(cfg), lora=to_jsonable(lora), measured=to_jsonable(measured))
    (folder / "measured.json").write_text(json.dumps(doc, indent=1))


def load_measured(folder: Path, cfg: ProbeConfig, lora: dict) -> dict | None:
    """A finished measurement of the current adapter under the current settings, else None (measure again)."""
    path = folder / "measured.json"
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    if _mismatch(doc["setting"], setting(cfg)) or doc["lora"] != to_jsonable(lora):
        return None
    return doc["measured"]
