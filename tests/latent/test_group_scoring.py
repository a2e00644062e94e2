"""Group scoring reads each prompt once and must give what the full-row forward gives: values and gradients."""

from __future__ import annotations

import pytest
import torch

from latent.group_scoring import completion_logprobs, supports_group_scoring
from latent.testing import tiny_model


def _grpo_batch(vocab: int, pad: int, group: int = 4, completion: int = 3):
    """Three distinct prompts of different lengths (left-padded), `group` completions each (right-padded,
    lengths 1..completion), rows shuffled so a group's rows are not adjacent."""
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, vocab, (n,), generator=g) for n in (5, 9, 7)]
    width = max(len(p) for p in prompts)
    ids, mask = [], []
    for p in prompts:
        for j in range(group):
            n = 1 + j % completion
            row = torch.full((width + completion,), pad)
            m = torch.zeros(width + completion, dtype=torch.long)
            row[width - len(p) : width], m[width - len(p) : width] = p, 1
            row[width : width + n] = torch.randint(3, vocab, (n,), generator=g)
            m[width : width + n] = 1
            ids.append(row)
            mask.append(m)
    order = torch.randperm(len(ids), generator=g)
    return torch.stack(ids)[order], torch.stack(mask)[order], completion


def _full_row(model, ids, mask, c, temperature):
    """The reference: one forward over whole rows, as TRL's scoring does."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, -c - 1 : -1].float() / temperature
    logp = torch.log_softmax(logits, -1)
    keep = mask[:, -c:].bool()
    token = logp.gather(-1, ids[:, -c:].unsqueeze(-1)).squeeze(-1).masked_fill(~keep, 0.0)
    return token, (-(logp.exp() * logp).sum(-1)).masked_fill(~keep, 0.0)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_group_scoring_equals_the_full_row_forward_with_lora_gradients(arch, tmp_path):
    from peft import LoraConfig, get_peft_model

    lm = tiny_model(arch, tmp_path / arch, layers=2)
    model = get_peft_model(lm.model, LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"]))
    for name, p in model.named_parameters():  # LoRA B starts at zero: give it values so gradients differ
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.2)
    assert supports_group_scoring(model)
    ids, mask, c = _grpo_batch(model.config.vocab_size, model.config.pad_token_id)
    weights = torch.linspace(-1.0, 1.0, ids.shape[0])[:, None]  # per-row advantages of either sign

    def grads(fn):
        model.zero_grad()
        logp, entropy = fn()
        ((logp * weights).sum() + 0.1 * entropy.sum()).backward()
        return (
            logp.detach(),
            entropy.detach(),
            {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad},
        )

    ref = grads(lambda: _full_row(model, ids, mask, c, 0.7))
    got = grads(lambda: completion_logprobs(model, ids, mask, c, temperature=0.7, compute_entropy=True))
    assert (ref[0] != 0).sum() == mask[:, -c:].sum()  # every real completion token is scored
    torch.testing.assert_close(got[0], ref[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], ref[1], atol=1e-5, rtol=1e-5)
    assert ref[2] and ref[2].keys() == got[2].keys()
    for name, g in ref[2].items():
        assert g.abs().max() > 0, name
        torch.testing.assert_close(got[2][name], g, atol=1e-5, rtol=1e-4, msg=name)


def test_one_token_completions_need_no_second_forward(tmp_path):
    lm = tiny_model("llama", tmp_path / "m")
    ids, mask, _ = _grpo_batch(lm.model.config.vocab_size, lm.model.config.pad_token_id, completion=1)
    with torch.no_grad():
        ref, _ = _full_row(lm.model, ids, mask, 1, 1.0)
        got, entropy = completion_logprobs(lm.model, ids, mask, 1)
    assert entropy is None
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_models_with_logit_transforms_take_the_full_row_path(tmp_path):
    lm = tiny_model("llama", tmp_path / "m")
    assert supports_group_scoring(lm.model)
    lm.model.config.final_logit_softcapping = 30.0
    assert not supports_group_scoring(lm.model)


def test_completion_length_is_checked(tmp_path):
    lm = tiny_model("llama", tmp_path / "m")
    ids = torch.ones((2, 4), dtype=torch.long)
    with pytest.raises(ValueError, match="completion_length 4"):
        completion_logprobs(lm.model, ids, torch.ones_like(ids), 4)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_generation_with_prompts_prefilled_once_matches_plain_generate(arch, tmp_path):
    """Same greedy tokens and scores; the prompt columns are read once per distinct prompt (counted at the
    embedding); outside the block `generate` is the model's own again."""
    from latent.group_scoring import prompts_prefilled_once

    model = tiny_model(arch, tmp_path / arch).model
    pad = model.config.pad_token_id
    g = torch.Generator().manual_seed(1)
    a, b = torch.randint(3, 200, (4,), generator=g), torch.randint(3, 200, (6,), generator=g)
    ids = torch.stack([torch.cat([torch.full((2,), pad), a]), b, torch.cat([torch.full((2,), pad), a]), b, b])
    mask = (torch.arange(6)[None] >= torch.tensor([2, 0, 2, 0, 0])[:, None]).long()
    kw = dict(
        max_new_tokens=3, do_sample=False, pad_token_id=pad, output_scores=True, return_dict_in_generate=True
    )
    read = []
    hook = model.get_input_embeddings().register_forward_hook(lambda m, i, o: read.append(i[0].numel()))
    with torch.no_grad():
        plain = model.generate(input_ids=ids, attention_mask=mask, **kw)
        n_plain, read[:] = sum(read), []
        with prompts_prefilled_once(model):
            shared = model.generate(input_ids=ids, attention_mask=mask, **kw)
        n_shared = sum(read)
    hook.remove()
    assert "generate" not in vars(model)
    assert torch.equal(plain.sequences, shared.sequences)
    for x, y in zip(plain.scores, shared.scores):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)
    decode = 2 * 5  # two decode steps of one token per row
    assert n_plain == 5 * 6 + decode
    assert n_shared == 2 * 5 + 5 + decode  # two distinct prompts once (all but the last column), then 5 rows
