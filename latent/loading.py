"""`load_model`: a `LatentModel` from a local path, a hub id (cached or online) or `builtin:<name>`.

Built-in models ship as package data under `latent/builtin_models/<name>/` (safetensors + config +
tokenizer + card.json), so they load from an installed wheel as well as from a checkout.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from latent.catalogue import (  # noqa: F401  (re-exported: latent.loading was their first home)
    BUILTIN_DIR,
    BUILTIN_PREFIX,
    CATALOGUE,
    BuiltinModel,
    builtin_path,
    cache_dir,
    list_builtin_models,
    pulled_path,
)
from latent.model import LatentModel
from latent.realign import REALIGN_METHODS, Aligner

logger = logging.getLogger(__name__)

TRAINED_ALIGNER = "aligner.safetensors"  # a model directory holding this loads it instead of the ridge map


def resolve_model_path(name_or_path: str) -> str:
    """Local path (directory or `.gguf` file) of a model name, or the hub id unchanged.

    `builtin:<name>` -> its shipped directory; a catalogue name (`latentworks models`) -> its pulled
    directory (a clear error with the pull command when it was never pulled); an existing path -> itself;
    a hub id -> itself once `check_hub_id` found it cached or on the hub (else an error in seconds, with a
    suggestion such as `builtin:arith-mini` for a name close to a shipped one).
    """
    if not isinstance(name_or_path, str | os.PathLike) or not str(name_or_path).strip():
        raise TypeError(
            f"model must be a non-empty string (a local path, a hub id, `builtin:<name>` or a name from "
            f"`latentworks models`), got {name_or_path!r}."
        )
    name_or_path = str(name_or_path)
    if name_or_path.startswith(BUILTIN_PREFIX):
        return str(builtin_path(name_or_path[len(BUILTIN_PREFIX) :]))
    if name_or_path in CATALOGUE:
        return str(pulled_path(name_or_path))
    local = cache_dir() / "models" / name_or_path
    if "/" not in name_or_path and any((local / f).is_file() for f in ("config.json", "adapter_config.json")):
        return str(local)  # a model saved into the cache under a name (e.g. by `latentworks finetune`)
    shipped = BUILTIN_DIR / name_or_path  # a trained channel (adapter) shipped with latentworks
    if "/" not in name_or_path and (shipped / "adapter_config.json").is_file():
        return str(shipped)
    looks_local = (
        name_or_path.startswith((".", "/", "~")) or os.sep in name_or_path.strip("/").split("/", 1)[-1]
    )
    expanded = os.path.expanduser(name_or_path)
    if os.path.exists(expanded):
        return expanded
    if looks_local and name_or_path.count("/") != 1 or name_or_path.endswith(".gguf"):
        raise FileNotFoundError(f"no model directory or GGUF file at {name_or_path!r}: check the path.")
    check_hub_id(name_or_path)
    return name_or_path


HUB_PROBE_TIMEOUT_S = 10.0  # one request; the hub's own download path retries for tens of seconds offline


def _did_you_mean(name: str) -> str:
    """ " Did you mean builtin:arith-mini?" for a name close to a built-in or catalogue name, else ""."""
    import difflib

    known = [BUILTIN_PREFIX + m.name for m in list_builtin_models()] + list(CATALOGUE)
    bare = {k.removeprefix(BUILTIN_PREFIX).lower(): k for k in known}
    close = difflib.get_close_matches(name.lower().split("/")[-1], list(bare), n=1, cutoff=0.75)
    return f" Did you mean {bare[close[0]]}?" if close else ""


def check_hub_id(name: str) -> None:
    """Fail in seconds, with a suggestion, for a hub id this machine cannot fetch.

    A hub id that is cached locally passes at once. Otherwise one metadata request (at most
    `HUB_PROBE_TIMEOUT_S`) tells a missing repository or an unreachable hub apart, instead of the
    download path's retries (40-60 s offline) ending in a generic message. A name that is exactly a
    built-in model's is refused without a request: no hub id means the shipped model.
    """
    if name in {m.name for m in list_builtin_models()}:
        raise FileNotFoundError(
            f"no model {name!r}. Did you mean {BUILTIN_PREFIX + name}? (built-in models take the "
            f"`{BUILTIN_PREFIX}` prefix)"
        )
    from huggingface_hub import HfApi, constants, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return
    except ValueError:  # not a valid repository id at all
        raise FileNotFoundError(
            f"no model {name!r}: it is neither a local path nor a valid hub id.{_did_you_mean(name)}"
        ) from None
    hint = _did_you_mean(name) or " Pass a local path, `builtin:<name>`, or a name from `latentworks models`."
    if constants.HF_HUB_OFFLINE:
        raise FileNotFoundError(
            f"model {name!r} is not in the local hub cache and HF_HUB_OFFLINE is set.{hint}"
        )
    try:
        HfApi().model_info(name, timeout=HUB_PROBE_TIMEOUT_S)
    except GatedRepoError:
        return  # it exists; loading it says what access it needs
    except RepositoryNotFoundError:
        raise FileNotFoundError(
            f"no model {name!r} on the Hugging Face hub (or it is private).{hint}"
        ) from None
    except Exception as err:  # noqa: BLE001 - every network failure means the same: the hub is out of reach
        why = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise FileNotFoundError(
            f"cannot reach the Hugging Face hub to fetch model {name!r} ({why}); check the network, or "
            f"set HF_HUB_OFFLINE=1 to use only cached models.{hint}"
        ) from None


def native_bf16_cpu() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16 or AMX tiles). There bf16 halves the
    bytes every decode step reads from the KV cache and runs faster than fp32; elsewhere PyTorch emulates
    it and fp32 is faster. False when this torch build cannot tell."""
    checks = (getattr(torch.cpu, n, None) for n in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))
    return any(bool(check()) for check in checks if callable(check))


def _dtype(dtype: torch.dtype | str | None, device: torch.device) -> torch.dtype | str:
    if dtype is None:
        return torch.float32 if device.type == "cpu" else "auto"
    if isinstance(dtype, torch.dtype):
        resolved = dtype
    elif dtype == "auto":
        return dtype
    else:
        aliases = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}
        resolved = getattr(torch, aliases.get(str(dtype), str(dtype)), None)
        if not isinstance(resolved, torch.dtype) or not resolved.is_floating_point:
            raise ValueError(
                f"unknown dtype {dtype!r}: use float32, bfloat16 or float16 (or fp32/bf16/fp16, or 'auto')."
            )
    if resolved == torch.float16 and device.type == "cpu":
        logger.warning(
            "float16 on a CPU: PyTorch has no fast CPU kernels for it, so the model runs several times "
            "slower than in float32 (about 10x measured) and answers no better. Use float32 (the CPU "
            "default)%s.",
            ", or bfloat16, which this CPU computes natively" if native_bf16_cpu() else "",
        )
    return resolved


def _device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"unknown device {device!r}: use 'cpu', 'cuda' or 'cuda:N'.") from err
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {device!r} requested but this torch build sees no CUDA GPU "
                f"(torch {torch.__version__}); use device='cpu' or install a CUDA build of torch."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {device!r} does not exist: this machine has {torch.cuda.device_count()} CUDA "
                f"device(s) (cuda:0..cuda:{torch.cuda.device_count() - 1})."
            )
    elif dev.type not in ("cpu", "mps", "xpu"):
        raise ValueError(f"unsupported device {device!r}: use 'cpu', 'cuda' or 'cuda:N'.")
    return dev


@contextmanager
def peft_warnings_silenced() -> Iterator[None]:
    """peft reads transformers' deprecated `is_gradient_checkpointing` when it wraps a model: a
    FutureWarning about the two libraries, not about the user's call, so it is not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def _load_adapter(path: str, kwargs: dict):
    """A PEFT adapter directory applied to its base, the base found by the name the adapter records (a
    pulled or `builtin:` name, a hub id or a path), so a trained channel loads wherever its base is."""
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForCausalLM

    base = resolve_model_path(PeftConfig.from_pretrained(path).base_model_name_or_path)
    with peft_warnings_silenced():
        return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, **kwargs), path)


def load_model(
    name_or_path: str,
    *,
    dtype: torch.dtype | str | None = None,
    device: str | torch.device | None = None,
    realign: str | Aligner = "ridge",
    realign_lambda: float = 1e-5,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    device_map: str | dict | None = None,
) -> LatentModel:
    """Load a causal LM + tokenizer as a `LatentModel`.

    Args:
        name_or_path (`str`): local directory, `.gguf` file, hub id, `builtin:<name>`, or a pulled
            catalogue name such as `smollm2-135m-instruct` (`latentworks models pull NAME`). A directory
            holding a PEFT adapter (adapter_config.json) loads its base model and applies the adapter.
        dtype (`torch.dtype` or `str`, *optional*): e.g. `torch.bfloat16`, "bfloat16" or "bf16"; default
            fp32 on CPU, the checkpoint's dtype on CUDA. float16 on a CPU loads with a warning: it runs
            several times slower there than float32.
        device (`str`, *optional*): "cpu", "cuda", "cuda:1"; default CUDA when available.
        realign (`str` or callable, defaults to "ridge"): "ridge", "identity", "soft" (`SoftTokenAligner`),
            your own aligner, or the path of an aligner file written by `TrainableAligner.save`.
        attn_implementation (`str`, *optional*): "sdpa" (transformers' default), "eager",
            "flash_attention_2", ...; checked before the weights load (flash attention cannot take the
            4-D masks of sliding-window models, `latent.attention`).
        device_map (`str` or `dict`, *optional*): spread the layers over several devices ("auto",
            "balanced", or a module -> device dict, as transformers takes it); replaces `device`.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(name_or_path)
    if device_map is not None and device is not None:
        raise ValueError("pass `device` (one device) or `device_map` (layers over several), not both.")
    device = _device(device) if device_map is None else torch.device("cpu")  # (the aligner file's device)
    _check_attention(path, attn_implementation, None if device_map is not None else device, trust_remote_code)
    if realign == "ridge" and os.path.isfile(os.path.join(path, TRAINED_ALIGNER)):
        realign = os.path.join(
            path, TRAINED_ALIGNER
        )  # a fine-tuned model ships the aligner it was trained with
    if isinstance(realign, (str, os.PathLike)) and str(realign) not in REALIGN_METHODS:
        from latent.realign import TrainableAligner

        realign = TrainableAligner.load(realign, device=device)  # checked before the model loads
    dtype = _dtype(dtype, device)
    kwargs = {"dtype": dtype, "trust_remote_code": trust_remote_code}
    if path.endswith(".gguf") and os.path.isfile(path):
        # a GGUF file: transformers dequantizes it (needs the `gguf` package)
        path, kwargs["gguf_file"] = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    if device_map is not None:
        kwargs["device_map"] = device_map  # accelerate places each module and moves activations between them
    adapter = os.path.isfile(os.path.join(path, "adapter_config.json"))
    try:
        if adapter:
            model = _load_adapter(path, kwargs)
        else:
            model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
        tok_kwargs = {"gguf_file": kwargs["gguf_file"]} if "gguf_file" in kwargs else {}
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **tok_kwargs)
    except ValueError as err:
        if "Unrecognized configuration class" in str(err) or "AutoModelForCausalLM" in str(err):
            raise ValueError(
                f"{name_or_path!r} is not a causal language model ({err.__class__.__name__}: "
                f"{str(err).splitlines()[0]}). latentworks needs a decoder-only LM."
            ) from err
        raise
    except OSError as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        hint = (
            "HF_HUB_OFFLINE=1 is set, so only models already in the local cache can load; "
            "download it on a connected machine first or pass a local directory."
            if offline
            else "check the hub id or pass a local directory holding config.json + weights + tokenizer."
        )
        raise OSError(f"cannot load model {name_or_path!r}: {hint} ({str(err).splitlines()[0]})") from err
    if device_map is None:
        model.to(device)
    return LatentModel(model, tokenizer, realign=realign, realign_lambda=realign_lambda)


def _check_attention(
    path: str, attn_implementation: str | None, device: torch.device | None, trust_remote_code: bool
) -> None:
    """Refuse an attention implementation the model cannot use, before its weights load (config only)."""
    from latent.attention import attention_problem, is_flash
    from latent.masks import window_spec

    sliding = False
    if is_flash(attn_implementation) and os.path.isdir(path):  # a hub id or GGUF file: checked once loaded
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
        sliding = window_spec(config.get_text_config(decoder=True)) is not None
    why = attention_problem(
        attn_implementation, sliding_window=sliding, device=None if device is None else str(device)
    )
    if why:
        raise ValueError(why + ".")
