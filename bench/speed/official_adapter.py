"""Run the official LatentMAS code (Gen-Verse/LatentMAS, a checkout the user fetched) on transformers 5.x.

Nothing of that repository is copied here: `load_official(DIR)` imports it from `DIR` at run time and
applies four small runtime adapters, each needed and each documented:

1. Its cache-length helper (`_past_length`) reads `past_key_values[0][0]`, the transformers-4 tuple
   layout; a 5.x `DynamicCache` is not subscriptable. The adapter answers with `get_seq_length()`.
2. Its latent method imports `vllm.SamplingParams` unconditionally, even on the HF path. When vLLM is
   not installed, a stand-in module with an inert `SamplingParams` is registered (never used on HF).
3. Its text decoding always samples (`do_sample=True`). Side-by-side comparisons need greedy decoding,
   so `greedy(wrapper)` makes the wrapper's `model.generate` decode greedily. It also drops the
   `cache_position` argument, which transformers 5.x `generate` rejects (it derives it from the cache).
4. Its prompt builders assert a Qwen model and carry Qwen's system prompt. `use_prompts` makes them
   return the messages the project would build for the same agent and question, so both sides read the
   same prompts.

5. `shared_weights(official, hf)` makes its loader return a copy of the project's loaded model whose
   weights share our tensors' storage, so a 1.5B model in float32 fits the memory of a small machine
   once, not twice. The copy has its own modules and config: the official code resizes its embedding
   table to the tokenizer (Qwen: 151,936 -> 151,665 rows) on its copy alone.

`record_thoughts(wrapper)` collects every realigned latent vector it feeds back, for the equality check.
"""

from __future__ import annotations

import copy
import importlib
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

NEEDED = ("models.py", "methods/latent_mas.py", "methods/__init__.py", "utils.py", "prompts.py")


def check_official_dir(path: str | None) -> Path:
    """The checkout's path, or a ValueError naming what is missing and how to get it."""
    how = "fetch it yourself (git clone https://github.com/Gen-Verse/LatentMAS DIR) and pass --official DIR."
    if not path:
        raise ValueError("no official LatentMAS checkout given: " + how)
    root = Path(path).expanduser().resolve()
    missing = [f for f in NEEDED if not (root / f).is_file()]
    if missing:
        raise ValueError(f"{root} is not a LatentMAS checkout (missing {', '.join(missing)}): " + how)
    return root


def _cache_length(past) -> int:
    if past is None:
        return 0
    if hasattr(past, "get_seq_length"):
        return int(past.get_seq_length())
    return int(past[0][0].shape[-2])  # a legacy tuple cache


def load_official(path: str | Path) -> types.SimpleNamespace:
    """Import the checkout's `models` and `methods.latent_mas` modules with the adapters applied."""
    root = check_official_dir(str(path))
    if importlib.util.find_spec("vllm") is None and "vllm" not in sys.modules:
        stub = types.ModuleType("vllm")

        class SamplingParams:  # inert: only the vLLM path of the official code reads it
            def __init__(self, **kwargs) -> None:
                self.kwargs = kwargs

        stub.SamplingParams = SamplingParams
        sys.modules["vllm"] = stub
    sys.path.insert(0, str(root))
    try:
        models = importlib.import_module("models")
        latent_mas = importlib.import_module("methods.latent_mas")
    finally:
        sys.path.remove(str(root))
    models._past_length = _cache_length
    latent_mas._past_length = _cache_length
    return types.SimpleNamespace(root=root, models=models, latent_mas=latent_mas, commit=_commit(root))


def _commit(root: Path) -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        marker = root / "COMMIT"  # a checkout made with `git archive` has no .git: note it there
        return marker.read_text().strip() if marker.is_file() else "unknown"


def greedy(wrapper) -> list[int]:
    """Make `wrapper.model.generate` decode greedily; returns a list that receives each row's number of
    generated tokens (up to and including its first end-of-sequence token)."""
    hf = wrapper.model
    original = hf.generate
    counts: list[int] = []
    eos = wrapper.tokenizer.eos_token_id

    def generate(*args, **kwargs):
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        kwargs.pop("cache_position", None)  # 5.x generate derives it from the cache and rejects it
        out = original(*args, **kwargs)
        prompt = kwargs["input_ids"].shape[1]
        for row in out.sequences[:, prompt:]:
            hits = (row == eos).nonzero()
            counts.append(int(hits[0]) + 1 if len(hits) else int(row.shape[0]))
        return out

    hf.generate = generate
    return counts


def record_thoughts(wrapper) -> list[torch.Tensor]:
    """Collect every realigned vector (B, D) the wrapper feeds back as a latent step, in order."""
    original = wrapper._apply_latent_realignment
    seen: list[torch.Tensor] = []

    def apply(hidden: torch.Tensor, model: torch.nn.Module) -> torch.Tensor:
        out = original(hidden, model)
        seen.append(out.detach().clone())
        return out

    wrapper._apply_latent_realignment = apply
    return seen


def use_prompts(official: types.SimpleNamespace, build: Callable[[str, str], list[dict]]) -> None:
    """Make the official latent method build its agents' chat messages with `build(role, question)`."""

    def builder(role, question, context="", method=None, args=None):
        return build(role, question)

    official.latent_mas.build_agent_message_sequential_latent_mas = builder
    official.latent_mas.build_agent_message_hierarchical_latent_mas = builder


@contextmanager
def shared_weights(official: types.SimpleNamespace, hf: torch.nn.Module) -> Iterator[None]:
    """While open, the official `AutoModelForCausalLM.from_pretrained` returns a copy of `hf` (modules,
    config and Parameter objects copied; every weight and buffer the same storage), in `hf`'s dtype."""
    real = official.models.AutoModelForCausalLM

    class Shared:
        @staticmethod
        def from_pretrained(*args, **kwargs) -> torch.nn.Module:
            # a new Parameter over the same storage: the official resize replaces `.data` of its own
            # embedding Parameter, which must not resize ours
            memo = {id(p): torch.nn.Parameter(p.detach(), p.requires_grad) for p in hf.parameters()}
            memo.update({id(t): t for t in hf.buffers()})
            return copy.deepcopy(hf, memo)

    official.models.AutoModelForCausalLM = Shared
    try:
        yield
    finally:
        official.models.AutoModelForCausalLM = real
