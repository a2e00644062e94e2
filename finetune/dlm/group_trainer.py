"""`trl.GRPOTrainer` that reads each distinct prompt once per step, in generation and in scoring.

TRL runs a step's [prompt][completion] rows one forward each, so every prompt is read once per completion,
three times a step (generation's prefill, the reference's and the policy's log-probabilities). For DLM's
one-action completions the prompt is almost the whole row; `latent.group_scoring` reads it once and shares
its KV cache across the group. Off the CUDA kernels TRL also projects every prompt position onto the
vocabulary, which the shared path skips. Both paths compute the same quantities (tests compare them);
what the shared path does not cover (logit transforms, images, tools, vLLM, MoE auxiliary loss) takes
TRL's own.
"""

from __future__ import annotations

from typing import Any

from trl import GRPOTrainer

from latent.group_scoring import completion_logprobs, prompts_prefilled_once, supports_group_scoring


class GroupScoringGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose generation prefill and `_get_per_token_logps_and_entropies` go through
    `latent.group_scoring`."""

    def _generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        args = (prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        plain = not (self.use_vllm or self.use_transformers_continuous_batching or multimodal_fields)
        plain = plain and not has_tool_images and (images is None or all(i is None for i in images))
        model = self.accelerator.unwrap_model(self.model_wrapped)
        if not plain or not supports_group_scoring(model):
            return super()._generate_single_turn(*args)
        with prompts_prefilled_once(model):
            return super()._generate_single_turn(*args)

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **inputs: Any,
    ):
        if (
            compute_aux_loss
            or any(v is not None for v in inputs.values())
            or not supports_group_scoring(model)
        ):
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **inputs,
            )
        # one pass over the whole batch: its distinct prompts are few, so TRL's `batch_size` chunks are not needed
        with self.accelerator.autocast():
            logps, entropy = completion_logprobs(
                model, input_ids, attention_mask, logits_to_keep, self.temperature, compute_entropy
            )
        return logps, entropy, None
